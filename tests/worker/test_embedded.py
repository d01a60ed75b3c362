"""The embedded transport's Python half: frames read in place from the JVM's buffer, answers written
into the response buffer (no Jep needed here: bytearrays stand in for the direct ByteBuffers)."""
from __future__ import annotations

import struct

import pytest

from sparkstate.worker import embedded
from sparkstate.worker import protocol as p

from .fakes import DictStore


@pytest.fixture
def channel(monkeypatch):
    store = DictStore()
    embedded.start_worker("t1")
    registry = embedded._worker("t1")[0]
    monkeypatch.setattr(registry, "get", lambda handle: store)
    out, response = bytearray(4 + (1 << 16)), bytearray(64)
    channel_id = embedded.open_channel("t1", out, response)

    def send(*frames: bytes) -> bytes | None:
        body = b"".join(frames)
        struct.pack_into("<i", out, 0, len(body))
        out[4:4 + len(body)] = body
        size = embedded.channels[channel_id].pump()
        if size < 0:
            return embedded.take_oversized(channel_id)
        return bytes(response[:size]) if size else None

    yield send, store, channel_id
    embedded.stop_worker("t1")


def frame(op: int, payload: bytes, handle: int = 1) -> bytes:
    return p.HEADER.pack(op, handle, len(payload)) + payload


def test_get_alone_and_after_batch_in_the_same_buffer(channel):
    send, store, _ = channel
    store.data[b"aaaa"] = b"1"
    assert send(frame(p.OP_GET, b"aaaa")) == p.encode_value(b"1")
    assert send(frame(p.OP_GET, b"zz")) == p.ABSENT
    assert send(frame(p.OP_BATCH, p.encode_batch([(b"bbbb", b"2"), (b"aaaa", None)])),
                frame(p.OP_GET, b"bbbb")) == p.encode_value(b"2")
    assert b"aaaa" not in store.data


def test_async_frames_alone_have_no_answer(channel):
    send, store, _ = channel
    assert send(frame(p.OP_BATCH, p.encode_batch([(b"kkkk", b"v")]))) is None
    assert store.data == {b"kkkk": b"v"}


def test_answer_larger_than_the_response_buffer_is_fetched_whole(channel):
    send, store, _ = channel
    store.data[b"big"] = bytes(range(256)) * 4
    assert send(frame(p.OP_GET, b"big")) == p.encode_value(store.data[b"big"])


def test_channel_stays_clean_after_an_oversized_answer(channel):
    send, store, _ = channel
    store.data[b"big"] = b"x" * 1000
    store.data[b"aaaa"] = b"1"
    send(frame(p.OP_GET, b"big"))
    assert send(frame(p.OP_GET, b"aaaa")) == p.encode_value(b"1")
    assert send(frame(p.OP_SYNC, b"")) == p.OK


def test_failed_batch_is_reported_by_the_next_get(channel):
    send, store, _ = channel
    store.fail_next_batch = True
    assert send(frame(p.OP_BATCH, p.encode_batch([(b"kkkk", b"v")]))) is None
    assert "disk full" in p.decode_error(send(frame(p.OP_GET, b"kkkk")))
    assert send(frame(p.OP_GET, b"kkkk")) == p.ABSENT  # reported once, then the channel is clean


def test_store_error_on_get_is_an_error_answer(channel, monkeypatch):
    send, store, _ = channel
    monkeypatch.setattr(store, "get", lambda key: (_ for _ in ()).throw(OSError("db closed")))
    assert "db closed" in p.decode_error(send(frame(p.OP_GET, b"kkkk")))


def test_stop_worker_closes_its_channels_and_a_second_start_is_refused(channel):
    _, _, channel_id = channel
    with pytest.raises(ValueError, match="already running"):
        embedded.start_worker("t1")
    embedded.stop_worker("t1")
    assert channel_id not in embedded.channels
    with pytest.raises(KeyError, match="not running"):
        embedded.call("t1", "hello")
