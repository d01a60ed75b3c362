"""The `sparkstate` command as a new user meets it: help for every command, a version, clear refusals of
paths that hold no checkpoint (before Spark starts), JSON for scripts, and a quiet end when piped."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from sparkstate import __version__
from sparkstate.cli import COMMANDS, main
from sparkstate.migration.plan import HDFS_PROVIDER

from ..engine.conftest import kv
from ..inspection.conftest import PARTITIONS, open_store, write_log


def _run(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sparkstate.cli", *args], capture_output=True, text=True,
                          timeout=timeout)


def test_version(capsys):
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"sparkstate {__version__}"


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_command_has_help(command, capsys):
    assert main([command, "--help"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: sparkstate {command}"), out[:200]


def test_the_overview_lists_the_commands_and_exit_codes(capsys):
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    assert all(name in out for name in COMMANDS) and "exit codes: 0" in out


def test_no_command_and_a_wrong_one_are_usage_errors(capsys):
    assert main([]) == 2
    assert main(["frobnicate"]) == 2
    assert "invalid choice" in capsys.readouterr().err


def test_demo_help_shows_choices_and_defaults(capsys):
    assert main(["demo", "--help"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "usage: sparkstate demo" in out and "{rocksdb,heap}" in out and "(default: 8)" in out


def test_a_wrong_demo_backend_is_refused_before_anything_is_made(tmp_path):
    workdir = tmp_path / "demo"
    proc = _run("demo", "--backend", "foo", "--workdir", str(workdir))
    assert proc.returncode == 2 and "invalid choice: 'foo'" in proc.stderr and "Traceback" not in proc.stderr
    proc = _run("demo", "--conf", "spark.sql.streaming.stateStore.sparkstate.backend=foo",
                "--workdir", str(workdir))
    assert proc.returncode == 2 and "expected rocksdb, heap" in proc.stderr and "Traceback" not in proc.stderr
    assert not workdir.exists()


def test_a_reader_that_leaves_early_ends_the_output_quietly():
    proc = subprocess.Popen([sys.executable, "-m", "sparkstate.cli", "conf-docs"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    proc.stdout.readline()  # like `| head -1`
    proc.stdout.close()
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0 and b"BrokenPipeError" not in err, err


@pytest.mark.parametrize("command", ["gc", "verify", "inspect"])
def test_a_missing_checkpoint_is_refused(command, tmp_path, capsys):
    assert main([command, "--checkpoint", str(tmp_path / "nonexistent")]) == 1
    assert "does not exist" in capsys.readouterr().err


def test_rescale_refuses_a_missing_checkpoint_before_starting_spark(tmp_path):
    started = time.monotonic()
    proc = _run("rescale", "--checkpoint", str(tmp_path / "nonexistent"), "--partitions", "3")
    assert proc.returncode == 1 and "does not exist" in proc.stderr, proc.stderr
    assert time.monotonic() - started < 20, "Spark was started for a path that is not there"
    assert "SparkContext" not in proc.stderr


def test_migrate_repairs_a_file_sink_log_without_starting_spark(tmp_path, capsys):
    from ..rewrite.test_file_sink import _checkpoint, _sink
    providers = ["io.sparkstate.PythonStateStoreProvider"] * 2 + ["org.example.HDFSBackedStateStoreProvider"] * 2
    ckpt = _checkpoint(tmp_path, [4] * 4, committed=3, providers=providers)
    sink = _sink(tmp_path, ["0", "1", "3"])
    assert main(["migrate", "--checkpoint", ckpt, "--repair-file-sink", sink]) == 0
    assert "migration batches [2]" in capsys.readouterr().out
    assert (tmp_path / "out" / "_spark_metadata" / "2").read_text() == "v1"
    assert main(["migrate", "--checkpoint", ckpt, "--repair-file-sink", sink]) == 0
    assert "nothing to repair" in capsys.readouterr().out
    assert main(["migrate", "--checkpoint", ckpt]) == 1
    assert "--to is required (or --repair-file-sink)" in capsys.readouterr().err


def test_a_rewrite_with_nothing_to_do_succeeds_and_still_completes_its_file_sinks(tmp_path, capsys):
    """A rescale run again after it finished, this time with --file-sink: no rewrite, exit 0, and the sink
    gets the rescale's batch the first run (without --file-sink) did not give it."""
    import io

    from sparkstate.cli.console import Output
    from sparkstate.cli.rewrite_command import already_done
    from sparkstate.errors import AlreadyRescaledError

    from ..rewrite.test_file_sink import _checkpoint, _sink
    ckpt = _checkpoint(tmp_path, [4, 4, 6, 6], committed=3)  # batch 2 rescaled to 6
    sink = _sink(tmp_path, ["0", "1", "3"])
    done = AlreadyRescaledError(f"the state of {ckpt} already has 6 partitions")
    stdout = io.StringIO()
    assert already_done("rescale", ckpt, done, [sink], [], Output(json_mode=True, stdout=stdout)) == 0
    assert json.loads(stdout.getvalue()) == {"nothing_to_do": str(done), "file_sinks": {sink: [2]}}
    assert (tmp_path / "out" / "_spark_metadata" / "2").read_text() == "v1"
    assert already_done("rescale", ckpt, done, [sink], [], Output()) == 0
    assert capsys.readouterr().out.splitlines() == [f"nothing to do: {done}", f"{sink}: nothing to repair "
                                                    "(its log has every rescale and migration batch)"]


