import pytest

from sparkstate.errors import ProtocolError
from sparkstate.worker import protocol as p


def test_batch_round_trip_keeps_order_and_removes():
    records = [(b"key1", b"v1"), (b"key2", None), (b"key3", b""), (b"key1", b"v" * 1000)]
    assert p.decode_batch(p.encode_batch(records)) == records


def test_batch_with_inconsistent_lengths_is_rejected():
    data = p.encode_batch([(b"key1", b"value")])
    with pytest.raises(ProtocolError):
        p.decode_batch(data + b"extra")
    with pytest.raises(ProtocolError):
        p.decode_batch(p.INT.pack(10))


def test_chunk_round_trip():
    rows = [(b"a", b"1"), (b"bb", b""), (b"ccc", b"333")]
    assert p.decode_chunk(p.encode_chunk(rows, True, 7)) == (rows, True, 7)


def test_error_encoding():
    data = p.encode_error("boom ü")
    assert p.INT.unpack_from(data, 0)[0] == p.ERROR_CODE
    assert p.decode_error(data) == "boom ü"
