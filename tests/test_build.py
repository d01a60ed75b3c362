import importlib.util
import os

import pytest

ROOT = os.path.join(os.path.dirname(__file__), "..")


def _backend():
    spec = importlib.util.spec_from_file_location("sparkstate_build_backend", os.path.join(ROOT, "_build", "backend.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_missing_jdk_is_a_clear_build_error_that_keeps_the_jars_built_before(monkeypatch, tmp_path):
    backend = _backend()
    out = tmp_path / "jars"
    out.mkdir()
    (out / "sparkstate-spark-4.3.jar").write_bytes(b"an earlier build")
    monkeypatch.setattr(backend, "OUT_DIR", str(out))
    monkeypatch.setattr(backend, "OUT_BUILD_ID", str(out / "build-id"))
    monkeypatch.setenv("JAVA_HOME", str(tmp_path))  # no bin/javac there
    with pytest.raises(backend.JdkMissingError, match=r"JDK 17.*javac.*openjdk-17-jdk-headless"):
        backend.build_jars()
    assert sorted(os.listdir(out)) == ["sparkstate-spark-4.3.jar"]


def test_the_build_compiles_a_jar_for_every_line_the_package_serves():
    import sys

    import sparkstate
    sys.path.insert(0, os.path.join(ROOT, "_build"))
    import spark_lines

    assert [line.name for line in spark_lines.LINES] == list(sparkstate.SPARK_LINES)


def test_the_download_of_another_lines_pyspark_does_not_inherit_the_build_hooks_backend(monkeypatch, tmp_path):
    # Inside `pip install .` the backend runs with variables naming _build/ as the backend's path; the nested
    # `pip download` of a pyspark sdist builds its metadata with setuptools, which must not be looked up there.
    import subprocess
    import sys
    sys.path.insert(0, os.path.join(ROOT, "_build"))
    import spark_lines

    seen = {}

    def fake_run(command, **kwargs):
        seen.update(command=command, env=kwargs.get("env"))
        return subprocess.CompletedProcess(command, 1, "", "no index here")

    monkeypatch.setenv("_PYPROJECT_HOOKS_BACKEND_PATH", os.path.join(ROOT, "_build"))
    monkeypatch.setenv("_PYPROJECT_HOOKS_BUILD_BACKEND", "backend")
    monkeypatch.setattr(spark_lines.subprocess, "run", fake_run)
    with pytest.raises(RuntimeError, match="pyspark 3.5.9's jars, and downloading it failed:\nno index here"):
        spark_lines._fetch("3.5.9", str(tmp_path / "jars"))
    assert seen["command"][1:4] == ["-m", "pip", "download"]
    assert seen["env"] is not None and not any(k.startswith("_PYPROJECT_HOOKS_") for k in seen["env"])
    assert seen["env"]["PATH"] == os.environ["PATH"]
