"""Malformed frames never hang, spin or corrupt: a seeded fuzzer over both channels, and one regression
test per malformation found by hand.

The worker serves two real heap stores: handle 1 takes the fuzzing, handle 2 is written once before and
must be byte-for-byte the same after. Every request must get an answer or a closed connection within a
timeout; afterwards no serving thread is left, none burns CPU, and memory stayed bounded.
"""
from __future__ import annotations

import random
import socket
import struct
import threading
import time
import tracemalloc

import pytest

from sparkstate.worker import protocol as p
from sparkstate.worker import shm_channel as shm
from sparkstate.worker.data_server import DataServer, await_connections_closed
from sparkstate.worker.registry import StoreRegistry

from ..engine.conftest import contents, make_spec
from .fakes import JvmSide, recv_exact

ANSWER_TIMEOUT_S = 5.0
KG = b"\x00\x00\x00\x07"  # a key group prefix


def _key(rng: random.Random) -> bytes:
    return KG + bytes(rng.randrange(256) for _ in range(rng.randrange(0, 6)))


def _valid_batch(rng: random.Random) -> bytes:
    return p.encode_batch([(_key(rng), None if rng.random() < 0.2 else rng.randbytes(rng.randrange(0, 40)))
                           for _ in range(rng.randrange(1, 20))])


def _malformed_batch(rng: random.Random) -> bytes:
    n = rng.randrange(1, 5)
    kind = rng.randrange(5)
    klens = [rng.randrange(4, 8) for _ in range(n)]
    vlens = [rng.randrange(0, 8) for _ in range(n)]
    if kind == 0:
        klens[rng.randrange(n)] = -rng.randrange(1, 100)   # negative key length
    elif kind == 1:
        vlens[rng.randrange(n)] = -rng.randrange(2, 100)   # value length below -1
    elif kind == 2:
        klens[rng.randrange(n)] = rng.randrange(0, 4)      # no key group
    body = b"".join(b"k" * max(k, 0) + b"v" * max(v, 0) for k, v in zip(klens, vlens))
    if kind == 3:
        body = body[:-1] if body else b"x"                  # lengths do not cover the payload
    count = n if kind != 4 else rng.choice([-1, -(2 ** 31), 2 ** 31 - 1, n + 1000])
    return struct.pack(f"<i{n}i{n}i", count, *klens, *vlens) + body


def random_frame(rng: random.Random) -> tuple[bytes, bool]:
    """(frame bytes, whether the worker must answer it on its own)."""
    roll = rng.random()
    handle = rng.choice([1, 1, 1, 99])
    if roll < 0.25:
        return p.encode_request(p.OP_BATCH, handle, _valid_batch(rng)), False
    if roll < 0.40:
        return p.encode_request(p.OP_BATCH, handle, _malformed_batch(rng)), False
    if roll < 0.55:
        return p.encode_request(p.OP_GET, handle, _key(rng) if rng.random() < 0.8 else rng.randbytes(2)), True
    if roll < 0.62:
        return p.encode_request(p.OP_SCAN_OPEN, handle, KG if rng.random() < 0.5 else b""), True
    if roll < 0.70:
        return p.encode_request(p.OP_SCAN_NEXT, handle, rng.randbytes(rng.choice([0, 2, 4, 7]))), True
    if roll < 0.75:
        return p.encode_request(p.OP_SCAN_CLOSE, handle, rng.randbytes(rng.choice([0, 4, 5]))), False
    if roll < 0.82:
        return p.encode_request(p.OP_SYNC, handle, rng.randbytes(rng.choice([0, 0, 3]))), True
    if roll < 0.86:
        keys = p.encode_keys([_key(rng) for _ in range(rng.randrange(0, 4))])
        payload = keys if rng.random() < 0.6 else keys[:rng.randrange(0, len(keys) + 1)] + rng.randbytes(2)
        return p.encode_request(p.OP_GET_MANY, handle, payload), True
    # A header that cannot be trusted: unknown op, negative or huge length.
    op = rng.choice([0, 9, 200, p.OP_GET, p.OP_BATCH])
    length = rng.choice([-1, -9, -(2 ** 31), p.MAX_PAYLOAD + 1, 2 ** 31 - 1]) if op in (p.OP_GET, p.OP_BATCH) \
        else rng.randrange(0, 16)
    return struct.pack("<Bii", op, handle, length) + rng.randbytes(max(0, min(length, 16))), True


