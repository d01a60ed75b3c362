#!/usr/bin/env bash
# Installs sparkstate with its test extras (building the JVM shim with javac) and runs the test suite.
# The README's second set-up command. Needs Java 17 (JDK) and Python 3.11.
set -euo pipefail
cd "$(dirname "$0")/.."
export SPARK_LOCAL_IP="${SPARK_LOCAL_IP:-127.0.0.1}"
python3 -m pip install --quiet --upgrade pip setuptools wheel
python3 -m pip install --quiet ".[test]"
python3 -m pytest -q "$@"
