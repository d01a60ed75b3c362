"""The suite's two markers, applied here so that they compose with any `-m` expression.

- `spark`: every test under tests/spark (each starts a SparkSession, a JVM) carries it, so
  `pytest -m "not spark"` runs the unit tests alone; other modules that start a JVM mark themselves.
- `slow`: left out unless the `-m` expression names it (`pytest -m slow`, `-m "slow and spark"`), so that
  `-m "not spark"` still leaves them out.
"""
from __future__ import annotations

import os

import pytest

SPARK_TESTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "spark") + os.sep


@pytest.hookimpl(tryfirst=True)  # before pytest selects by `-m`
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if str(item.path).startswith(SPARK_TESTS):
            item.add_marker(pytest.mark.spark)
    if "slow" in (config.getoption("markexpr") or ""):
        return
    slow = [item for item in items if item.get_closest_marker("slow")]
    if slow:
        config.hook.pytest_deselected(items=slow)
        items[:] = [item for item in items if not item.get_closest_marker("slow")]
