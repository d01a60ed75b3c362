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
