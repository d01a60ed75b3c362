"""S3FileIO: FileIO on S3 (or any S3-compatible server) through boto3, for `s3://` and `s3a://` URIs.

Paths are URIs `s3://<bucket>/<key>` (`s3a://` is the same thing: Hadoop's name for its connector).
How each FileIO contract maps onto S3:
- atomic write: one `PutObject` (S3 never shows a partially written object);
- `create_exclusive`: `PutObject` with `If-None-Match: *` (HTTP 412 when the key exists);
- `upload_file`: boto3's transfer manager, multipart above `MULTIPART_THRESHOLD` (parts are uploaded in
  parallel and the object only appears when the upload completes);
- `list`: `ListObjectsV2` with a `/` delimiter on one prefix (the checkpoint layer only lists its own
  small `manifests/` directory; the offline orphan collector lists recursively);
- `delete_many`: `DeleteObjects`, at most 1000 keys per call.

Requests: every client's requests are counted by phase and operation (`s3_requests`).

Retries: botocore's `standard` retry mode (or `adaptive`, which adds client-side rate limiting) retries
throttling (503 SlowDown), 5xx and connection/read timeouts with exponential backoff and jitter, up to
`max_attempts` per call (the first included), under explicit connect/read timeouts. A call whose last
attempt times out marks its endpoint silent for a while (`silent_endpoints`): later calls fail at once
instead of each waiting out its own attempts. Errors left after retries become `StorageError` naming the
operation, the URI and the attempts made; a missing object is `FileNotFoundError`.

Credentials: explicit keys from `S3Options` (the `fs.s3a.access.key`/`fs.s3a.secret.key` Hadoop settings),
else boto3's standard chain (env, profile, instance role). Secrets are never formatted into reprs, logs
or error messages (`S3Options.__repr__` redacts them; errors are scrubbed by `_scrub`).

Clients are cached per process and options (creating one costs tens of ms and a worker opens many
stores); boto3 clients are thread-safe. An `S3FileIO` pickles without its client.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field, fields
from typing import Any, Iterable, Mapping
from urllib.parse import urlsplit

from .. import liveness
from ..errors import ConfigError, StorageError, local_disk_error
from . import s3_requests
from .fileio import FileInfo, FileIO
from .silent_endpoints import SilentEndpointError, watch

MULTIPART_THRESHOLD = 16 << 20
MULTIPART_CHUNK = 8 << 20
DELETE_BATCH = 1000  # S3's DeleteObjects limit
_MISSING_CODES = ("404", "NoSuchKey", "NotFound")


@dataclass(frozen=True)
class S3Options:
    """How to reach S3. Built from sparkstate settings and the Hadoop `fs.s3a.*` keys (`from_conf`)."""

    endpoint: str | None = None        # e.g. http://127.0.0.1:8333; None: AWS
    region: str | None = None
    path_style: bool | None = None     # None: boto3 decides (virtual-hosted on AWS)
    access_key: str | None = field(default=None, repr=False)
    secret_key: str | None = field(default=None, repr=False)
    session_token: str | None = field(default=None, repr=False)
    max_attempts: int = 6
    retry_mode: str = "standard"
    connect_timeout_s: float = 5.0
    read_timeout_s: float = 30.0
    max_pool_connections: int = 32

    def __repr__(self) -> str:
        shown = ", ".join(f"{f.name}={getattr(self, f.name)!r}" for f in fields(self) if f.repr)
        creds = "explicit keys (redacted)" if self.access_key else "default credential chain"
        return f"S3Options({shown}, credentials={creds})"

    __str__ = __repr__

    def secrets(self) -> tuple[str, ...]:
        return tuple(s for s in (self.secret_key, self.session_token, self.access_key) if s)

    @classmethod
    def from_conf(cls, settings: Any, s3a: Mapping[str, str] | None = None) -> "S3Options":
        """sparkstate `s3.*` settings win over the Hadoop `fs.s3a.*` keys (given with or without the
        `fs.s3a.` prefix); anything unset falls back to boto3's defaults."""
        raw = {(k if k.startswith("fs.s3a.") else "fs.s3a." + k): str(v) for k, v in (s3a or {}).items()}

        def s3a_get(key: str) -> str | None:
            v = raw.get("fs.s3a." + key)
            return v.strip() if v is not None and v.strip() else None

        endpoint = getattr(settings, "s3_endpoint", None) or s3a_get("endpoint")
        if endpoint and "://" not in endpoint:
            ssl = (s3a_get("connection.ssl.enabled") or "true").lower() != "false"
            endpoint = ("https://" if ssl else "http://") + endpoint
        region = getattr(settings, "s3_region", None) or s3a_get("endpoint.region")
        path_style = getattr(settings, "s3_path_style", None)
        if path_style is None and s3a_get("path.style.access") is not None:
            path_style = s3a_get("path.style.access").lower() == "true"
        if endpoint and not region:
            region = "us-east-1"  # S3-compatible servers ignore it, but SigV4 needs one
        return cls(endpoint=endpoint, region=region, path_style=path_style,
                   access_key=s3a_get("access.key"), secret_key=s3a_get("secret.key"),
                   session_token=s3a_get("session.token"),
                   max_attempts=getattr(settings, "s3_max_attempts", cls.max_attempts),
                   retry_mode=getattr(settings, "s3_retry_mode", cls.retry_mode),
                   connect_timeout_s=getattr(settings, "s3_connect_timeout_ms", 5000) / 1000.0,
                   read_timeout_s=getattr(settings, "s3_read_timeout_ms", 30000) / 1000.0)


