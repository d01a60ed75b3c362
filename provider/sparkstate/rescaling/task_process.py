"""The process a rescale task runs: `<pythonExec> -m sparkstate.rescaling.task_process`.

The driver runs the rescale as one Spark job of JVM tasks, `RDD.pipe` over request lines: each task starts
this module with the executor's environment (as the shim starts `python -m sparkstate.worker` for the
store workers, with the same interpreter setting) and writes it one line per task group; the module builds
those new partitions (`task.rescale_partitions`) and answers one line per request. No PySpark worker is
involved: a PySpark worker daemon imports pyspark from `pyspark.zip`, compiling it from source on every
start, which cost more than a whole task's work.

Protocol (UTF-8 text lines; other output on stdout is ignored by the driver)::

    stdin:  {"plan": "<Plan.to_json()>", "parts": [0, 4]}
    stdout: sparkstate-rescale-result {"results": [<partition stats>, ...]}
        or  sparkstate-rescale-result {"error": "RescaleError: <message>"}

Errors are answered in-band, so the driver can name them (a failed pipe task only says "exited with
status 1"); the process then goes on with the next request, as the other tasks of the job do. A process
that dies without answering fails its Spark task, and the driver reports the requests left unanswered.
"""
from __future__ import annotations

import json
import sys
import traceback
from typing import Iterable

RESULT_PREFIX = "sparkstate-rescale-result "


def request_line(plan_json: str, parts: list[int]) -> str:
    return json.dumps({"plan": plan_json, "parts": list(parts)})


def parse_answers(lines: Iterable[str]) -> tuple[list[dict], list[str]]:
    """(partition statistics, error messages) from the collected output lines of the job."""
    results: list[dict] = []
    errors: list[str] = []
    for line in lines:
        if not line.startswith(RESULT_PREFIX):
            continue
        doc = json.loads(line[len(RESULT_PREFIX):])
        if "error" in doc:
            errors.append(str(doc["error"]))
        else:
            results.extend(doc["results"])
    return results, errors


def answer(request: str) -> str:
    from ..errors import RescaleError
    from .task import rescale_partitions

    try:
        doc = json.loads(request)
        out: dict = {"results": rescale_partitions(doc["plan"], [int(p) for p in doc["parts"]])}
    except RescaleError as e:
        out = {"error": f"RescaleError: {e}"}
    except Exception as e:  # noqa: BLE001 - reported to the driver, with the traceback on stderr
        traceback.print_exc(file=sys.stderr)
        out = {"error": f"{type(e).__name__}: {e}"}
    return RESULT_PREFIX + json.dumps(out, sort_keys=True)


def main() -> int:
    for line in sys.stdin:
        if line.strip():
            sys.stdout.write(answer(line) + "\n")
            sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
