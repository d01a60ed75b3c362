"""The shared-memory data channel (transport `shm`): the same frames as the socket, without a syscall per get.

Why: on the 2-vCPU machines we measure on, a get over the Unix socket costs two context switches and four
syscalls, ~15-18 us of CPU per round trip (docs/internals/bridge.md, "transport=shm"), more than half
of what Spark's RocksDB provider spends on a whole row. Here the JVM writes its frames into a segment both
processes map, bumps a sequence number, and the worker, which waits by yielding its CPU instead of
sleeping in the kernel, answers in the same segment. The socket stays open as a doorbell for a worker
that has gone to sleep (no request for SPIN_NS) and to carry the attach handshake.

Segment layout (little-endian; offsets in bytes; docs/internals/bridge.md, "transport=shm"):

    0    i64 request seq      JVM: bumped after the request bytes and fields below are written
    8    i32 request length
    12   i32 request flags    MORE: more request bytes follow in the next publish; CONTINUE: send the
                              next piece of the current response; CLOSE: the JVM is done with the channel
    64   i64 response seq     worker: set to the request seq once the request is handled
    72   i32 response length
    76   i32 response flags   MORE: the response continues (the JVM asks for it with CONTINUE)
    128  i64 worker sleeping  worker: 1 while it blocks on the doorbell socket
    192  i64 client thread    JVM: native thread id of the task thread that publishes
    4096            request area (capacity bytes)
    4096+capacity   response area (capacity bytes)

Every publish is answered (an async-only publish with an empty response), so the JVM reuses the request
area only after the worker has copied it out. The protocol relies on x86-64's ordered stores (TSO): the
worker writes the response bytes before the response seq with plain stores, which CPython cannot fence.
Other machines use the socket transport (see `supported`).

While it serves one task thread, the worker's data thread moves itself to the CPU that thread last ran
on, so the two take turns on one CPU rather than each waiting for the other across CPUs.
"""
from __future__ import annotations

import mmap
import os
import platform
import socket
import struct
import sys
import time
from typing import Callable

from .. import liveness
from . import protocol as p
from .dispatcher import Session, describe_error

HEADER_BYTES = 4096
REQ_SEQ, REQ_LEN, REQ_FLAGS = 0, 8, 12
RESP_SEQ, RESP_LEN, RESP_FLAGS = 64, 72, 76
WORKER_SLEEPING = 128
CLIENT_TID = 192

FLAG_MORE = 1
FLAG_CONTINUE = 2
FLAG_CLOSE = 4

# How long the worker yields its CPU waiting for the next request before it sleeps on the doorbell. A
# row's Spark work between two gets is ~20 us; a batch boundary is a pause of milliseconds.
SPIN_NS = 200_000
# While asleep the worker rechecks the segment this often, in case a doorbell raced with going to sleep.
SLEEP_RECHECK_S = 0.01
# Requests between two checks of which CPU the client thread runs on.
FOLLOW_EVERY = 256

_LEN_FLAGS = struct.Struct("<ii")
_KNOWN_FLAGS = FLAG_MORE | FLAG_CONTINUE | FLAG_CLOSE
# A request sent in pieces (MORE) may not grow past this: the largest frame plus a flush's worth.
MAX_REQUEST = p.MAX_PAYLOAD + (1 << 20)


class _Fatal(Exception):
    """The request cannot be trusted: answer with an error and end the session."""


def _fatal(reason: str) -> bytes:
    return p.encode_error(f"ProtocolError: {reason}; closing the data connection")


def supported() -> bool:
    """Linux on x86-64: the machines whose store order the protocol relies on."""
    return sys.platform.startswith("linux") and platform.machine().lower() in ("x86_64", "amd64")


class CpuFollower:
    """Keeps the calling thread on the CPU its client thread last ran on (read from /proc)."""

    def __init__(self) -> None:
        try:
            self._allowed = os.sched_getaffinity(0)
        except (AttributeError, OSError):
            self._allowed = set()
        self._enabled = len(self._allowed) > 1
        self._pinned: int | None = None

    def follow(self, tid: int) -> None:
        if not self._enabled or tid <= 0:
            return
        try:
            with open(f"/proc/{tid}/stat", "rb") as f:
                cpu = int(f.read().rsplit(b")", 1)[1].split()[36])
            if cpu != self._pinned and cpu in self._allowed:
                os.sched_setaffinity(0, {cpu})
                self._pinned = cpu
        except (OSError, ValueError, IndexError):
            self._enabled = False  # no /proc or not allowed: stay where the kernel puts us
            self.release()

    def release(self) -> None:
        """Back to every allowed CPU (before sleeping, so the wake-up can run anywhere)."""
        if self._pinned is not None:
            try:
                os.sched_setaffinity(0, self._allowed)
            except OSError:
                pass
            self._pinned = None


