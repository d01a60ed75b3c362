import pytest
from sparkstate.worker import protocol as p
from sparkstate.worker.dispatcher import Session

from .fakes import DictStore


def _session():
    store = DictStore()
    return Session(lambda handle: store), store


def test_get_sees_earlier_pipelined_batch():
    session, _ = _session()
    assert session.handle(p.OP_BATCH, 1, p.encode_batch([(b"kkkk", b"v")])) is None
    assert session.handle(p.OP_GET, 1, b"kkkk") == p.encode_value(b"v")
    assert session.handle(p.OP_GET, 1, b"missing") == p.ABSENT


def _values(response: bytes) -> list[bytes | None]:
    """Decodes a GET_MANY response."""
    (n,) = p.INT.unpack_from(response, 0)
    lens = [p.INT.unpack_from(response, 4 + 4 * i)[0] for i in range(n)]
    out, off = [], 4 + 4 * n
    for length in lens:
        out.append(None if length < 0 else response[off:off + length])
        off += max(length, 0)
    assert off == len(response)
    return out


def test_get_many_answers_each_key_in_order_after_the_batches_before_it():
    session, _ = _session()
    session.handle(p.OP_BATCH, 1, p.encode_batch([(b"kkk1", b"one"), (b"kkk2", b""), (b"kkk3", b"3")]))
    session.handle(p.OP_BATCH, 1, p.encode_batch([(b"kkk3", None)]))
    response = session.handle(p.OP_GET_MANY, 1, p.encode_keys([b"kkk2", b"none", b"kkk1", b"kkk3"]))
    assert _values(response) == [b"", None, b"one", None]
    assert _values(session.handle(p.OP_GET_MANY, 1, p.encode_keys([]))) == []


@pytest.mark.parametrize("payload, message", [
    (b"", "no key count"),
    (p.INT.pack(2) + p.INT.pack(4), "announces 2 keys"),
    (p.encode_keys([b"kkk1", b"kk"]), "shorter than its 4-byte key group"),
    (p.encode_keys([b"kkk1"]) + b"x", "lengths cover 12 of 13 bytes"),
])
def test_a_malformed_get_many_is_answered_with_an_error_and_the_session_goes_on(payload, message):
    session, _ = _session()
    response = session.handle(p.OP_GET_MANY, 1, payload)
    assert p.INT.unpack_from(response, 0)[0] == p.ERROR_CODE
    assert message in p.decode_error(response)
    assert session.handle(p.OP_SYNC, 1, b"") == p.OK


def test_async_error_is_reported_by_next_sync_frame_once():
    session, store = _session()
    store.fail_next_batch = True
    session.handle(p.OP_BATCH, 1, p.encode_batch([(b"kkkk", b"v")]))
    response = session.handle(p.OP_SYNC, 1, b"")
    assert p.INT.unpack_from(response, 0)[0] == p.ERROR_CODE
    assert "disk full" in p.decode_error(response)
    assert session.handle(p.OP_SYNC, 1, b"") == p.OK


def test_scan_streams_chunks_and_closes_cursor(monkeypatch):
    from sparkstate.worker import dispatcher
    monkeypatch.setattr(dispatcher, "CHUNK_MAX_ROWS", 2)
    session, store = _session()
    session.handle(p.OP_BATCH, 1, p.encode_batch([(i.to_bytes(4, "big"), b"x") for i in range(5)]))
    rows, done, cursor = p.decode_chunk(session.handle(p.OP_SCAN_OPEN, 1, b""))
    seen = list(rows)
    while not done:
        rows, done, cursor = p.decode_chunk(session.handle(p.OP_SCAN_NEXT, 1, p.INT.pack(cursor)))
        seen += rows
    assert [k for k, _ in seen] == [i.to_bytes(4, "big") for i in range(5)]
    assert store.cursors[0].closed


def test_session_close_closes_open_cursors():
    session, store = _session()
    session.handle(p.OP_BATCH, 1, p.encode_batch([(i.to_bytes(4, "big"), b"x") for i in range(5000)]))
    session.handle(p.OP_SCAN_OPEN, 1, b"")
    assert not store.cursors[0].closed
    session.close()
    assert store.cursors[0].closed


def test_unknown_cursor_is_an_error_not_a_crash():
    session, _ = _session()
    response = session.handle(p.OP_SCAN_NEXT, 1, p.INT.pack(12345))
    assert "not open" in p.decode_error(response)
