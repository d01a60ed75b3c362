import glob
import os

from sparkstate.engine import Store
from sparkstate.engine.rocksdb.options import INFO_LOG_FILES, MAX_INFO_LOG_BYTES

from ..conftest import kv, live_rocksdb_options, make_spec


def test_the_info_log_and_the_checkpoint_manifests_of_a_long_lived_store_stay_bounded(tmp_path):
    """Every commit adds flush and checkpoint lines to RocksDB's LOG and a version edit to its MANIFEST
    (embedded in each checkpoint manifest); both roll, so a store open for many batches keeps at most
    INFO_LOG_FILES old logs plus the current one, and its checkpoint manifests do not grow with its age."""
    store = Store(make_spec("file:" + str(tmp_path / "ckpt" / "state" / "0" / "1"), backend="rocksdb"),
                  str(tmp_path / "local"))
    try:
        for version in range(400):
            store.load(version)
            store.apply_batch([kv(version % 50, b"v%d" % version)])
            store.commit()
        logs = [p for p in glob.glob(str(tmp_path / "local" / "**" / "LOG*"), recursive=True)
                if os.path.isfile(p)]
        assert logs, "no RocksDB info log found: the test would prove nothing"
        by_db: dict[str, int] = {}
        for p in logs:
            by_db[os.path.dirname(p)] = by_db.get(os.path.dirname(p), 0) + os.path.getsize(p)
        live_db = max(by_db, key=by_db.get)
        assert len([p for p in logs if os.path.dirname(p) == live_db]) <= INFO_LOG_FILES + 1
        assert by_db[live_db] <= (INFO_LOG_FILES + 1) * MAX_INFO_LOG_BYTES + (64 << 10), by_db
        manifests = glob.glob(str(tmp_path / "ckpt" / "state" / "0" / "1" / "sparkstate" / "manifests" / "*"))
        # the embedded MANIFEST (base64) stays under its roll size, plus the version's other small files:
        # not the ~150 KB that 400 version edits take unrolled
        assert max(map(os.path.getsize, manifests)) <= 64 << 10
    finally:
        store.close()


def _options_after_one_commit(root, settings: dict) -> dict[str, str]:
    """The live database's OPTIONS after a store with `settings` under `root` committed one write."""
    local = str(root / "local")
    store = Store(make_spec("file:" + str(root / "ckpt"), backend="rocksdb", **settings), local)
    try:
        store.load(0)
        store.apply_batch([kv(1)])
        store.commit()
        return live_rocksdb_options(local)
    finally:
        store.close()


def test_sst_file_level_and_block_sizes_reach_rocksdb(tmp_path):
    for name, settings, expected in [("defaults", {}, (8 << 20, 16 << 20, 4 << 10)),
                                     ("set", {"rocksdb_target_file_mb": 3, "rocksdb_level_base_mb": 5,
                                              "rocksdb_block_size_kb": 1}, (3 << 20, 5 << 20, 1 << 10))]:
        options = _options_after_one_commit(tmp_path / name, settings)
        assert (int(options["target_file_size_base"]), int(options["max_bytes_for_level_base"]),
                int(options["block_size"])) == expected


def test_mapped_reads_reach_rocksdb_and_the_mapped_files_count_as_memory(tmp_path):
    """With rocksdb.mmapReads a read leaves its pages resident in the worker: the store's memory figure
    includes its SST files' bytes."""
    stores = {}
    try:
        for name, settings in [("plain", {}), ("mapped", {"rocksdb_mmap_reads": True,
                                                           "rocksdb_compression": "none"})]:
            local = str(tmp_path / name / "local")
            store = stores[name] = Store(make_spec("file:" + str(tmp_path / name / "ckpt"), backend="rocksdb",
                                                   **settings), local)
            store.load(0)
            store.apply_batch([kv(i, b"v" * 100) for i in range(20_000)])
            store.commit()
            store.load(1)
            assert all(store.get(kv(i)[0]) == kv(i, b"v" * 100)[1] for i in range(0, 20_000, 97))
            assert live_rocksdb_options(local)["allow_mmap_reads"] == ("true" if name == "mapped" else "false")
        sst = {name: s._backend._live().property_int_value("rocksdb.live-sst-files-size")  # type: ignore[attr-defined]
               for name, s in stores.items()}
        assert sst["mapped"] > 2 << 20  # more than the 1 MiB block cache the test stores have
        assert stores["mapped"].metrics().memory_used_bytes >= sst["mapped"]
    finally:
        for store in stores.values():
            store.close()


def test_level0_trigger_and_last_level_compression_reach_rocksdb(tmp_path):
    for name, settings, expected in [
            ("defaults", {}, ("10", "26", "42", "kDisableCompressionOption", "kZSTD")),
            ("set", {"rocksdb_level0_trigger": 4, "rocksdb_compression": "lz4", "rocksdb_bottommost_compression": "zstd"},
             ("4", "20", "36", "kZSTD", "kLZ4Compression"))]:
        options = _options_after_one_commit(tmp_path / name, settings)
        assert (options["level0_file_num_compaction_trigger"], options["level0_slowdown_writes_trigger"],
                options["level0_stop_writes_trigger"], options["bottommost_compression"],
                options["compression"]) == expected, name
