"""What a flushed RocksDB version keeps (engine/rocksdb/snapshot.py): SST files shared, RocksDB's small
per-version files packed into one shared file (private_files.py), the OPTIONS file not at all."""
from __future__ import annotations

import glob
import io
import os
import tarfile

from sparkstate.engine import Store
from sparkstate.engine.rocksdb.private_files import PACK_NAME

from ..conftest import commit_keys, contents, kv, make_spec


def test_a_version_keeps_no_options_file_and_opens_with_the_store_s_options(tmp_path):
    spec = make_spec("file:" + str(tmp_path / "ckpt" / "state" / "0" / "1"), backend="rocksdb")
    fm = commit_keys(spec, str(tmp_path / "local-1"), 200).file_manager
    manifest = fm.read_manifest(1)
    assert manifest.private_files == ()
    [pack] = [ref for ref in manifest.shared_files if ref.local == PACK_NAME]
    with tarfile.open(fileobj=io.BytesIO(fm.fileio.read_bytes(fm.file_path(pack.remote)))) as tar:
        names = tar.getnames()
    assert "CURRENT" in names and any(n.startswith("MANIFEST-") for n in names)
    assert not [n for n in names if n.startswith("OPTIONS")], names
    assert pack.size < 2048  # the OPTIONS file alone is ~7.5 KB

    fresh = Store(spec, str(tmp_path / "local-2"))
    try:
        fresh.load(1)
        assert contents(fresh) == dict(kv(i) for i in range(200))
        # RocksDB wrote the OPTIONS file of the restored database from the options it was opened with
        written = glob.glob(os.path.join(str(tmp_path / "local-2"), "**", "OPTIONS-*"), recursive=True)
        assert written and "write_buffer_size=1048576" in open(written[0]).read()
    finally:
        fresh.close()
