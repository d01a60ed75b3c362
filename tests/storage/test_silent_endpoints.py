"""A silent S3 endpoint (accepts connections, never answers) costs one call its attempts; the calls after
it fail at once for as long as that call waited, with a message that says why. Answered errors and
outages shorter than a call's attempts are not silences."""
from __future__ import annotations

import dataclasses
import socket
import threading
import time

import pytest

from sparkstate.errors import StorageError
from sparkstate.storage import silent_endpoints
from sparkstate.storage.s3 import S3FileIO, S3Options

from .flaky_proxy import FlakyProxy
from .stub_http import FixedAnswerServer, s3_error


class BlackHole:
    """Accepts TCP connections on 127.0.0.1 and never sends a byte."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.accepted: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.sock.getsockname()[1]}"

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.accepted.append(conn)

    def close(self) -> None:
        self.sock.close()
        for c in self.accepted:
            c.close()


@pytest.fixture(autouse=True)
def no_remembered_silence():
    silent_endpoints.forget_all()
    yield
    silent_endpoints.forget_all()


@pytest.fixture()
def black_hole():
    hole = BlackHole()
    yield hole
    hole.close()


def _io(endpoint: str, attempts: int = 2, read_timeout_s: float = 0.5) -> S3FileIO:
    return S3FileIO(S3Options(endpoint=endpoint, region="us-east-1", path_style=True, access_key="k",
                              secret_key="secret-key-x", max_attempts=attempts, connect_timeout_s=0.5,
                              read_timeout_s=read_timeout_s))


def test_after_one_call_times_out_on_every_attempt_the_next_fail_at_once(black_hole, moto_s3, bucket):
    io = _io(black_hole.endpoint)
    t0 = time.monotonic()
    with pytest.raises(StorageError, match=r"S3 GET of s3://b/m/1.manifest .*after up to 2 attempts.*ReadTimeout"):
        io.read_bytes("s3://b/m/1.manifest")
    waited = time.monotonic() - t0
    assert 1.0 <= waited < 10
    sent = len(black_hole.accepted)

    t1 = time.monotonic()
    for verb, call in (("GET", lambda: io.read_bytes("s3://b/m/2.manifest")),
                       ("PUT", lambda: io.write_bytes_atomic("s3://b/m/3.manifest", b"x")),
                       ("LIST", lambda: io.list("s3://b/m"))):
        with pytest.raises(StorageError) as err:
            call()
        text = str(err.value)
        assert text.startswith(f"S3 {verb} of s3://b/m") and "not sent" in text
        assert f"{black_hole.endpoint} did not answer a GetObject" in text
        assert "its last of 2 attempts timed out (ReadTimeoutError)" in text
        assert "calls to it fail at once until" in text and "s3.endpoint" in text
        assert "secret-key-x" not in text
    assert time.monotonic() - t1 < 0.5
    assert len(black_hole.accepted) == sent  # nothing was sent to it

    # another endpoint is not affected
    good = S3FileIO(moto_s3.options())
    good.write_bytes_atomic(f"s3://{bucket}/ok", b"fine")
    assert good.read_bytes(f"s3://{bucket}/ok") == b"fine"

    # once as long as the failed call waited has passed, calls are sent again
    time.sleep(max(0.0, t0 + 2 * waited + 0.2 - time.monotonic()))
    assert silent_endpoints.silence_of(black_hole.endpoint) is None
    with pytest.raises(StorageError, match="after up to 2 attempts"):
        io.read_bytes("s3://b/m/4.manifest")
    assert len(black_hole.accepted) > sent


def test_a_call_in_flight_stops_at_its_next_attempt(black_hole, monkeypatch):
    """Calls already waiting on the silent host (a restore's parallel downloads) fail at their next attempt
    instead of using the rest of theirs."""
    # botocore's jittered backoff between attempts reaches seconds (up to 20 s), longer than the silence
    # these 0.5 s timeouts make; a fixed short backoff keeps the late call's next attempt inside it.
    from botocore.retries.standard import ExponentialBackoff
    monkeypatch.setattr(ExponentialBackoff, "delay_amount", lambda self, context: 0.05)
    first = _io(black_hole.endpoint, attempts=2, read_timeout_s=0.5)   # done within about 2 s
    late = _io(black_hole.endpoint, attempts=8, read_timeout_s=0.5)    # its 8 attempts would take 4 s or more
    errors: dict[str, BaseException] = {}

    def get(name: str, io: S3FileIO, delay: float) -> None:
        time.sleep(delay)
        try:
            io.read_bytes(f"s3://b/{name}")
        except StorageError as e:
            errors[name] = e

    threads = [threading.Thread(target=get, args=("first", first, 0.0)),
               threading.Thread(target=get, args=("late", late, 0.2))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert "after up to 2 attempts" in str(errors["first"])
    assert "not sent" in str(errors["late"]) and "did not answer a GetObject" in str(errors["late"])
    assert len(black_hole.accepted) < 2 + 8  # the late call stopped before its last attempt


def test_an_outage_shorter_than_a_call_is_ridden_out_and_not_remembered(moto_s3, bucket):
    proxy = FlakyProxy(moto_s3.endpoint, every=1, mode="delay", delay_s=1.0, max_faults=1, window_s=30)
    try:
        io = S3FileIO(dataclasses.replace(moto_s3.options(), endpoint=proxy.endpoint, max_attempts=3,
                                          read_timeout_s=0.5))
        io.write_bytes_atomic(f"s3://{bucket}/k", b"v")  # first attempt times out, the second lands
        assert proxy.faults == 1
        assert silent_endpoints.silence_of(proxy.endpoint) is None
        assert io.read_bytes(f"s3://{bucket}/k") == b"v"
    finally:
        proxy.close()


@pytest.mark.parametrize("status, code, attempts, said", [
    (403, "SignatureDoesNotMatch", 1, "after 1 attempt)"),
    (503, "SlowDown", 3, "after 3 attempts)"),
])
def test_answered_errors_say_how_many_attempts_were_made_and_are_no_silence(status, code, attempts, said):
    with FixedAnswerServer(status, s3_error(code)) as server:
        io = _io(server.endpoint, attempts=3)
        for _ in range(2):
            with pytest.raises(StorageError) as err:
                io.write_bytes_atomic("s3://b/m/1.manifest", b"x")
            assert said in str(err.value) and code in str(err.value)
        assert server.requests == 2 * attempts  # the second call was sent too
        assert silent_endpoints.silence_of(server.endpoint) is None
