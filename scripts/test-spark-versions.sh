#!/usr/bin/env bash
# Runs sparkstate's checks on every Spark line it serves, one virtual environment per line, and prints a
# table (line x check). Needs Java 17 (JDK) and Python 3.11, like scripts/test.sh; the first run builds
# the environments (pyspark of each line from the package index, sparkstate with its test extras).
#
#   bash scripts/test-spark-versions.sh                 every line, every check
#   LINES="3.5 4.0" bash scripts/test-spark-versions.sh some lines
#   CHECKS="operators rescale" bash scripts/test-spark-versions.sh
#
# Checks: operators (every stateful operator, both backends, against batch across a restart), faults
# (worker kill and hang, task retry, re-executed batch), rescale, migrate (to and from the line's own
# providers, or its refusal on a line without the copy job), tools (inspect, verify, gc on the line's
# checkpoints) and upgrade (a query run on Spark 3.5 continues on 4.3, both backends).
# Environments live under $SPARKSTATE_LINE_VENVS (default .venvs/); logs under $LOGS (default
# .venvs/logs/). Exits non-zero when any check failed.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
export SPARK_LOCAL_IP="${SPARK_LOCAL_IP:-127.0.0.1}"
VENVS="${SPARKSTATE_LINE_VENVS:-$ROOT/.venvs}"
LOGS="${LOGS:-$VENVS/logs}"
LINES="${LINES:-3.5 4.0 4.1 4.2 4.3}"
CHECKS="${CHECKS:-operators faults rescale migrate tools upgrade}"
mkdir -p "$VENVS" "$LOGS"

# Each line's pyspark release: the one its shim compiles against (_build/spark_lines.py).
declare -A PYSPARK
while read -r line release; do PYSPARK[$line]=$release; done < <(python3 -c \
  'import sys; sys.path.insert(0, "_build"); import spark_lines; [print(l.name, l.pyspark) for l in spark_lines.LINES]')
# PySpark 3.5's own Python worker (applyInPandasWithState) fails on newer pyarrow; 15 is its newest
# release that works with it here.
declare -A EXTRA=([3.5]="pyarrow<16")

venv_of() { echo "$VENVS/spark-$1"; }

ensure_venv() {
  local line=$1 venv; venv=$(venv_of "$1")
  if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c "import sparkstate" 2>/dev/null; then
    echo "building $venv (pyspark ${PYSPARK[$line]})" >&2
    python3 -m venv "$venv" && "$venv/bin/pip" install -q -U pip setuptools wheel &&
      "$venv/bin/pip" install -q "pyspark==${PYSPARK[$line]}" ${EXTRA[$line]:-} &&
      "$venv/bin/pip" install -q ".[test]" ${EXTRA[$line]:-} || return 1
  fi
  local got; got=$("$venv/bin/python" -c "import pyspark; print(pyspark.__version__)")
  [ "$got" = "${PYSPARK[$line]}" ] || { echo "$venv has pyspark $got, not ${PYSPARK[$line]}" >&2; return 1; }
}

# The pytest selection of each check.
tests_of() {
  case $1 in
    operators) echo "tests/spark/test_operators.py" ;;
    faults) echo "tests/spark/test_worker_faults.py tests/spark/test_reexecuted_batch.py tests/spark/test_failures.py" ;;
    rescale) echo "tests/spark/test_spark_lines.py tests/spark/test_rescale.py -k rescale_on_the_line or aggregation_4_to_7 or join_3_to_12 or session_window or interrupted_while_publishing" ;;
    migrate) echo "tests/spark/test_spark_lines.py tests/spark/test_migrate.py -k migrate_between or session_window or stream_stream_join or drop_duplicates or apply_in_pandas or streaming_limit" ;;
    tools) echo "tests/spark/test_spark_lines.py -k not migrate and not rescale" ;;
  esac
}

run_check() {
  local line=$1 check=$2 venv log; venv=$(venv_of "$line"); log="$LOGS/$line-$check.log"
  if [ "$check" = upgrade ]; then
    [ "$line" = 4.3 ] || { echo "-"; return 0; }
    ensure_venv 3.5 >>"$log" 2>&1 || { echo "no venv"; return 1; }
    SPARKSTATE_UPGRADE_FROM_PYTHON="$(venv_of 3.5)/bin/python" \
      "$venv/bin/python" -m pytest -q -p no:cacheprovider -m "" tests/spark/test_spark_upgrade.py >"$log" 2>&1
  else
    local selection; selection=$(tests_of "$check")
    # -m "": the slow tests too (tests/spark/test_spark_lines.py is marked slow to keep it out of CI).
    if [[ "$selection" == *" -k "* ]]; then
      "$venv/bin/python" -m pytest -q -p no:cacheprovider -m "" ${selection%% -k *} -k "${selection#* -k }" >"$log" 2>&1
    else
      # shellcheck disable=SC2086
      "$venv/bin/python" -m pytest -q -p no:cacheprovider -m "" $selection >"$log" 2>&1
    fi
  fi
  local rc=$?
  local counts; counts=$(grep -Eo "[0-9]+ (passed|failed|error)" "$log" | tr '\n' ' ')
  if [ $rc -eq 0 ]; then echo "ok (${counts% })"; else echo "FAILED (${counts% }) $log"; fi
  return $rc
}

status=0
printf "| Spark | %s |\n" "$(echo $CHECKS | sed 's/ / | /g')"
printf "|---|%s\n" "$(for c in $CHECKS; do printf -- '---|'; done)"
for line in $LINES; do
  if ! ensure_venv "$line" >"$LOGS/$line-venv.log" 2>&1; then
    printf "| %s | could not build the environment: %s |\n" "$line" "$LOGS/$line-venv.log"; status=1; continue
  fi
  row="| ${PYSPARK[$line]} |"
  for check in $CHECKS; do
    cell=$(run_check "$line" "$check") || status=1
    row="$row $cell |"
  done
  echo "$row"
done
exit $status
