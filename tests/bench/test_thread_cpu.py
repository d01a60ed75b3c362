"""thread_cpu: the parts a Spark run's threads are counted under, and the sampler's seconds."""
import hashlib
import subprocess
import sys
import threading
import time

import pytest

from sparkstate_jobs.bench.thread_cpu import OTHER, ThreadCpuSampler, part_of, timed

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")


@pytest.mark.parametrize("proc,name,part", [
    ("jvm", "C2 CompilerThre", "JIT compilers"),
    ("jvm", "C1 CompilerThre", "JIT compilers"),
    ("jvm", "GC Thread#1", "GC"),
    ("jvm", "G1 Conc#0", "GC"),
    ("jvm", "Executor task l", "tasks"),
    ("jvm", "stream executio", "query start and planning"),
    ("jvm", "Thread-3", "query start and planning"),
    ("jvm", "rocksdb:low", "RocksDB background threads"),
    ("worker", "rocksdb:low", "state workers (Python)"),
    ("worker", "python", "state workers (Python)"),
    ("self", "python", "benchmark driver (Python)"),
    ("jvm", "dag-scheduler-e", OTHER),
])
def test_threads_are_counted_under_their_part(proc, name, part):
    assert part_of(proc, name) == part


def _burn(seconds: float) -> None:
    # hashing a large block releases the GIL: the sampler thread reads /proc meanwhile instead of waiting a
    # switch interval per file (in a pytest process whose descendants include a JVM, hundreds of files)
    block = bytes(1 << 20)
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        hashlib.sha256(block)


def test_sampler_counts_a_child_that_ended_and_a_thread_of_its_own():
    sampler = ThreadCpuSampler(interval_s=0.05).start()
    child = subprocess.Popen([sys.executable, "-c",
                              "import time\nend = time.process_time() + 0.6\nwhile time.process_time() < end: pass"])
    worker = threading.Thread(target=_burn, args=(0.4,))
    worker.start()
    worker.join()
    child.wait(timeout=30)
    time.sleep(0.1)   # the child is gone: only the sampler's earlier reads know its CPU
    cpu = sampler.stop()
    assert 0.4 <= cpu[OTHER] <= 0.9, cpu
    assert 0.35 <= cpu["benchmark driver (Python)"] <= 1.5, cpu


def test_cpu_before_the_start_is_not_counted():
    _burn(0.5)   # this thread's CPU so far stays out of the window
    sampler = ThreadCpuSampler(interval_s=0.05).start()
    time.sleep(0.2)
    cpu = sampler.stop()
    assert cpu.get("benchmark driver (Python)", 0) < 0.2, cpu


def test_timed_line_gives_the_share_of_the_cores():
    line = timed(2.0, {"JIT compilers": 1.5, "tasks": 0.5}, cores=2)
    assert line == "2.00 s CPU in 2.00 s (50% of 2 cores): JIT compilers 1.50, tasks 0.50"