class ShmServer:
    """Serves one attached segment until the JVM closes it. Not thread-safe: one channel, one thread."""

    def __init__(self, conn: socket.socket, path: str, store_of: Callable[[int], object]):
        fd = os.open(path, os.O_RDWR)
        try:
            size = os.fstat(fd).st_size
            if size <= HEADER_BYTES or (size - HEADER_BYTES) % 2:
                raise ValueError(f"shared-memory segment {path} has {size} bytes, not a valid layout")
            self._map = mmap.mmap(fd, size)
        finally:
            os.close(fd)
        self._capacity = (size - HEADER_BYTES) // 2
        self._req = HEADER_BYTES
        self._resp = HEADER_BYTES + self._capacity
        self._words = memoryview(self._map)[:HEADER_BYTES].cast("q")  # aligned 8-byte loads and stores
        self._conn = conn
        self._session = Session(store_of)
        self._follower = CpuFollower()
        self._rest = b""  # the part of the last response still to send (CONTINUE)
        self._woke = True  # check the client's CPU on the first request and after every sleep
        # Read before the attach is answered: the JVM publishes its first request only after that.
        self._last_seq = self._words[REQ_SEQ // 8]

    def serve(self) -> None:
        """Answer publishes until the JVM closes the channel. A request that cannot be trusted (a bad
        length or flag, a frame overrunning it) is answered with an error and ends the session (the
        socket closes behind it, so the JVM sees EOF); so does any unexpected failure: never silence."""
        words, m = self._words, self._map
        req = self._req
        unpack_header, header_size = p.HEADER.unpack_from, p.HEADER.size
        unpack_len_flags = _LEN_FLAGS.unpack_from
        handle_frame, op_get = self._session.handle, p.OP_GET
        answer, follower = self._answer, self._follower
        capacity = self._capacity
        last = self._last_seq
        partial = bytearray()
        served = 0
        seq = None
        try:
            while True:
                seq = self._await_request(last)
                if seq is None:
                    return
                last = seq
                length, flags = unpack_len_flags(m, REQ_LEN)
                if flags & FLAG_CLOSE:
                    return
                if length < 0 or length > capacity or flags & ~_KNOWN_FLAGS:
                    answer(seq, _fatal(f"request of {length} bytes with flags {flags} (capacity {capacity})"))
                    return
                served += 1
                if served >= FOLLOW_EVERY or self._woke:
                    follower.follow(words[CLIENT_TID // 8])
                    served, self._woke = 0, False
                if flags & FLAG_CONTINUE:
                    answer(seq, self._rest)
                elif flags & FLAG_MORE:
                    if len(partial) + length > MAX_REQUEST:
                        answer(seq, _fatal(f"a request in pieces grew past {MAX_REQUEST} bytes"))
                        return
                    partial += m[req:req + length]
                    answer(seq, b"")
                elif partial:
                    partial += m[req:req + length]
                    response = self._handle_frames(bytes(partial), len(partial))
                    partial.clear()
                    answer(seq, response)
                else:
                    op, handle, payload_len = unpack_header(m, req) if length >= header_size else (0, 0, -1)
                    if op == op_get and payload_len + header_size == length:
                        # The per-row fast path: a lone GET, without slicing the request into frames.
                        answer(seq, handle_frame(op, handle, m[req + header_size:req + length]))
                    else:
                        answer(seq, self._handle_frames(m[req:req + length], length))
                seq = None  # answered
        except _Fatal as fatal:
            if seq is not None:
                answer(seq, _fatal(str(fatal)))
        except Exception as exc:  # a bug, never a silent hang: answer what is owed, then end the session
            if seq is not None:
                answer(seq, p.encode_error(describe_error(exc, 0, 0) + "; closing the data connection"))
        finally:
            follower.release()
            self._session.close()

    def _handle_frames(self, data: bytes, length: int) -> bytes:
        """Every frame of one publish in order; the response of the last synchronous one (if any)."""
        unpack_header, header_size = p.HEADER.unpack_from, p.HEADER.size
        check_header, tick = p.check_header, liveness.tick
        off, response = 0, b""
        while off < length:
            if length - off < header_size:
                raise _Fatal(f"{length - off} bytes after the last frame, less than a frame header")
            op, handle, payload_len = unpack_header(data, off)
            bad = check_header(op, payload_len)
            start = off + header_size
            off = start + payload_len
            if bad is not None:
                raise _Fatal(bad)
            if off > length:
                raise _Fatal(f"a frame of {payload_len} bytes overruns a {length}-byte request")
            answer = self._session.handle(op, handle, bytes(data[start:off]))
            tick()  # a long publish (many batches) is progress; a lone GET needs none
            if answer is not None:
                response = answer
        return response

    def _answer(self, seq: int, response: bytes) -> None:
        """Writes the response (its first piece if it is larger than the area; the JVM asks for the rest
        with CONTINUE), then answers `seq`."""
        if len(response) > self._capacity:
            response, self._rest = response[:self._capacity], response[self._capacity:]
        else:
            self._rest = b""
        self._map[self._resp:self._resp + len(response)] = response
        _LEN_FLAGS.pack_into(self._map, RESP_LEN, len(response), FLAG_MORE if self._rest else 0)
        self._words[RESP_SEQ // 8] = seq

    def _await_request(self, last: int) -> int | None:
        """The next request seq: yield the CPU while one is likely soon, then sleep on the doorbell."""
        words = self._words
        seq = words[0]
        if seq != last:
            return seq
        yield_cpu = os.sched_yield
        deadline = time.perf_counter_ns() + SPIN_NS
        while True:
            for _ in range(8):
                yield_cpu()
                seq = words[0]
                if seq != last:
                    return seq
            if time.perf_counter_ns() > deadline:
                break
        return self._sleep(last)

    def _sleep(self, last: int) -> int | None:
        words, conn = self._words, self._conn
        sleeping = WORKER_SLEEPING // 8
        self._follower.release()
        self._woke = True
        conn.settimeout(SLEEP_RECHECK_S)
        try:
            while True:
                words[sleeping] = 1
                # A syscall between the store above and the load below: the kernel's locked instructions
                # drain the store buffer on x86, so the JVM sees "sleeping" or we see its new seq. A miss
                # only costs one SLEEP_RECHECK_S.
                os.sched_yield()
                seq = words[0]
                if seq != last:
                    return seq
                try:
                    if not conn.recv(4096):
                        return None  # the JVM closed the connection
                except socket.timeout:
                    pass
                words[sleeping] = 0
                seq = words[0]
                if seq != last:
                    return seq
        finally:
            words[sleeping] = 0
            conn.settimeout(None)

    def close(self) -> None:
        self._words.release()
        self._map.close()

