"""`sparkstate inspect`: figures checked against what the stores really hold, the predicted balance against
the routing rule, the JSON document and the HTML page."""
from __future__ import annotations

import json
import os
from html.parser import HTMLParser

from sparkstate.checkpoint.file_manager import CheckpointFileManager
from sparkstate.cli import main as cli_main
from sparkstate.inspection.inspect import InspectReport
from sparkstate.keygroups import key_group
from sparkstate.storage.local import LocalFileIO

from ..engine.conftest import backend_name, contents, kv
from .conftest import BATCHES, PARTITIONS, migrate_out_by_hand, open_store, pin_batch, write_v2_checkpoint


def _inspect(ckpt: str, capsys, *extra: str) -> tuple[int, str]:
    code = cli_main(["inspect", "--checkpoint", ckpt, *extra])
    return code, capsys.readouterr().out


def _truth(ckpt: str, backend: str, version: int) -> dict[int, dict[bytes, bytes]]:
    """Every partition's entries at `version`, read through the store itself."""
    out = {}
    for p in range(PARTITIONS):
        store = open_store(ckpt, p, f"truth{p}", backend)
        store.load(version)
        out[p] = contents(store)
        store.close()
    return out


def _manifest_figures(ckpt: str, partition: int) -> list[tuple[int, int]]:
    """(checkpoint bytes, bytes shared with the version before) of versions 1..BATCHES, read straight from the
    manifests. Which SSTs a RocksDB version shares depends on whether its background compaction finished
    before the commit, so the expected sharing is read, not assumed."""
    fm = CheckpointFileManager(f"{ckpt}/state/0/{partition}", LocalFileIO())
    out, before = [], {}
    for v in range(1, BATCHES + 1):
        m = fm.read_manifest(v)
        sizes = {f.remote: f.size for f in m.files}
        out.append((sum(sizes.values()) + sum(p.size for p in m.private_files),
                    sum(size for remote, size in sizes.items() if remote in before)))
        before = sizes
    return out


def test_figures_match_the_stores_contents(query, capsys, backend):
    code, out = _inspect(query, capsys, "--json", "--partitions", "3")
    assert code == 0, out
    doc = json.loads(out)
    assert doc["backends"] == [backend_name(backend)] and doc["version"] == BATCHES and doc["lastBatch"] == BATCHES - 1
    truth = _truth(query, backend, BATCHES)
    for store in doc["stores"]:
        entries = truth[store["partitionId"]]
        assert store["keys"] == len(entries) == 10 * BATCHES
        assert store["liveBytes"] == sum(len(k) + len(v) for k, v in entries.items())
        assert [v["version"] for v in store["versions"]] == list(range(1, BATCHES + 1))
        assert [v["keys"] for v in store["versions"]] == [10 * v for v in range(1, BATCHES + 1)]
        figures = _manifest_figures(query, store["partitionId"])
        assert [(v["checkpointBytes"], v["sharedBytes"]) for v in store["versions"]] == figures
        assert store["versions"][-1]["checkpointBytes"] == store["checkpointBytes"]
        # A version's second batch reuses files of its first on both backends (SSTs, the heap's base snapshot).
        assert 0 < figures[1][1] < figures[1][0]
    assert [b["keys"] for b in doc["balance"]] == [[10 * BATCHES] * PARTITIONS]
    groups = [key_group(k) for entries in truth.values() for k in entries]
    expected = [sum(1 for g in groups if g % 3 == p) for p in range(3)]
    assert doc["predicted"][0]["keys"] == expected and doc["predicted"][0]["max"] == max(expected)
    largest = max(groups.count(g) for g in set(groups))
    assert doc["largestKeyGroup"]["0"]["keys"] == largest == groups.count(doc["largestKeyGroup"]["0"]["keyGroup"])


def test_an_older_batch_and_the_table(query, capsys, backend):
    code, out = _inspect(query, capsys, "--batch", "1")
    assert code == 0, out
    assert "showing version 2" in out and "retained versions 1-4" in out
    groups = [key_group(k) for entries in _truth(query, backend, 2).values() for k in entries]
    largest = max(groups.count(g) for g in set(groups))
    assert f"operator 0: at most {largest} keys share one key group (" in out, out
    group = int(out.split("share one key group (")[1].split(",")[0])
    assert groups.count(group) == largest and f", now in partition {group % PARTITIONS}); a rescale" in out
    name = backend_name(backend)
    assert f"0/0      {name}" in out or ("0/0" in out and name in out)
    code, out = _inspect(query, capsys, "--batch", "9")
    assert code == 1


def test_the_html_page_stands_alone(query, capsys, tmp_path):
    page = str(tmp_path / "state.html")
    code, out = _inspect(query, capsys, "--partitions", "5", "--html", page)
    assert code == 0 and os.path.getsize(page) > 0

    class Parts(HTMLParser):
        def __init__(self) -> None:
            super().__init__()
            self.tags: list[str] = []
            self.refs: list[str] = []
            self.bars = 0
            self.shared = 0

        def handle_starttag(self, tag, attrs):
            self.tags.append(tag)
            attrs = dict(attrs)
            self.refs += [v for k, v in attrs.items() if k in ("src", "href") and v]
            self.bars += tag == "rect" and attrs.get("class") == "bar"
            self.shared += tag == "rect" and attrs.get("class") == "part"

    parts = Parts()
    parts.feed(open(page, encoding="utf-8").read())
    assert parts.refs == [], "the page loads nothing from elsewhere"
    # keys and bytes over 4 versions, keys per partition now (2) and after a rescale to 5
    assert parts.tags.count("svg") == 4 and parts.bars == 4 + 4 + PARTITIONS + 5
    assert parts.shared == 4, "each bytes bar shows the part shared with the version before"


