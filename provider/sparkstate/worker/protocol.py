"""Data-channel frames shared by the socket and py4j transports (docs/internals/bridge.md, "Data frames").

All integers are little-endian int32 (`<i`), matching the shim's ByteBuffer order.

Request:  u8 op | i32 handle | i32 len | payload[len]
BATCH     payload = i32 n | i32 klen[n] | i32 vlen[n] | (key_i value_i)...   vlen = -1 removes
GET       payload = storage key                   -> i32 vlen | value   (vlen = -1: absent)
SCAN_OPEN payload = byte prefix                    -> chunk
SCAN_NEXT payload = i32 cursor                     -> chunk
SCAN_CLOSE payload = i32 cursor                    (no response)
SYNC      payload = empty                          -> i32 0
SHM_ATTACH payload = utf-8 segment path            -> i32 0   (first frame on a socket; see shm_channel)
GET_MANY  payload = i32 n | i32 klen[n] | key_i... -> i32 n | i32 vlen[n] | value_i...   (vlen = -1: absent)
chunk     = i32 n | u8 done | i32 cursor | i32 klen[n] | i32 vlen[n] | (key_i value_i)...
error     = i32 -2 | i32 len | utf-8 message       (instead of any sync response)

Validation (every frame, on the socket and in shared memory): the op must be known and the payload
length between 0 and MAX_PAYLOAD and within what arrived; a header that fails is a framing error: the
worker answers with an error frame and closes the connection, since nothing after it can be trusted.
Inside a payload, counts and lengths must add up to exactly what arrived, keys carry their 4-byte key
group (KEY_GROUP_BYTES), values are -1 (remove) or more, and a cursor payload is exactly one i32; such a
frame is answered with an error (or, for an asynchronous frame, the session's pending error) and the
connection stays usable.
"""
from __future__ import annotations

import struct
import sys
from array import array
from typing import Iterable, Sequence

from ..errors import ProtocolError

OP_BATCH = 1
OP_GET = 2
OP_SCAN_OPEN = 3
OP_SCAN_NEXT = 4
OP_SCAN_CLOSE = 5
OP_SYNC = 6
OP_SHM_ATTACH = 7  # socket only, first frame: payload = segment path; -> i32 0 (then frames move there)
OP_GET_MANY = 8  # the gets a join's eviction pass is about to make, in one round trip

SYNC_OPS = frozenset({OP_GET, OP_SCAN_OPEN, OP_SCAN_NEXT, OP_SYNC, OP_GET_MANY})
KNOWN_OPS = frozenset({OP_BATCH, OP_GET, OP_SCAN_OPEN, OP_SCAN_NEXT, OP_SCAN_CLOSE, OP_SYNC, OP_SHM_ATTACH,
                       OP_GET_MANY})
# The largest payload a frame may announce: far above any frame the shim sends (BATCH frames are flushed
# at 32 KiB; one record can exceed that only with a value of that size), and a bound on what a bad
# header can make the worker wait for or allocate.
MAX_PAYLOAD = 256 << 20
# Every storage key starts with its key group (docs/internals/keys.md, "Keys and key groups").
KEY_GROUP_BYTES = 4

HEADER = struct.Struct("<Bii")
INT = struct.Struct("<i")
CHUNK_HEADER = struct.Struct("<iBi")

ABSENT = INT.pack(-1)
OK = INT.pack(0)
ERROR_CODE = -2

_LITTLE = sys.byteorder == "little"


def _int_array(buf: bytes | memoryview, offset: int, count: int) -> Sequence[int]:
    """`count` little-endian int32 values at `offset`, without a per-value unpack on x86."""
    if _LITTLE:
        return memoryview(buf)[offset:offset + 4 * count].cast("i")
    return struct.unpack_from(f"<{count}i", buf, offset)


def check_header(op: int, length: int) -> str | None:
    """Why a frame header cannot be trusted (framing is lost), or None when it is sound."""
    if op not in KNOWN_OPS:
        return f"unknown op {op}"
    if length < 0 or length > MAX_PAYLOAD:
        return f"{op_name(op)} frame announces a payload of {length} bytes (0 to {MAX_PAYLOAD} allowed)"
    return None


def op_name(op: int) -> str:
    return _OP_NAMES.get(op, f"op {op}")


_OP_NAMES = {OP_BATCH: "BATCH", OP_GET: "GET", OP_SCAN_OPEN: "SCAN_OPEN", OP_SCAN_NEXT: "SCAN_NEXT",
             OP_SCAN_CLOSE: "SCAN_CLOSE", OP_SYNC: "SYNC", OP_SHM_ATTACH: "SHM_ATTACH", OP_GET_MANY: "GET_MANY"}


def decode_cursor(op: int, payload: bytes) -> int:
    """The cursor id of a SCAN_NEXT or SCAN_CLOSE payload."""
    if len(payload) != 4:
        raise ProtocolError(f"{op_name(op)} payload has {len(payload)} bytes, not a 4-byte cursor id")
    return INT.unpack(payload)[0]