def test_a_rescale_to_the_partitions_the_state_has_says_so_without_starting_spark(tmp_path, capsys, monkeypatch):
    from sparkstate.cli import rewrite_command

    from ..rewrite.test_file_sink import _checkpoint

    def no_spark(*args, **kwargs):
        raise AssertionError("Spark started")
    monkeypatch.setattr(rewrite_command, "start_spark", no_spark)
    provider = "io.sparkstate.PythonStateStoreProvider"
    ckpt = _checkpoint(tmp_path, [4, 6, 6], committed=2, providers=[provider] * 3)
    assert main(["rescale", "--checkpoint", ckpt, "--partitions", "6", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {
        "nothing_to_do": f"the state of {ckpt} already has 6 partitions", "file_sinks": {}}
    # another count, Spark's own provider, or a batch started after the last commit: the job decides
    for partitions, providers, committed in ((4, [provider] * 3, 2), (6, ["other"] * 3, 2), (6, [provider] * 3, 1)):
        (tmp_path / "ckpt").rename(tmp_path / f"old-{partitions}-{committed}-{providers[0]}")
        ckpt = _checkpoint(tmp_path, [4, 6, 6], committed=committed, providers=providers)
        with pytest.raises(AssertionError, match="Spark started"):
            main(["rescale", "--checkpoint", ckpt, "--partitions", str(partitions)])


def test_a_migration_to_the_provider_the_query_runs_on_says_so_without_starting_spark(tmp_path, capsys,
                                                                                       monkeypatch):
    from sparkstate.cli import rewrite_command

    from ..rewrite.test_file_sink import _checkpoint

    def no_spark(*args, **kwargs):
        raise AssertionError("Spark started")
    monkeypatch.setattr(rewrite_command, "start_spark", no_spark)
    ours, hdfs = "io.sparkstate.PythonStateStoreProvider", HDFS_PROVIDER
    done = [(["--to", "sparkstate"], [hdfs, ours, ours], f"already runs on sparkstate ({ours})"),
            (["--to", "hdfs"], [ours, hdfs, hdfs], f"already runs on hdfs ({hdfs})"),
            (["--to", "sparkstate", "--partitions", "6"], [ours] * 3, "already runs on sparkstate with 6 partitions")]
    for i, (args, providers, answer) in enumerate(done):
        ckpt = _checkpoint(tmp_path / f"done-{i}", [4, 6, 6], committed=2, providers=providers)
        assert main(["migrate", "--checkpoint", ckpt, *args, "--json"]) == 0, args
        assert json.loads(capsys.readouterr().out) == {"nothing_to_do": f"the query of {ckpt} {answer}",
                                                       "file_sinks": {}}
    # a backend to compare with the stores', another provider or count, a batch started after the last
    # commit (an interrupted migration): the job decides
    for i, (args, providers, committed) in enumerate((
            (["--to", "sparkstate", "--backend", "heap"], [ours] * 3, 2),
            (["--to", "rocksdb"], [ours] * 3, 2),
            (["--to", "sparkstate", "--partitions", "4"], [ours] * 3, 2),
            (["--to", "sparkstate"], [hdfs, hdfs, ours], 1))):
        ckpt = _checkpoint(tmp_path / f"job-{i}", [4, 6, 6], committed=committed, providers=providers)
        with pytest.raises(AssertionError, match="Spark started"):
            main(["migrate", "--checkpoint", ckpt, *args])


@pytest.fixture
def checkpoint(tmp_path) -> str:
    ckpt = str(tmp_path / "ckpt")
    for p in range(PARTITIONS):
        store = open_store(ckpt, p, f"w{p}", "rocksdb")
        for batch in range(2):
            store.load(batch)
            store.apply_batch([kv(100 * batch + 10 * p + i) for i in range(10)])
            store.commit()
        store.close()
    for batch in range(2):
        write_log(ckpt, "offsets", batch)
        write_log(ckpt, "commits", batch)
    return ckpt


@pytest.mark.parametrize("command", [["gc", "--dry-run"], ["verify"], ["inspect"]])
def test_json_output_is_one_document(command, checkpoint, capsys):
    assert main([command[0], "--checkpoint", checkpoint, *command[1:], "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert len(doc["stores"]) == PARTITIONS


def test_tables_fit_paths_when_piped(checkpoint):
    proc = _run("gc", "--checkpoint", checkpoint, "--dry-run")
    assert proc.returncode == 0, proc.stderr
    assert os.path.join(checkpoint, "state", "0", "1") in proc.stdout  # not cut to a terminal's width