def split_uri(uri: str) -> tuple[str, str]:
    """(bucket, key) of `s3://bucket/key` or `s3a://bucket/key`."""
    parts = urlsplit(uri)
    if parts.scheme.lower() not in ("s3", "s3a") or not parts.netloc:
        raise ConfigError(f"not an S3 URI (expected s3://bucket/key): {uri!r}")
    return parts.netloc, parts.path.lstrip("/")


_clients: dict[S3Options, Any] = {}
_clients_lock = threading.Lock()


def _client_for(opts: S3Options) -> Any:
    with _clients_lock:
        client = _clients.get(opts)
        if client is None:
            import boto3
            from botocore.config import Config

            config = Config(
                retries={"total_max_attempts": opts.max_attempts, "mode": opts.retry_mode},
                connect_timeout=opts.connect_timeout_s, read_timeout=opts.read_timeout_s,
                max_pool_connections=opts.max_pool_connections,
                s3={"addressing_style": "path"} if opts.path_style else
                   ({"addressing_style": "virtual"} if opts.path_style is False else {}))
            session = boto3.session.Session(
                aws_access_key_id=opts.access_key, aws_secret_access_key=opts.secret_key,
                aws_session_token=opts.session_token, region_name=opts.region)
            client = session.client("s3", endpoint_url=opts.endpoint, config=config)
            watch(client, opts.max_attempts)
            s3_requests.watch(client)
            _clients[opts] = client
        return client


def _error_code(e: BaseException) -> str:
    resp = getattr(e, "response", None) or {}
    return str(resp.get("Error", {}).get("Code", "")) or str(resp.get("ResponseMetadata", {}).get("HTTPStatusCode", ""))



def _attempts(e: BaseException, max_attempts: int) -> str:
    """How many attempts a failed call made: botocore counts them on an answered error (one, for an error no
    retry can fix); a timeout or connection error carries no count."""
    retries = (getattr(e, "response", None) or {}).get("ResponseMetadata", {}).get("RetryAttempts")
    if isinstance(retries, int):
        return "after 1 attempt" if retries == 0 else f"after {retries + 1} attempts"
    return f"after up to {max_attempts} attempts"


