"""Silent S3 endpoints: a call that waited out every attempt makes the next calls fail at once.

An S3 endpoint that accepts connections and never answers (a hung server, a black-holed route) costs a
call `s3.maxAttempts` read timeouts, about three minutes with the defaults. A task makes many calls (a
restore downloads its files four at a time, a worker holds several stores) and Spark retries a failed
task up to `spark.task.maxFailures` times, so a query would wait through one such call after another
before it failed (the demo: more than 14 minutes, against 3 with this module). Once one call has timed
out on its last attempt, the endpoint has been silent for as long as that call waited; for that long
again, calls to it fail at once with a message that says so. The query then fails in about one call's
time, with the cause. An outage shorter than one call's attempts never trips it: the call's own retries
ride it out.

The memory is per process (each worker learns from its own calls) and keyed by the request's host, so
one silent server never blocks another.

The hooks are botocore events on the client: `before-call` dates the call, `needs-retry` sees each
attempt's outcome, and `before-send` refuses a request while its host is silent (the exception is not
botocore's, so botocore does not retry it).
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from ..errors import StorageError

_STARTED = "sparkstate.call_started"


class SilentEndpointError(StorageError):
    """A request not sent: its endpoint timed out on every attempt of a recent call."""


@dataclass(frozen=True)
class Silence:
    host: str
    operation: str          # the call that timed out, e.g. GetObject
    attempts: int
    error: str              # the last attempt's exception class, e.g. ReadTimeoutError
    waited_s: float         # from that call's first attempt to its last timeout
    noticed_at: float       # wall clock (time.time) of the last timeout
    until: float            # monotonic time the silence ends

    def describe(self) -> str:
        noticed = time.strftime("%H:%M:%S UTC", time.gmtime(self.noticed_at))
        ends = time.strftime("%H:%M:%S UTC", time.gmtime(self.noticed_at + self.waited_s))
        return (f"{self.host} did not answer a {self.operation}: its last of {self.attempts} attempts timed out "
                f"({self.error}) at {noticed}, {self.waited_s:.0f} s after its first; calls to it fail at once "
                f"until {ends}. Check that the S3 endpoint (s3.endpoint / fs.s3a.endpoint) is up and reachable "
                "from the executors, then restart the query (s3.readTimeoutMs and s3.maxAttempts bound how "
                "long one call waits)")


_lock = threading.Lock()
_silent: dict[str, Silence] = {}


def silence_of(host: str) -> Silence | None:
    """The host's silence while it lasts, else None."""
    with _lock:
        s = _silent.get(host)
        if s is not None and time.monotonic() >= s.until:
            del _silent[host]
            return None
        return s


def forget_all() -> None:
    """Drop every remembered silence (tests)."""
    with _lock:
        _silent.clear()


def _host(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}" if parts.netloc else url


def _is_timeout(e: BaseException | None) -> bool:
    from botocore.exceptions import ConnectTimeoutError, ReadTimeoutError
    return isinstance(e, (ConnectTimeoutError, ReadTimeoutError))


def watch(client: Any, max_attempts: int) -> None:
    """Register the hooks on a boto3 S3 client whose calls make up to `max_attempts` attempts."""
    events = client.meta.events

    def call_started(context: dict, **_: Any) -> None:
        context[_STARTED] = time.monotonic()

    def refuse_if_silent(request: Any, **_: Any) -> None:
        s = silence_of(_host(request.url))
        if s is not None:
            raise SilentEndpointError(s.describe())

    def note_attempt(attempts: int, caught_exception: BaseException | None, request_dict: dict,
                     operation: Any, **_: Any) -> None:
        if attempts < max_attempts or not _is_timeout(caught_exception):
            return None  # botocore's own handler decides the retry; this one only watches
        now = time.monotonic()
        waited = now - request_dict.get("context", {}).get(_STARTED, now)
        host = _host(request_dict.get("url", ""))
        with _lock:
            _silent[host] = Silence(host, getattr(operation, "name", "call"), attempts,
                                    type(caught_exception).__name__, waited, time.time(), now + waited)
        return None

    events.register("before-call.s3", call_started)
    events.register("before-send.s3", refuse_if_silent)
    events.register("needs-retry.s3", note_attempt)