def decode_batch(payload: bytes) -> list[tuple[bytes, bytes | None]]:
    """Records of a BATCH payload, in order; a None value is a remove."""
    size = len(payload)
    if size < 4:
        raise ProtocolError(f"BATCH payload of {size} bytes has no record count")
    (n,) = INT.unpack_from(payload, 0)
    if n == 1 and size >= 12:
        # The per-row case: every get flushes the put before it, so most BATCH frames hold one record.
        _, klen, vlen = _ONE_RECORD.unpack_from(payload, 0)
        end = 12 + klen + max(vlen, 0)
        if klen < KEY_GROUP_BYTES or vlen < -1 or end != size:
            raise ProtocolError(_bad_batch(1, size))
        return [(payload[12:12 + klen], None if vlen < 0 else payload[12 + klen:end])]
    lens_end = 4 + 8 * n
    if n < 0 or lens_end > size:
        raise ProtocolError(f"BATCH announces {n} records but has {size} bytes")
    klens = _int_array(payload, 4, n)
    vlens = _int_array(payload, 4 + 4 * n, n)
    if _too_short(payload, n) if n >= 64 else n and (min(klens) < KEY_GROUP_BYTES or min(vlens) < -1):
        raise ProtocolError(_bad_batch(n, size))
    records: list[tuple[bytes, bytes | None]] = []
    append = records.append
    off = lens_end
    for klen, vlen in zip(klens, vlens):  # once per put: no per-record indexing
        key = payload[off:off + klen]
        off += klen
        if vlen < 0:
            append((key, None))
        else:
            append((key, payload[off:off + vlen]))
            off += vlen
    if off != size:
        raise ProtocolError(f"BATCH of {n} records: lengths cover {off} of {size} bytes")
    return records


_ONE_RECORD = struct.Struct("<iii")


def decode_keys(payload: bytes) -> list[bytes]:
    """The keys of a GET_MANY payload, in order."""
    size = len(payload)
    if size < 4:
        raise ProtocolError(f"GET_MANY payload of {size} bytes has no key count")
    (n,) = INT.unpack_from(payload, 0)
    off = 4 + 4 * n
    if n < 0 or off > size:
        raise ProtocolError(f"GET_MANY announces {n} keys but has {size} bytes")
    keys: list[bytes] = []
    for klen in _int_array(payload, 4, n):
        if klen < KEY_GROUP_BYTES:
            raise ProtocolError(f"GET_MANY key of {klen} bytes is shorter than its {KEY_GROUP_BYTES}-byte key group")
        keys.append(payload[off:off + klen])
        off += klen
    if off != size:
        raise ProtocolError(f"GET_MANY of {n} keys: lengths cover {off} of {size} bytes")
    return keys


def _int32s(values: Iterable[int]) -> bytes:
    """Little-endian int32s, the frames' length arrays."""
    out = array("i", values)
    if not _LITTLE:
        out.byteswap()
    return out.tobytes()


def encode_values(values: Sequence[bytes | None]) -> bytes:
    """The response to a GET_MANY: the values in the keys' order, -1 for an absent key."""
    lens = _int32s(-1 if v is None else len(v) for v in values)
    return INT.pack(len(values)) + lens + b"".join(v for v in values if v is not None)


def encode_keys(keys: Sequence[bytes]) -> bytes:
    """Inverse of decode_keys (used by tests and Python-side clients): a GET_MANY response's layout."""
    return encode_values(keys)


def _bad_batch(n: int, size: int) -> str:
    return (f"BATCH of {n} records ({size} bytes) has a key shorter than its {KEY_GROUP_BYTES}-byte key group, "
            f"a value length below -1, or lengths that do not cover the payload")


def _too_short(payload: bytes, n: int) -> bool:
    """Whether a key length of a big BATCH payload is below KEY_GROUP_BYTES or a value length below -1,
    vectorized (a Python pass over 5,000 lengths costs ~0.2 ms, numpy ~5 us)."""
    import numpy as np

    lengths = np.frombuffer(payload, dtype="<i4", count=2 * n, offset=4)
    return bool(lengths[:n].min() < KEY_GROUP_BYTES or lengths[n:].min() < -1)


def encode_batch(records: Sequence[tuple[bytes, bytes | None]]) -> bytes:
    """Inverse of decode_batch (used by tests and Python-side clients)."""
    klens = _int32s(len(k) for k, _ in records)
    vlens = _int32s(-1 if v is None else len(v) for _, v in records)
    body = b"".join(k + (v or b"") for k, v in records)
    return INT.pack(len(records)) + klens + vlens + body


def encode_chunk(rows: Sequence[tuple[bytes, bytes]], done: bool, cursor: int) -> bytes:
    lens = _int32s([len(k) for k, _ in rows] + [len(v) for _, v in rows])
    body = b"".join([b for row in rows for b in row])
    return CHUNK_HEADER.pack(len(rows), 1 if done else 0, cursor) + lens + body


def decode_chunk(data: bytes) -> tuple[list[tuple[bytes, bytes]], bool, int]:
    n, done, cursor = CHUNK_HEADER.unpack_from(data, 0)
    if n == ERROR_CODE:
        raise ProtocolError(decode_error(data))
    klens = _int_array(data, CHUNK_HEADER.size, n)
    vlens = _int_array(data, CHUNK_HEADER.size + 4 * n, n)
    off = CHUNK_HEADER.size + 8 * n
    rows = []
    for i in range(n):
        k = data[off:off + klens[i]]; off += klens[i]
        v = data[off:off + vlens[i]]; off += vlens[i]
        rows.append((k, v))
    return rows, bool(done), cursor


def encode_value(value: bytes | None) -> bytes:
    return ABSENT if value is None else INT.pack(len(value)) + value


def encode_error(message: str) -> bytes:
    raw = message.encode("utf-8", "replace")
    return INT.pack(ERROR_CODE) + INT.pack(len(raw)) + raw


def decode_error(data: bytes) -> str:
    (length,) = INT.unpack_from(data, 4)
    return data[8:8 + length].decode("utf-8", "replace")


def encode_request(op: int, handle: int, payload: bytes = b"") -> bytes:
    return HEADER.pack(op, handle, len(payload)) + payload