def test_files_only_reads_no_state(query, capsys):
    code, out = _inspect(query, capsys, "--files-only", "--json")
    doc = json.loads(out)
    assert code == 0 and all(s["liveBytes"] is None and s["keys"] == 40 for s in doc["stores"])


def test_a_path_without_state_is_refused(tmp_path, capsys):
    assert cli_main(["inspect", "--checkpoint", str(tmp_path / "nothing")]) == 1
    assert "does not exist" in capsys.readouterr().err


def test_v2_the_recorded_attempt_is_shown_not_the_last_published(tmp_path, capsys, backend):
    v2 = write_v2_checkpoint(str(tmp_path / "ckpt"), backend)
    code, out = _inspect(v2.path, capsys, "--json")
    assert code == 0, out
    partition_1 = next(s for s in json.loads(out)["stores"] if s["partitionId"] == 1)
    assert partition_1["keys"] == 30 and partition_1["versions"][-1]["keys"] == 30  # the zombie's has 35


def test_key_group_notes_name_the_partition_by_spark_routing():
    report = InspectReport(checkpoint="c", state_root="c/state", provider=None, last_batch=1, num_partitions=4,
                           version=2, largest_key_group={0: (7, 1), 1: (-5, 3)})
    assert report.key_group_notes() == [
        "operator 0: every key has a key group of its own",
        "operator 1: at most 3 keys share one key group (-5, now in partition 3); a rescale keeps a key "
        "group's keys in one partition"]  # pmod(-5, 4) == 3, as Spark routes a negative hash


def test_a_query_moved_to_another_provider_shows_that_providers_stores(query, capsys):
    """After `sparkstate migrate --to hdfs`: Spark's files are the state (sparkstate's stores beside them
    are from before the move and are neither listed as the query's nor counted as Spark's)."""
    last = migrate_out_by_hand(query)
    code, out = _inspect(query, capsys, "--json")
    doc = json.loads(out)
    assert code == 0 and doc["provider"].endswith("HDFSBackedStateStoreProvider")
    stores = doc["stores"]
    assert [s["store"] for s in stores] == [f"0/{p}" for p in range(PARTITIONS)]
    assert {s["backend"] for s in stores} == {"spark"}
    assert [v["version"] for v in stores[0]["versions"]] == list(range(BATCHES + 1, last + 2))
    assert any("hold the state from before the query moved to" in n for n in doc["notes"])


def test_an_unfinished_rescale_is_named_with_the_command_that_finishes_it(query, capsys):
    pin_batch(query, BATCHES, partitions=3)  # a rescale killed between its offset and commit log entries
    assert cli_main(["inspect", "--checkpoint", query]) == 0
    out = capsys.readouterr().out
    assert "unfinished rescale to 3 partitions" in out, out
    assert f"`sparkstate rescale --checkpoint {query} --partitions 3`" in out


def test_with_idle_state_stamps_the_time_since_each_keys_last_write_is_shown(tmp_path, capsys, backend,
                                                                              monkeypatch):
    import time

    from sparkstate.inspection.inspect import AGE_LABELS

    from .conftest import write_log
    now = {"ms": 1_700_000_000_000}
    monkeypatch.setattr(time, "time", lambda: now["ms"] / 1000)
    ckpt = str(tmp_path / "ckpt")
    for p in range(PARTITIONS):
        store = open_store(ckpt, p, f"w{p}", backend, ttl_ms=30 * 86_400_000)
        # The wall clock moves on before each commit: by 2 days, 20 minutes, 30 seconds.
        for batch, advance in enumerate((2 * 86_400_000, 20 * 60_000, 30_000)):
            store.load(batch)
            store.apply_batch([kv(100 * batch + 10 * p + i) for i in range(10)])
            now["ms"] += advance
            store.commit()
        store.close()
    for batch in range(3):
        write_log(ckpt, "offsets", batch)
        write_log(ckpt, "commits", batch)
    code, out = _inspect(ckpt, capsys, "--json")
    assert code == 0
    ages = json.loads(out)["keyAges"]["0"]
    # Version 3 is read at the time version 3 was committed. Each batch ran at the time the version before
    # it was committed (batch 0: when it loaded), so its keys are 30 s (batch 2), 20 min 30 s (batch 1)
    # and 2 days 20 min 30 s (batch 0) old.
    assert ages["bins"] == list(AGE_LABELS)
    assert dict(zip(ages["bins"], ages["keys"])) == {**{b: 0 for b in AGE_LABELS},
                                                     "<= 1m": 20, "<= 1h": 20, "<= 7d": 20}
    code, text = _inspect(ckpt, capsys)
    assert "keys by time since their last write (idle-state stamps): <= 1m 20, <= 1h 20, <= 7d 20" in text
    page = tmp_path / "page.html"
    assert _inspect(ckpt, capsys, "--html", str(page))[0] == 0
    assert "Time since each key" in page.read_text()
