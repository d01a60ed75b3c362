"""backend_registry.check_restorable: what a reader outside the engine learns of a manifest's files without
knowing a backend's insides."""
import pytest

from sparkstate.checkpoint import Manifest, SharedFileRef
from sparkstate.engine import check_restorable
from sparkstate.errors import CorruptCheckpointError


def _manifest(backend: str, *locals_: str) -> Manifest:
    refs = tuple(SharedFileRef(remote=f"r-{name}", local=name, size=1, crc32=0) for name in locals_)
    return Manifest(version=3, backend=backend, num_keys=0, writer_instance_id="w", query_run_id="q", created_ms=0,
                    shared_files=refs)


def test_a_heap_manifest_must_list_a_chain():
    check_restorable(_manifest("heap", "full-1.arrow", "delta-2.arrow", "delta-3.arrow"), "3.manifest")
    with pytest.raises(CorruptCheckpointError, match="3.manifest lists two full snapshots"):
        check_restorable(_manifest("heap", "full-1.arrow", "full-2.arrow"), "3.manifest")
    with pytest.raises(CorruptCheckpointError, match="deltas \\[4\\] do not follow"):
        check_restorable(_manifest("heap", "delta-4.arrow"), "3.manifest")


def test_a_rocksdb_manifest_has_no_order_to_check():
    check_restorable(_manifest("rocksdb", "000012.sst", "OPTIONS-000007"), "3.manifest")
