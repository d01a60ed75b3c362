import os

from sparkstate.worker.resident_memory import process_rss_bytes, store_share


def test_rss_is_the_resident_pages_of_statm(tmp_path):
    statm = tmp_path / "statm"
    statm.write_text("5000 1200 300 10 0 900 0\n")
    assert process_rss_bytes(str(statm)) == 1200 * os.sysconf("SC_PAGE_SIZE")


def test_this_process_has_resident_memory_and_an_unreadable_file_reads_as_zero(tmp_path):
    assert process_rss_bytes() > 1 << 20
    assert process_rss_bytes(str(tmp_path / "missing")) == 0
    (tmp_path / "bad").write_text("garbage")
    assert process_rss_bytes(str(tmp_path / "bad")) == 0


def test_the_stores_of_a_worker_share_its_memory():
    assert store_share(900, 3) == 300
    assert store_share(900, 0) == 900  # reported between a store's close and the call: counted once
