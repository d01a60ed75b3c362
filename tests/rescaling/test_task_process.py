"""The task process the rescale job pipes its requests to (`python -m sparkstate.rescaling.task_process`)."""
from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import replace

from sparkstate.rescaling import build_plan
from sparkstate.rescaling.runner import _task_python
from sparkstate.rescaling.task_process import parse_answers, request_line

from . import fake_checkpoint as fake


def run_process(lines: list[str]) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)  # this checkout's sparkstate
    return subprocess.run([sys.executable, "-m", "sparkstate.rescaling.task_process"], input="".join(lines),
                          capture_output=True, text=True, env=env, timeout=300)


def test_answers_every_request_with_results_or_an_error(tmp_path):
    ck = fake.build(str(tmp_path / "ck"), 4, "rocksdb", str(tmp_path / "local"), operators=("agg",))
    plan = build_plan(ck.path, 8, ck.settings_conf)
    failing = replace(plan, checkpoint=str(tmp_path / "moved-away"))  # its stores cannot be read
    done = run_process([request_line(plan.to_json(), [0, 4]) + "\n", "\n", "not json\n",
                        request_line(failing.to_json(), [1, 5]) + "\n"])
    assert done.returncode == 0, done.stderr
    results, errors = parse_answers(done.stdout.splitlines() + ["some other output"])
    assert sorted(r["partition"] for r in results) == [0, 4]
    assert sum(r["rows"] for r in results) == sum(1 for k in ck.state[(0, "default")]
                                                  if int.from_bytes(k[:4], "big", signed=True) % 4 == 0)
    assert len(errors) == 2
    assert errors[0].startswith("JSONDecodeError")
    assert "moved-away" in errors[1], errors[1]


class _Conf:
    def __init__(self, items: dict[str, str]) -> None:
        self.items = items

    def getAll(self):  # noqa: N802 - SparkConf's name
        return list(self.items.items())


class _Spark:
    def __init__(self, spark_conf: dict[str, str], sql_conf: dict[str, str]) -> None:
        self.sparkContext = type("Ctx", (), {"getConf": lambda _self: _Conf(spark_conf)})()
        self.conf = type("RuntimeConf", (), {"getAll": sql_conf})()


def test_task_python_follows_the_store_workers_rule(monkeypatch):
    key = "spark.sql.streaming.stateStore.sparkstate.pythonExec"
    monkeypatch.setenv("PYSPARK_PYTHON", "/env/python")
    assert _task_python(_Spark({key: "/a/python", "spark.pyspark.python": "/b"}, {})) == "/a/python"
    assert _task_python(_Spark({"spark.pyspark.python": "/b"}, {key: " /sql/python "})) == "/sql/python"
    assert _task_python(_Spark({"spark.pyspark.python": "/b"}, {})) == "/b"
    assert _task_python(_Spark({}, {})) == "/env/python"
    monkeypatch.delenv("PYSPARK_PYTHON")
    assert _task_python(_Spark({}, {})) == "python3"
