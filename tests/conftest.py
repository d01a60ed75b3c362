"""The suite's two markers, made to compose with any `-m` expression.

- `spark`: every test under tests/spark (each starts a SparkSession, a JVM) carries it, so
  `pytest -m "not spark"` runs the unit tests alone; other modules that start a JVM mark themselves.
- `slow`: left out by pyproject's `-m 'not slow'`. A `-m` given on the command line replaces that one, so an
  expression that does not name `slow` is extended with `and not slow`: `-m "not spark"` still leaves the
  slow tests out, `-m slow` runs them, `-m ""` runs everything.
"""
from __future__ import annotations

import os

import pytest

SPARK_TESTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "spark") + os.sep


def pytest_configure(config: pytest.Config) -> None:
    expression = config.option.markexpr
    if expression and "slow" not in expression:
        config.option.markexpr = f"({expression}) and not slow"


@pytest.hookimpl(tryfirst=True)  # before pytest selects by `-m`
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if str(item.path).startswith(SPARK_TESTS):
            item.add_marker(pytest.mark.spark)
