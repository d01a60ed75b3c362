"""The shared-memory channel, driven by a Python stand-in for the JVM side (ShmDataChannel.java)."""
from __future__ import annotations

import os
import socket
import threading
import time

import pytest

from sparkstate.worker import protocol as p
from sparkstate.worker import shm_channel as shm
from sparkstate.worker.data_server import DataServer

from .fakes import DictStore, JvmSide, recv_exact

pytestmark = pytest.mark.skipif(not shm.supported(), reason="the shm transport needs Linux on x86-64")


@pytest.fixture
def served(tmp_path):
    """A data server over one DictStore and a connected JVM side with a small (4 KiB) segment."""
    store = DictStore()
    socket_path = str(tmp_path / "data.sock")
    DataServer(socket_path, lambda handle: store).start()
    jvm = JvmSide(socket_path, str(tmp_path / "segment"), capacity=4096)
    assert jvm.attach_answer == 0
    yield store, jvm
    jvm.sock.close()


def _server_threads() -> int:
    return sum(t.name == "sparkstate-data-conn" and t.is_alive() for t in threading.enumerate())


def test_puts_then_gets_in_one_publish_and_alone(served):
    store, jvm = served
    batch = p.encode_request(p.OP_BATCH, 1, p.encode_batch([(b"key-%d" % i, b"v%d" % i) for i in range(50)]))
    response = jvm.request(batch + p.encode_request(p.OP_GET, 1, b"key-7"))
    assert response == p.INT.pack(2) + b"v7"
    assert jvm.get(1, b"key-49") == b"v49"
    assert jvm.get(1, b"missing") is None
    assert len(store.data) == 50


def test_requests_and_responses_larger_than_the_segment_go_in_pieces(served):
    store, jvm = served
    big = bytes(range(256)) * 40  # 10 KiB value: two and a half segment areas
    records = [(b"bigk", big)] + [(b"k%04d" % i, b"x" * 100) for i in range(100)]
    jvm.request(p.encode_request(p.OP_BATCH, 1, p.encode_batch(records))
                + p.encode_request(p.OP_SYNC, 1))
    assert store.data[b"bigk"] == big and len(store.data) == 101
    assert jvm.get(1, b"bigk") == big  # answered in CONTINUE pieces
    chunk = jvm.request(p.encode_request(p.OP_SCAN_OPEN, 1, b"k"))
    rows, done, _ = p.decode_chunk(chunk)
    assert done and [k for k, _ in rows] == sorted(k for k in store.data if k.startswith(b"k"))


def test_a_failed_batch_is_reported_on_the_next_get_and_the_channel_stays_usable(served):
    store, jvm = served
    store.fail_next_batch = True
    jvm.publish(p.encode_request(p.OP_BATCH, 1, p.encode_batch([(b"aaaa", b"1")])))
    assert jvm.await_answer() == (b"", 0)  # an async publish: answered empty
    with pytest.raises(RuntimeError, match="OSError: disk full"):
        jvm.get(1, b"aaaa")
    jvm.request(p.encode_request(p.OP_BATCH, 1, p.encode_batch([(b"aaaa", b"2")])))
    assert jvm.get(1, b"aaaa") == b"2"


def test_a_get_that_raises_answers_an_error(served):
    store, jvm = served
    store.get = lambda key: (_ for _ in ()).throw(KeyError("no such store"))
    with pytest.raises(RuntimeError, match="KeyError"):
        jvm.get(3, b"k")


def test_a_sleeping_worker_is_woken_by_the_doorbell(served, monkeypatch):
    monkeypatch.setattr(shm, "SPIN_NS", 1_000)  # sleep almost at once
    monkeypatch.setattr(shm, "SLEEP_RECHECK_S", 5.0)  # only the doorbell can wake it in time
    store, jvm = served
    store.data[b"k"] = b"v"
    assert jvm.get(1, b"k") == b"v"
    deadline = time.monotonic() + 5
    while not jvm.words[shm.WORKER_SLEEPING // 8]:
        assert time.monotonic() < deadline, "the worker never went to sleep"
        time.sleep(0.001)
    started, rung = time.monotonic(), jvm.doorbells
    assert jvm.get(1, b"k") == b"v"
    assert jvm.doorbells == rung + 1
    assert time.monotonic() - started < 2.0  # woken by the doorbell, not by the 5 s recheck


def test_close_ends_the_worker_session(served):
    _, jvm = served
    before = _server_threads()
    assert before >= 1
    jvm.close()
    deadline = time.monotonic() + 5
    while _server_threads() >= before:
        assert time.monotonic() < deadline, "the session did not end"
        time.sleep(0.01)


def test_an_unusable_segment_is_refused_with_an_error(tmp_path):
    socket_path = str(tmp_path / "data.sock")
    DataServer(socket_path, lambda handle: DictStore()).start()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(socket_path)
    sock.sendall(p.encode_request(p.OP_SHM_ATTACH, 0, str(tmp_path / "nope").encode()))
    (code,) = p.INT.unpack(recv_exact(sock, 4))
    assert code == p.ERROR_CODE
    (length,) = p.INT.unpack(recv_exact(sock, 4))
    assert "nope" in recv_exact(sock, length).decode()


def test_the_follower_pins_to_the_client_cpu_and_releases(monkeypatch):
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("one CPU: nothing to follow")
    result = {}

    def run():
        follower = shm.CpuFollower()
        follower.follow(threading.get_native_id())  # our own thread: pins to where we run
        result["pinned"] = os.sched_getaffinity(0)
        follower.release()
        result["released"] = os.sched_getaffinity(0)

    allowed = os.sched_getaffinity(0)
    t = threading.Thread(target=run)
    t.start()
    t.join()
    assert len(result["pinned"]) == 1 and result["pinned"] <= allowed
    assert result["released"] == allowed
    assert os.sched_getaffinity(0) == allowed  # only the following thread moved
