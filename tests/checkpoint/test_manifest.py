import pytest

from sparkstate.checkpoint import Manifest, PrivateFile, SharedFileRef
from sparkstate.errors import CorruptCheckpointError


def sample(version: int = 7) -> Manifest:
    return Manifest(version=version, backend="rocksdb", num_keys=42, writer_instance_id="inst", query_run_id="run",
                    created_ms=1700000000000,
                    shared_files=(SharedFileRef("7-abcd1234-000008.sst", "000008.sst", 1234, 0xDEADBEEF),),
                    private_files=(PrivateFile("CURRENT", b"MANIFEST-000005\n"), PrivateFile("000004.log", b"")))


def test_round_trip():
    m = sample()
    raw = m.to_bytes()
    assert raw.startswith(b"SPARKSTATE-MANIFEST v1 crc32=")
    assert Manifest.from_bytes(raw, "x") == m
    assert m.total_bytes == 1234 + 16


def test_a_version_with_idle_state_stamps_is_format_v2_so_a_reader_of_v1_refuses_it():
    from dataclasses import replace

    m = replace(sample(), ttl_stamps=True, batch_time_ms=1700000000000)
    raw = m.to_bytes()
    assert raw.startswith(b"SPARKSTATE-MANIFEST v2 crc32=") and b'"formatVersion":2' in raw
    assert Manifest.from_bytes(raw, "x") == m
    assert sample().to_bytes().startswith(b"SPARKSTATE-MANIFEST v1 ")


@pytest.mark.parametrize("mutate", [
    lambda r: r[:-5],                                        # truncated body
    lambda r: r[:20],                                        # truncated header
    lambda r: b"",                                           # empty
    lambda r: r[:-3] + bytes([r[-3] ^ 1]) + r[-2:],          # flipped bit in the body
    lambda r: r.replace(b" v1 ", b" v9 ", 1),                # unknown format version
    lambda r: b"garbage\n" + r,                              # wrong magic
])
def test_corruption_is_detected_and_names_the_file(mutate):
    with pytest.raises(CorruptCheckpointError, match="manifests/7.manifest"):
        Manifest.from_bytes(mutate(sample().to_bytes()), "/ckpt/sparkstate/manifests/7.manifest")
