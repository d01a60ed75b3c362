import glob
import os

from sparkstate.engine import Store
from sparkstate.engine.rocksdb.options import INFO_LOG_FILES, MAX_INFO_LOG_BYTES

from ..conftest import kv, make_spec


def test_the_info_log_of_a_long_lived_store_stays_bounded(tmp_path):
    """Every commit adds flush and checkpoint lines to RocksDB's LOG; rolled and capped, a store open
    for many batches keeps at most INFO_LOG_FILES old logs plus the current one."""
    store = Store(make_spec("file:" + str(tmp_path / "ckpt" / "state" / "0" / "1"), backend="rocksdb"),
                  str(tmp_path / "local"))
    try:
        for version in range(200):
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
    finally:
        store.close()
