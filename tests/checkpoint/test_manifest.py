import json
import zlib
from dataclasses import replace

import pytest

from sparkstate.checkpoint import Manifest, PrivateFile, SharedFileRef
from sparkstate.errors import CorruptCheckpointError


def sample(version: int = 7) -> Manifest:
    return Manifest(version=version, backend="rocksdb", num_keys=42, writer_instance_id="inst", query_run_id="run",
                    created_ms=1700000000000,
                    shared_files=(SharedFileRef("7-abcd1234-000008.sst", "000008.sst", 1234, 0xDEADBEEF),),
                    private_files=(PrivateFile("CURRENT", b"MANIFEST-000005\n"), PrivateFile("000004.log", b"")))


def _body(raw: bytes) -> dict:
    return json.loads(zlib.decompress(raw[raw.index(b"\n") + 1:]))


def _uncompressed(raw: bytes, fmt: int) -> bytes:
    """The same manifest as a writer of the uncompressed format `fmt` (1 or 2) wrote it."""
    doc = json.dumps({**_body(raw), "formatVersion": fmt}, sort_keys=True, separators=(",", ":")).encode()
    return b"SPARKSTATE-MANIFEST v%d crc32=%08x len=%d\n" % (fmt, zlib.crc32(doc), len(doc)) + doc


def test_round_trip():
    m = sample()
    raw = m.to_bytes()
    assert raw.startswith(b"SPARKSTATE-MANIFEST v4 crc32=") and _body(raw)["formatVersion"] == 4
    assert Manifest.from_bytes(raw, "x") == m
    assert m.total_bytes == 1234 + 16


def test_the_body_is_stored_compressed():
    ssts = tuple(SharedFileRef(f"{v}-0a1b2c3d-{v:06d}.sst", f"{v:06d}.sst", 20_000 + v, v * 7919) for v in range(20))
    raw = replace(sample(), shared_files=ssts).to_bytes()
    assert len(raw) < 0.5 * len(_uncompressed(raw, 1))


def test_idle_state_stamps_are_kept_in_the_body():
    m = replace(sample(), ttl_stamps=True, batch_time_ms=1700000000000)
    raw = m.to_bytes()
    assert _body(raw)["ttlStamps"] is True
    assert Manifest.from_bytes(raw, "x") == m


@pytest.mark.parametrize("fmt,stamped", [(1, False), (2, True)])
def test_manifests_of_the_uncompressed_formats_are_read(fmt, stamped):
    m = replace(sample(), ttl_stamps=stamped, batch_time_ms=1700000000000 if stamped else None)
    old = _uncompressed(m.to_bytes(), fmt)
    assert old.startswith(b"SPARKSTATE-MANIFEST v%d " % fmt) and b'"numKeys":42' in old
    assert Manifest.from_bytes(old, "x") == m


def test_manifests_of_format_v3_are_read():
    """v3 is v4's encoding; a v4 writer may name a RocksDB version's private files as a shared file."""
    m = sample()
    doc = json.dumps({**_body(m.to_bytes()), "formatVersion": 3}, sort_keys=True, separators=(",", ":")).encode()
    body = zlib.compress(doc)
    v3 = b"SPARKSTATE-MANIFEST v3 crc32=%08x len=%d\n" % (zlib.crc32(body), len(body)) + body
    assert Manifest.from_bytes(v3, "x") == m


def test_a_body_that_passes_its_crc_but_does_not_decompress_is_refused():
    doc = b'{"version":7}'
    raw = b"SPARKSTATE-MANIFEST v3 crc32=%08x len=%d\n" % (zlib.crc32(doc), len(doc)) + doc
    with pytest.raises(CorruptCheckpointError, match="7.manifest has a malformed body"):
        Manifest.from_bytes(raw, "/ckpt/manifests/7.manifest")


@pytest.mark.parametrize("mutate", [
    lambda r: r[:-5],                                        # truncated body
    lambda r: r[:20],                                        # truncated header
    lambda r: b"",                                           # empty
    lambda r: r[:-3] + bytes([r[-3] ^ 1]) + r[-2:],          # flipped bit in the body
    lambda r: r.replace(b" v4 ", b" v9 ", 1),                # unknown format version
    lambda r: b"garbage\n" + r,                              # wrong magic
])
def test_corruption_is_detected_and_names_the_file(mutate):
    with pytest.raises(CorruptCheckpointError, match="manifests/7.manifest"):
        Manifest.from_bytes(mutate(sample().to_bytes()), "/ckpt/sparkstate/manifests/7.manifest")
