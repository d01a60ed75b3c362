"""The JVM shim's own unit tests (jvm-shim/src/test/java), compiled and run by the build's `run_java_tests`
against the installed shim jar, so CI runs them with the Python suite."""
from __future__ import annotations

import importlib.util
import os

import pytest

import sparkstate

pytestmark = pytest.mark.spark  # compiles and runs Java

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _build_backend():
    spec = importlib.util.spec_from_file_location("sparkstate_build_backend", os.path.join(ROOT, "_build", "backend.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_shims_unit_tests_pass():
    done = _build_backend().run_java_tests(sparkstate.jar_path())
    report = done.stdout + done.stderr
    assert done.returncode == 0, report[-6000:]
    passed = [line for line in done.stdout.splitlines() if line.startswith("PASS ")]
    assert len(passed) >= 20, report[-3000:]
    for suite in ("KeyCodecTest", "FramesTest", "WorkerPoolTest", "LivenessTest", "ShimSettingsTest",
                  "StoreFailuresTest", "WorkerDirTest", "MetricsTest"):
        assert any(line.startswith(f"PASS {suite}.") for line in passed), f"no test of {suite} ran"