@pytest.fixture
def worker(tmp_path):
    """A data server over a registry of two real heap stores; handle 2 holds known contents."""
    registry = StoreRegistry(local_root=str(tmp_path / "local"))
    stores = []
    for part in (1, 2):
        spec = make_spec("file:" + str(tmp_path / "ckpt" / "state" / "0" / str(part)), f"inst-{part}",
                         backend="heap")
        handle = registry.open(spec)
        stores.append(registry.get(handle))
        registry.get(handle).load(0)
    bystander = registry.get(2)
    bystander.apply_batch([(KG + b"b%03d" % i, b"value-%d" % i) for i in range(200)])
    before = contents(bystander)
    path = str(tmp_path / "data.sock")
    DataServer(path, registry.get).start()
    yield path, bystander, before
    registry.close_all()


def _threads() -> int:
    return sum(t.name == "sparkstate-data-conn" and t.is_alive() for t in threading.enumerate())


def _answered(sock: socket.socket) -> tuple[bool, bool]:
    """(an answer arrived, the worker closed the connection); fails the test when neither happens."""
    sock.settimeout(ANSWER_TIMEOUT_S)
    try:
        first = sock.recv(1 << 16)
    except socket.timeout:
        raise AssertionError("the worker neither answered nor closed the connection") from None
    if not first:
        return False, True
    sock.setblocking(False)
    time.sleep(0.005)
    try:
        while True:
            more = sock.recv(1 << 16)
            if not more:
                return True, True
    except BlockingIOError:
        return True, False


def _assert_worker_is_well(baseline_threads: int, bystander, before) -> None:
    assert await_connections_closed(ANSWER_TIMEOUT_S), "a data connection is still being served"
    deadline = time.monotonic() + ANSWER_TIMEOUT_S
    while _threads() > baseline_threads and time.monotonic() < deadline:
        time.sleep(0.01)
    assert _threads() == baseline_threads, "a serving thread outlived its connection"
    cpu = time.process_time()
    time.sleep(0.5)
    assert time.process_time() - cpu < 0.15, "something keeps burning CPU after every connection closed"
    assert contents(bystander) == before, "fuzzing one store changed another"


def test_fuzzed_frames_over_the_socket_are_answered_or_close_the_connection(worker):
    path, bystander, before = worker
    rng = random.Random(20261123)
    baseline = _threads()
    tracemalloc.start()
    sock = None
    closes = answers = 0
    try:
        for _ in range(400):
            if sock is None:
                sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                sock.connect(path)
            frame, answers_itself = random_frame(rng)
            sock.sendall(frame if answers_itself else frame + p.encode_request(p.OP_SYNC, 1))
            answered, closed = _answered(sock)
            answers += answered
            if closed:
                closes += 1
                sock.close()
                sock = None
            if rng.random() < 0.03 and sock is not None:  # a frame cut off, then the JVM goes away
                sock.sendall(p.encode_request(p.OP_BATCH, 1, _valid_batch(rng))[:-3])
                sock.close()
                sock = None
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
        if sock is not None:
            sock.close()
    assert answers > 100 and closes > 10, (answers, closes)
    assert peak < 64 << 20, f"fuzzing took {peak >> 20} MiB"
    _assert_worker_is_well(baseline, bystander, before)


