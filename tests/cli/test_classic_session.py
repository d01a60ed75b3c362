"""The chores that run a Spark job of their own (rescale, migrate) refuse a Spark Connect session at once,
saying to run them with a classic one; the file-only chores (inspect, verify, gc) need no session."""
from __future__ import annotations

import pytest

import sparkstate
from sparkstate.cli import main
from sparkstate.errors import ClassicSessionRequired


def _connect_session_class() -> type:
    """PySpark's Connect session class when its client libraries are installed, else a class of the same
    module and name (what the check looks at)."""
    try:
        from pyspark.sql.connect.session import SparkSession
        return SparkSession
    except ImportError:
        return type("SparkSession", (), {"__module__": "pyspark.sql.connect.session"})


def _connect_session() -> object:
    return object.__new__(_connect_session_class())  # no server: nothing may be called on it


@pytest.mark.parametrize("call", [lambda s, c: sparkstate.rescale(s, c, 4),
                                  lambda s, c: sparkstate.migrate(s, c, "sparkstate")], ids=["rescale", "migrate"])
def test_the_python_functions_refuse_a_connect_session_before_reading_anything(tmp_path, call):
    with pytest.raises(ClassicSessionRequired) as refused:
        call(_connect_session(), str(tmp_path / "no-such-checkpoint"))
    message = str(refused.value)
    assert "needs a classic SparkSession" in message and "Spark Connect" in message
    assert "spark-submit" in message and "--master" in message


@pytest.mark.parametrize("command", ["rescale", "migrate"])
def test_the_commands_refuse_a_connect_session(tmp_path, monkeypatch, capsys, command):
    """With SPARK_REMOTE set, the command's `SparkSession.builder.getOrCreate()` gives a Connect session."""
    from sparkstate.cli import rewrite_command

    checkpoint = tmp_path / "ckpt"
    (checkpoint / "offsets").mkdir(parents=True)
    (checkpoint / "offsets" / "0").write_text('v1\n{"batchWatermarkMs":0,"batchTimestampMs":0,"conf":{}}\n{}\n')
    (checkpoint / "metadata").write_text('{"id":"q"}')
    stopped = []
    session = _connect_session()

    def connect_session(*_args, **_kwargs):
        type(session).stop = lambda self: stopped.append(True)
        return session, {}

    monkeypatch.setattr(rewrite_command, "start_spark", connect_session)
    arguments = ["--partitions", "4"] if command == "rescale" else ["--to", "hdfs"]
    assert main([command, "--checkpoint", str(checkpoint), *arguments]) == 1
    err = capsys.readouterr().err
    assert "needs a classic SparkSession" in err and f"sparkstate {command} --master" in err, err
    assert stopped, "the session the command started is stopped"


def test_the_file_only_chores_take_no_session():
    import inspect

    from sparkstate.cli import gc, verify
    from sparkstate.cli import inspect as inspect_cli

    for module in (gc, inspect_cli, verify):
        assert "start_spark" not in inspect.getsource(module) and "SparkSession" not in inspect.getsource(module)
