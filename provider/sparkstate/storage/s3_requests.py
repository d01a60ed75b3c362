"""Counts of the S3 requests a process sends, by phase and operation, through botocore's event hooks.

What a checkpoint costs on S3 is mostly its requests: public prices are per request (PUT, COPY, POST and
LIST at one rate, GET and HEAD at a tenth of it), so the counts per commit say what a micro-batch costs
beside the bytes it stores. Every client `s3.py` creates is watched (`watch`):

- `before-parameter-build` runs in the thread that calls the client and notes the request's phase in the
  call's context: the caller's `counted_as` phase, or for a transfer (boto3's transfer manager sends an
  upload's or download's requests from its own threads) the phase of the thread that started it
  (`transfer`).
- `needs-retry` runs once per attempt sent, retries included (each is a billed request), and counts it
  under that phase and its operation name (`PutObject`, `UploadPart`, `ListObjectsV2`, ...).

A multipart upload is `CreateMultipartUpload`, one `UploadPart` per part and `CompleteMultipartUpload`:
each is a request of the PUT class, so `verb` maps all three to PUT; a file at most
`s3.MULTIPART_THRESHOLD` long is one `PutObject`. `DeleteObjects` (a POST) is counted as DELETE.

`COUNTS` holds the process's counts. With the environment variable `SPARKSTATE_S3_REQUEST_LOG` set to a
directory, every counted request is also appended as one JSON line (phase, operation, key, time) to
`<dir>/requests-<pid>.jsonl`, for a benchmark to read what its worker processes sent.
"""
from __future__ import annotations

import json
import os
import threading
import time
from collections import Counter
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Iterator

LOG_ENV = "SPARKSTATE_S3_REQUEST_LOG"
OTHER = "other"
_PHASE_KEY = "sparkstate.phase"
_KEY_KEY = "sparkstate.key"

VERBS = {
    "PutObject": "PUT", "UploadPart": "PUT", "CreateMultipartUpload": "PUT", "CompleteMultipartUpload": "PUT",
    "CopyObject": "PUT", "UploadPartCopy": "PUT",
    "GetObject": "GET", "HeadObject": "HEAD", "HeadBucket": "HEAD",
    "ListObjectsV2": "LIST", "ListObjects": "LIST", "ListMultipartUploads": "LIST", "ListParts": "LIST",
    "DeleteObjects": "DELETE", "DeleteObject": "DELETE", "AbortMultipartUpload": "DELETE",
}

_phase: ContextVar[str] = ContextVar("sparkstate_s3_phase", default=OTHER)
_transfers: dict[tuple[str, str], str] = {}
_transfers_lock = threading.Lock()


def verb(operation: str) -> str:
    """The request class of an S3 operation: PUT, GET, HEAD, LIST, DELETE, or the operation's own name."""
    return VERBS.get(operation, operation)


@contextmanager
def counted_as(phase: str) -> Iterator[None]:
    """Requests sent from this context (and from transfers it starts) count under `phase`."""
    token = _phase.set(phase)
    try:
        yield
    finally:
        _phase.reset(token)


def current_phase() -> str:
    return _phase.get()


@contextmanager
def transfer(bucket: str, key: str) -> Iterator[None]:
    """An upload or download of `key` runs: its requests, sent from the transfer manager's threads, count
    under the phase of the calling thread."""
    entry = (bucket, key)
    with _transfers_lock:
        _transfers[entry] = _phase.get()
    try:
        yield
    finally:
        with _transfers_lock:
            _transfers.pop(entry, None)


class RequestCounts:
    """Thread-safe counts of requests sent, by (phase, operation)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: Counter[tuple[str, str]] = Counter()

    def add(self, phase: str, operation: str) -> None:
        with self._lock:
            self._counts[(phase, operation)] += 1

    def snapshot(self) -> dict[tuple[str, str], int]:
        with self._lock:
            return dict(self._counts)

    def by_verb(self, phase: str | None = None) -> dict[str, int]:
        """Requests by verb, of one phase or (None) of all."""
        out: Counter[str] = Counter()
        for (p, op), n in self.snapshot().items():
            if phase is None or p == phase:
                out[verb(op)] += n
        return dict(out)

    def reset(self) -> None:
        with self._lock:
            self._counts.clear()


COUNTS = RequestCounts()
_log_lock = threading.Lock()


def _log(phase: str, operation: str, key: str | None) -> None:
    directory = os.environ.get(LOG_ENV)
    if not directory:
        return
    line = json.dumps({"phase": phase, "op": operation, "key": key, "t": round(time.time(), 3)}) + "\n"
    try:
        with _log_lock, open(os.path.join(directory, f"requests-{os.getpid()}.jsonl"), "a",
                             encoding="utf-8") as f:
            f.write(line)
    except OSError:
        pass  # a benchmark's aid: a log that cannot be written never fails a request


def watch(client: Any) -> None:
    """Count the requests of a boto3 S3 client (see the module docstring)."""
    events = client.meta.events

    def note_phase(params: dict, context: dict, **_: Any) -> None:
        key = params.get("Key")
        with _transfers_lock:
            phase = _transfers.get((params.get("Bucket"), key)) if key is not None else None
        context[_PHASE_KEY] = phase or _phase.get()
        context[_KEY_KEY] = key if key is not None else params.get("Prefix")

    def count_attempt(request_dict: dict, operation: Any, **_: Any) -> None:
        context = request_dict.get("context") or {}
        phase, name = context.get(_PHASE_KEY, OTHER), getattr(operation, "name", "call")
        COUNTS.add(phase, name)
        _log(phase, name, context.get(_KEY_KEY))
        return None  # botocore's own handler decides the retry

    events.register("before-parameter-build.s3", note_phase)
    events.register("needs-retry.s3", count_attempt)
