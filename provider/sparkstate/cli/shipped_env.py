"""The spark-defaults block for a Python environment shipped to the executors as an archive, and the
`spark.executor.memoryOverhead` it needs for the store workers (`sparkstate conf-docs --archive`).

Spark unpacks each `spark.archives` entry `<file>#<dir>` into the working directory of every executor (and
of a cluster-mode driver), where relative paths such as `./<dir>/bin/python` resolve: PySpark's workers
find their interpreter there through `spark.pyspark.python`, sparkstate's store workers through
`pythonExec`, since the executor JVM starts them in its working directory.

The store workers live beside the executor JVM, in its container: their memory is counted in
`spark.executor.memoryOverhead` (YARN, Kubernetes), never in the heap, and `spark.executor.pyspark.memory`
is the budget of PySpark's own workers, not theirs. Per executor:

    memoryOverhead = max(384 MiB, 10% of spark.executor.memory)     Spark's own default, for the JVM
                   + workers x (WORKER_BASE_MIB + block cache)     the store workers
                   + state held in memory                          heap: the state; rocksdb: memtables

with workers = maxWorkers, which the block sets to twice the executor's cores (the pool's default is twice
the JVM's available processors, which on a node without CPU limits is the whole machine's).
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass

from ..config import PREFIX, PROVIDER_CLASS, PROVIDER_CLASS_KEY

# One store worker's resident memory before its state (interpreter and libraries loaded, one store of 1000
# keys), MiB: scripts/measure-worker-memory.py measured 72 (rocksdb) and 80 (heap) on Linux x86-64, Python
# 3.11, Spark 4.3 (docs/deploy.md); rounded up for allocator slack and libraries a user's environment adds.
WORKER_BASE_MIB = 100
DEFAULT_ENV_DIR = "environment"


@dataclass(frozen=True)
class ExecutorShape:
    """What the overhead is sized for: one executor's cores and heap, the backend and its in-memory state."""

    cores: int = 1
    memory_mib: int = 1024
    backend: str = "rocksdb"
    block_cache_mib: int = 64
    state_mib: int = 0

    @property
    def workers(self) -> int:
        return 2 * self.cores


def memory_overhead_mib(shape: ExecutorShape) -> int:
    """`spark.executor.memoryOverhead` in MiB for `shape` (the formula of the module doc)."""
    spark_default = max(384, math.ceil(0.10 * shape.memory_mib))
    cache = shape.block_cache_mib if shape.backend == "rocksdb" else 0
    return spark_default + shape.workers * (WORKER_BASE_MIB + cache) + shape.state_mib


def parse_mib(text: str) -> int:
    """A size as Spark writes memory settings (`4g`, `512m`, `1024`: MiB) -> MiB."""
    units = {"k": 1 / 1024, "m": 1, "g": 1024, "t": 1024 * 1024}
    value = text.strip().lower().removesuffix("b").removesuffix("i")
    if value and value[-1] in units:
        return math.ceil(float(value[:-1]) * units[value[-1]])
    return int(value)


def archive_and_dir(archive: str) -> tuple[str, str]:
    """`env.tar.gz#dir` or `env.tar.gz` (unpacked as `environment`) -> (archive, dir)."""
    path, _, name = archive.partition("#")
    return path, name or DEFAULT_ENV_DIR


def archive_block(archive: str, jar: str, driver_python: str, shape: ExecutorShape) -> str:
    """The spark-defaults lines for a shipped environment: one block to copy into spark-defaults.conf or
    pass with `spark-submit --properties-file`."""
    path, env_dir = archive_and_dir(archive)
    python = f"./{env_dir}/bin/python"
    overhead = memory_overhead_mib(shape)
    cache = f" + {shape.block_cache_mib} (rocksdb block cache)" if shape.backend == "rocksdb" else ""
    backend_line = f"{PREFIX}backend       {shape.backend}\n" if shape.backend != "rocksdb" else ""
    return f"""\
# sparkstate with the Python environment shipped as {os.path.basename(path)} (venv-pack or conda-pack).
# Spark unpacks it as ./{env_dir} in every executor's working directory; the executors need Java
# and nothing else installed. The archive must hold this sparkstate build (the jar below is its
# copy); venv-pack archives also need the same base Python at the same path on every node.
spark.archives                                          {path}#{env_dir}
# PySpark's own Python workers:
spark.pyspark.python                                    {python}
# The driver's interpreter in client mode (it runs here, without the archive); drop this line in
# cluster mode, where the driver has ./{env_dir} too:
spark.pyspark.driver.python                             {driver_python}
# sparkstate's store workers (started by the executor JVM in its working directory):
{PREFIX}pythonExec    {python}
# The shim jar; Spark ships it from the driver to every executor:
spark.jars                                              {jar}
{PROVIDER_CLASS_KEY}            {PROVIDER_CLASS}
spark.executor.cores                                    {shape.cores}
spark.executor.memory                                   {shape.memory_mib}m
{backend_line}# Store workers per executor: at most twice its {shape.cores} core(s), so the memory below holds:
{PREFIX}maxWorkers    {shape.workers}
# Memory beside the JVM heap, where the container counts the store workers (spark.executor.pyspark.memory
# is PySpark's own workers' budget and does not cover them), for executors of {shape.cores} core(s) and
# spark.executor.memory={shape.memory_mib}m, backend {shape.backend}, {shape.state_mib} MiB of state in memory:
#   max(384, 10% of {shape.memory_mib}) + {shape.workers} workers x ({WORKER_BASE_MIB} (worker){cache})
#   + {shape.state_mib} (state)
spark.executor.memoryOverhead                           {overhead}m
"""