@pytest.mark.skipif(not shm.supported(), reason="the shm transport needs Linux on x86-64")
def test_fuzzed_publishes_in_shared_memory_are_answered_or_close_the_connection(worker, tmp_path):
    path, bystander, before = worker
    rng = random.Random(11232026)
    baseline = _threads()
    capacity = 4096
    jvm = None
    closes = answers = 0
    for i in range(400):
        roll = rng.random()
        garbage = (rng.randbytes(16), rng.choice([-9, -1, capacity + 1, 2 ** 31 - 1, 16]),
                   rng.choice([0, 8, 64, shm.FLAG_MORE | 16]))
        frames = b"".join(random_frame(rng)[0] for _ in range(rng.randrange(1, 4)))
        if rng.random() < 0.1:
            frames = frames[:rng.randrange(1, len(frames))]  # a frame overrunning its request
        for attempt in range(2):
            if jvm is None:
                jvm = JvmSide(path, str(tmp_path / f"segment-{i}-{attempt}"), capacity)
                assert jvm.attach_answer == 0
            try:
                if roll < 0.1:  # a request whose length or flags are garbage
                    jvm.map[shm.HEADER_BYTES:shm.HEADER_BYTES + 16] = garbage[0]
                    shm._LEN_FLAGS.pack_into(jvm.map, shm.REQ_LEN, garbage[1], garbage[2])
                    jvm.seq += 1
                    jvm.words[shm.REQ_SEQ // 8] = jvm.seq
                    if jvm.words[shm.WORKER_SLEEPING // 8]:
                        jvm.sock.sendall(b"\x01")
                else:
                    jvm.publish(frames[:capacity])
                break
            except (BrokenPipeError, ConnectionResetError):
                # the worker closed the channel after the previous answer, later than the check below saw:
                # a close all the same; publish again on a new connection
                closes += 1
                jvm.abandon()
                jvm = None
        deadline = time.monotonic() + ANSWER_TIMEOUT_S
        while jvm.words[shm.RESP_SEQ // 8] != jvm.seq and time.monotonic() < deadline:
            time.sleep(0)
        assert jvm.words[shm.RESP_SEQ // 8] == jvm.seq, "a publish was never answered"
        answers += 1
        jvm.sock.settimeout(0.02)
        try:
            closed = jvm.sock.recv(16) == b""
        except (socket.timeout, BlockingIOError):
            closed = False
        except ConnectionResetError:  # closed with our doorbell bytes unread
            closed = True
        if closed:
            closes += 1
            jvm.abandon()
            jvm = None
    if jvm is not None:
        jvm.close()
        jvm.abandon()
    assert answers == 400 and closes > 10, (answers, closes)
    _assert_worker_is_well(baseline, bystander, before)


# ---- one regression test per malformation found by hand -------------------------------------------

def _connect(path: str) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(path)
    sock.settimeout(ANSWER_TIMEOUT_S)
    return sock


def _error_then_eof(sock: socket.socket) -> str:
    message = _read_error(sock)
    assert sock.recv(1) == b"", "the connection stayed open after a framing error"
    sock.close()
    return message


def test_socket_negative_length_is_a_protocol_error_not_a_read_of_the_whole_stream(worker):
    path, _, _ = worker
    sock = _connect(path)
    sock.sendall(struct.pack("<Bii", p.OP_GET, 1, -1) + p.encode_request(p.OP_SYNC, 1))
    assert "payload of -1 bytes" in _error_then_eof(sock)


def test_socket_unknown_op_is_a_protocol_error(worker):
    path, _, _ = worker
    sock = _connect(path)
    sock.sendall(struct.pack("<Bii", 42, 1, 0))
    assert "unknown op 42" in _error_then_eof(sock)


@pytest.mark.parametrize("payload,reason", [
    (struct.pack("<iii", 1, -5, 3) + b"abc", "key shorter"),
    (struct.pack("<iii", 1, 4, -7) + b"abcd", "below -1"),
    (struct.pack("<iii", 1, 0, 2) + b"vv", "key shorter"),
    (struct.pack("<i", -3), "announces -3 records"),
])
def test_malformed_batches_are_reported_by_the_next_sync_and_store_nothing(worker, payload, reason):
    path, _, _ = worker
    sock = _connect(path)
    sock.sendall(p.encode_request(p.OP_BATCH, 1, payload) + p.encode_request(p.OP_SYNC, 1))
    assert reason in _read_error(sock)
    sock.sendall(p.encode_request(p.OP_SCAN_OPEN, 1, b""))  # the connection is still usable ...
    rows, done, _ = p.decode_chunk(_read_chunk(sock))
    assert done and rows == []  # ... and nothing was stored
    sock.close()


def _read_chunk(sock: socket.socket) -> bytes:
    header = recv_exact(sock, p.CHUNK_HEADER.size)
    n = p.CHUNK_HEADER.unpack(header)[0]
    lens = recv_exact(sock, 8 * n)
    total = sum(struct.unpack(f"<{2 * n}i", lens)) if n else 0
    return header + lens + recv_exact(sock, total)


def _read_error(sock: socket.socket) -> str:
    (code,) = p.INT.unpack(recv_exact(sock, 4))
    assert code == p.ERROR_CODE
    (length,) = p.INT.unpack(recv_exact(sock, 4))
    return recv_exact(sock, length).decode()


def test_scan_next_with_a_short_payload_while_an_error_is_pending_is_answered(worker):
    path, _, _ = worker
    sock = _connect(path)
    sock.sendall(p.encode_request(p.OP_BATCH, 1, struct.pack("<i", -3))  # leaves a pending error
                 + p.encode_request(p.OP_SCAN_NEXT, 1, b"\x01\x02"))
    assert "announces -3 records" in _read_error(sock)
    sock.sendall(p.encode_request(p.OP_SCAN_NEXT, 1, b"\x01\x02"))
    assert "not a 4-byte cursor id" in _read_error(sock)
    sock.close()


@pytest.mark.skipif(not shm.supported(), reason="the shm transport needs Linux on x86-64")
@pytest.mark.parametrize("request_bytes,why", [
    (struct.pack("<Bii", p.OP_GET, 1, -9) + KG, "payload of -9 bytes"),
    (p.encode_request(p.OP_SYNC, 1) + struct.pack("<Bii", p.OP_GET, 1, 100) + KG, "overruns"),
    (b"\x06\x01\x00", "less than a frame header"),
])
def test_shm_request_that_cannot_be_trusted_is_answered_then_the_connection_closes(worker, tmp_path,
                                                                                  request_bytes, why):
    path, _, _ = worker
    baseline = _threads()
    jvm = JvmSide(path, str(tmp_path / "segment"), 4096)
    jvm.publish(request_bytes)
    response, _ = jvm.await_answer(ANSWER_TIMEOUT_S)
    assert p.INT.unpack_from(response, 0)[0] == p.ERROR_CODE and why in p.decode_error(bytes(response))
    jvm.sock.settimeout(ANSWER_TIMEOUT_S)
    assert jvm.sock.recv(1) == b"", "the worker kept serving a channel it cannot trust"
    jvm.abandon()
    assert await_connections_closed(ANSWER_TIMEOUT_S)
    assert _threads() == baseline
    cpu = time.process_time()
    time.sleep(0.3)
    assert time.process_time() - cpu < 0.1, "a thread spins after the bad request"


@pytest.mark.skipif(not shm.supported(), reason="the shm transport needs Linux on x86-64")
def test_shm_request_longer_than_the_segment_is_refused(worker, tmp_path):
    path, _, _ = worker
    jvm = JvmSide(path, str(tmp_path / "segment"), 4096)
    shm._LEN_FLAGS.pack_into(jvm.map, shm.REQ_LEN, 5000, 0)
    jvm.seq += 1
    jvm.words[shm.REQ_SEQ // 8] = jvm.seq
    response, _ = jvm.await_answer(ANSWER_TIMEOUT_S)
    assert "request of 5000 bytes" in p.decode_error(bytes(response))
    jvm.sock.settimeout(ANSWER_TIMEOUT_S)
    assert jvm.sock.recv(1) == b""
    jvm.abandon()


def test_await_connections_closed_waits_for_a_busy_connection(worker):
    path, _, _ = worker
    sock = _connect(path)
    sock.sendall(p.encode_request(p.OP_SYNC, 1))
    recv_exact(sock, 4)
    assert not await_connections_closed(0.2), "an open connection counted as closed"
    closer = threading.Timer(0.3, sock.close)
    closer.start()
    started = time.monotonic()
    assert await_connections_closed(ANSWER_TIMEOUT_S)
    assert time.monotonic() - started >= 0.25
    closer.join()