def _progress(_bytes: int) -> None:
    """boto3 transfer callback: bytes moving count as progress for the worker's watchdog."""
    liveness.tick()

class S3FileIO(FileIO):
    def __init__(self, options: S3Options | None = None) -> None:
        self.options = options or S3Options()

    def __repr__(self) -> str:
        return f"S3FileIO({self.options!r})"

    def __getstate__(self) -> dict[str, Any]:
        return {"options": self.options}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.options = state["options"]

    @property
    def client(self) -> Any:
        return _client_for(self.options)

    def _transfer_config(self) -> Any:
        from boto3.s3.transfer import TransferConfig
        return TransferConfig(multipart_threshold=MULTIPART_THRESHOLD, multipart_chunksize=MULTIPART_CHUNK,
                              max_concurrency=4, use_threads=True)

    def _fail(self, verb: str, uri: str, e: BaseException) -> BaseException:
        """The exception to raise for a failed call: FileNotFoundError for a missing object, else a
        StorageError naming the operation and the object (never the credentials)."""
        code = _error_code(e)
        if code in _MISSING_CODES:
            return FileNotFoundError(f"S3 object {uri} does not exist")
        if isinstance(e, SilentEndpointError):
            return StorageError(f"S3 {verb} of {uri} not sent: {e}")
        where = f" at {self.options.endpoint}" if self.options.endpoint else ""
        return StorageError(_scrub(f"S3 {verb} of {uri}{where} failed ({_attempts(e, self.options.max_attempts)}): "
                                   f"{type(e).__name__}: {e}", self.options.secrets()))

    # ---- verbs ------------------------------------------------------------------------------------
    def read_bytes(self, path: str) -> bytes:
        bucket, key = split_uri(path)
        try:
            return self.client.get_object(Bucket=bucket, Key=key)["Body"].read()
        except Exception as e:  # noqa: BLE001 - mapped to FileNotFoundError / StorageError
            raise self._fail("GET", path, e) from None

    def write_bytes_atomic(self, path: str, data: bytes) -> None:
        bucket, key = split_uri(path)
        try:
            self.client.put_object(Bucket=bucket, Key=key, Body=data)
        except Exception as e:  # noqa: BLE001
            raise self._fail("PUT", path, e) from None

    def create_exclusive(self, path: str, data: bytes) -> bool:
        bucket, key = split_uri(path)
        for _ in range(5):
            try:
                self.client.put_object(Bucket=bucket, Key=key, Body=data, IfNoneMatch="*")
                return True
            except Exception as e:  # noqa: BLE001
                code = _error_code(e)
                if code in ("PreconditionFailed", "412"):
                    return False
                if code in ("ConditionalRequestConflict", "409"):
                    continue  # a concurrent conditional write of the same key is in flight: ask again
                raise self._fail("conditional PUT", path, e) from None
        return False  # still conflicting: the other writer's object decides (caller reads it back)

    def upload_file(self, local_path: str, path: str) -> None:
        bucket, key = split_uri(path)
        try:
            with s3_requests.transfer(bucket, key):
                self.client.upload_file(local_path, bucket, key, Config=self._transfer_config(), Callback=_progress)
        except Exception as e:  # noqa: BLE001
            raise self._fail("upload", path, e) from None

    def download_file(self, path: str, local_path: str) -> None:
        bucket, key = split_uri(path)
        try:
            with s3_requests.transfer(bucket, key):
                self.client.download_file(bucket, key, local_path, Config=self._transfer_config(),
                                          Callback=_progress)
        except OSError as e:  # a full or read-only local disk is the local disk's fault, not S3's
            named = local_disk_error(e, local_path, f"write the download of {path} to")
            raise (named if named is not e else self._fail("download", path, e)) from None
        except Exception as e:  # noqa: BLE001
            raise self._fail("download", path, e) from None

    def exists(self, path: str) -> bool:
        try:
            self.size(path)
            return True
        except FileNotFoundError:
            return False

    def size(self, path: str) -> int:
        bucket, key = split_uri(path)
        try:
            return int(self.client.head_object(Bucket=bucket, Key=key)["ContentLength"])
        except Exception as e:  # noqa: BLE001
            raise self._fail("HEAD", path, e) from None

    def list(self, prefix_dir: str) -> list[str]:
        return [info.name for info in self._list(prefix_dir, recursive=False)]

    def list_info(self, prefix_dir: str, recursive: bool = False) -> list[FileInfo]:
        return self._list(prefix_dir, recursive)

    def _list(self, prefix_dir: str, recursive: bool) -> list[FileInfo]:
        bucket, key = split_uri(prefix_dir.rstrip("/") + "/")
        prefix = key if key != "/" else ""
        kwargs: dict[str, Any] = {"Bucket": bucket, "Prefix": prefix}
        if not recursive:
            kwargs["Delimiter"] = "/"
        out: list[FileInfo] = []
        try:
            for page in self.client.get_paginator("list_objects_v2").paginate(**kwargs):
                for obj in page.get("Contents", ()):
                    name = obj["Key"][len(prefix):]
                    if name:
                        out.append(FileInfo(name, int(obj["Size"]), obj["LastModified"].timestamp()))
        except Exception as e:  # noqa: BLE001
            code = _error_code(e)
            if code == "NoSuchBucket":
                return []
            if code in _MISSING_CODES:  # S3 answers a listing of nothing with an empty page, never a bare 404
                where = self.options.endpoint or "AWS"
                raise StorageError(f"S3 LIST of {prefix_dir} at {where} was answered 404 {code} without an S3 "
                                   "error: is the endpoint an S3 service (fs.s3a.endpoint / s3.endpoint), with "
                                   "the right addressing (fs.s3a.path.style.access)?") from None
            raise self._fail("LIST", prefix_dir, e) from None
        return out

    def delete_many(self, paths: Iterable[str]) -> None:
        by_bucket: dict[str, list[str]] = {}
        for p in paths:
            bucket, key = split_uri(p)
            by_bucket.setdefault(bucket, []).append(key)
        for bucket, keys in by_bucket.items():
            for i in range(0, len(keys), DELETE_BATCH):
                batch = keys[i:i + DELETE_BATCH]
                uri = f"s3://{bucket}/{batch[0]}" + (f" (+{len(batch) - 1} more)" if len(batch) > 1 else "")
                try:
                    resp = self.client.delete_objects(
                        Bucket=bucket, Delete={"Objects": [{"Key": k} for k in batch], "Quiet": True})
                except Exception as e:  # noqa: BLE001
                    raise self._fail("DELETE", uri, e) from None
                errors = [err for err in resp.get("Errors", ()) if err.get("Code") not in _MISSING_CODES]
                if errors:
                    first = errors[0]
                    raise StorageError(f"S3 DELETE of s3://{bucket}/{first.get('Key')} failed: "
                                       f"{first.get('Code')}: {first.get('Message')} "
                                       f"({len(errors)} of {len(batch)} keys in the batch failed)")


def _scrub(message: str, secrets: Iterable[str]) -> str:
    for s in secrets:
        if s:
            message = message.replace(s, "***")
    return message


def open_fileio(conf: Any) -> FileIO:
    """The FileIO of `s3://` and `s3a://` locations (see storage.fileio)."""
    if conf is not None and not isinstance(conf, S3Options):
        raise TypeError(f"S3 storage needs S3Options, got {type(conf).__name__}")
    return S3FileIO(conf)


def storage_options(settings: Any, hadoop_conf: Mapping[str, str]) -> S3Options:
    return S3Options.from_conf(settings, hadoop_conf)

__all__ = ["S3FileIO", "S3Options", "split_uri", "DELETE_BATCH", "MULTIPART_THRESHOLD"]
