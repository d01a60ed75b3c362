"""A Spark standalone cluster on this machine, started from Spark's own classes, whose executors get
sparkstate only from a Python environment shipped as an archive.

- `build_shipped_environment(work)` does what docs/deploy.md ("Shipping the Python environment") tells a
  user to do: `pip wheel` of this checkout (from a copy of its sources, so the checkout's own jars stay),
  a fresh venv with that wheel installed, packed with venv-pack; the packed venv's own
  `sparkstate conf-docs --archive` gives the Spark settings, its jar included.
- `StandaloneCluster` runs `spark-class org.apache.spark.deploy.master.Master` and one
  `...deploy.worker.Worker` per worker, each with its own work and scratch directories. They start with a
  clean environment: the system's PATH directories only (whose `python3` has no sparkstate), no
  PYTHONPATH, no virtual environment, so their executors reach sparkstate only through the archive.
  `stop()` SIGKILLs everything the cluster started: the daemons, their executors and every process
  below those (store workers, PySpark's workers), and any process still running in its directories.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field

import pyspark

from sparkstate_jobs import procfs

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))
from tests.storage.s3_server import free_ports

CHECKOUT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SPARK_HOME = os.path.dirname(os.path.abspath(pyspark.__file__))
ENV_DIR = "environment"  # the archive's directory in every executor's working directory
CLEAN_PATH = "/usr/bin:/bin"


def _run(cmd: list[str], timeout: float, **kwargs) -> str:
    done = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=timeout, **kwargs)
    if done.returncode != 0:
        raise RuntimeError(f"{cmd[:4]} exited with {done.returncode}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return done.stdout


@dataclass
class ShippedEnvironment:
    archive: str          # the venv-pack archive
    venv: str             # the venv it was packed from (the driver's copy of the jar lives in it)
    settings: dict[str, str]  # `conf-docs --archive`'s block, parsed
    seconds: float        # time to build the wheel, the venv and the archive


def build_shipped_environment(work: str, executor_cores: int, executor_memory: str) -> ShippedEnvironment:
    """The wheel, a fresh venv with it, the archive, and the settings `conf-docs --archive` prints."""
    t0 = time.monotonic()
    source, dist, venv = (os.path.join(work, n) for n in ("src", "dist", "venv"))
    shutil.copytree(CHECKOUT, source, ignore=shutil.ignore_patterns(
        ".git", "*.jar", "build-id", "__pycache__", "build", "dist", "*.egg-info", ".venv*", "demo-output"))
    line = ".".join(pyspark.__version__.split(".")[:2])
    _run([sys.executable, "-m", "pip", "wheel", source, "--no-deps", "--no-build-isolation", "-q", "-w", dist],
         timeout=900, env={**os.environ, "SPARKSTATE_SPARK_LINES": line})
    (wheel,) = [os.path.join(dist, n) for n in os.listdir(dist) if n.startswith("sparkstate-")]
    # The interpreter this venv is made from has its own sparkstate in its site-packages; a venv without
    # --system-site-packages does not see it, which the tests check from inside a task.
    _run([getattr(sys, "_base_executable", sys.executable), "-m", "venv", venv], timeout=300)
    python = os.path.join(venv, "bin", "python")
    # pandas: PySpark's own workers need it for applyInPandasWithState; pyspark pinned to the driver's.
    _run([python, "-m", "pip", "install", "-q", wheel, f"pyspark=={pyspark.__version__}", "pandas<3"],
         timeout=1800)
    archive = os.path.join(work, "env.tar.gz")
    # pyspark's jars are left out: the executors' JVMs load Spark from the workers' installation, and the
    # archive's pyspark serves PySpark's Python workers only. It keeps the archive (and the copy every
    # executor unpacks) 400 MB smaller.
    venv_pack = os.path.join(os.path.dirname(sys.executable), "venv-pack")
    _run([venv_pack, "-p", venv, "-o", archive, "--compress-level", "1", "-q",
          "--exclude", "lib/python*/site-packages/pyspark/jars/*"], timeout=900)
    block = _run([os.path.join(venv, "bin", "sparkstate"), "conf-docs", "--archive", f"{archive}#{ENV_DIR}",
                  "--executor-cores", str(executor_cores), "--executor-memory", executor_memory],
                 timeout=120, env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    settings = dict(line.split(None, 1) for line in block.splitlines() if line.strip() and not line.startswith("#"))
    return ShippedEnvironment(archive, venv, {k: v.strip() for k, v in settings.items()}, time.monotonic() - t0)


@dataclass
class Daemon:
    name: str
    proc: subprocess.Popen
    work_dir: str = ""
    log: str = ""
    killed: list[int] = field(default_factory=list)


class StandaloneCluster:
    """A Master and `n_workers` Workers on 127.0.0.1, each worker with `cores` and `memory` to offer."""

    def __init__(self, base: str, n_workers: int = 2, cores: int = 1, memory: str = "1g") -> None:
        self.base = base
        self.n_workers, self.cores, self.memory = n_workers, cores, memory
        self.port, self.ui_port = free_ports(2)
        self.url = f"spark://127.0.0.1:{self.port}"
        self.master: Daemon | None = None
        self.workers: list[Daemon] = []

    def _env(self, local_dirs: str) -> dict[str, str]:
        env = {"PATH": CLEAN_PATH, "HOME": os.environ.get("HOME", "/root"), "LANG": "C.UTF-8",
               "SPARK_HOME": SPARK_HOME, "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_LOCAL_DIRS": local_dirs,
               "SPARK_LOG_DIR": os.path.join(self.base, "logs"), "SPARK_NO_DAEMONIZE": "1"}
        if os.environ.get("JAVA_HOME"):
            env["JAVA_HOME"] = os.environ["JAVA_HOME"]
        return env

    def _spawn(self, name: str, args: list[str], local_dirs: str) -> Daemon:
        os.makedirs(local_dirs, exist_ok=True)
        log = os.path.join(self.base, f"{name}.log")
        with open(log, "ab") as out:
            proc = subprocess.Popen([os.path.join(SPARK_HOME, "bin", "spark-class"), *args], env=self._env(local_dirs),
                                    cwd=self.base, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    start_new_session=True)
        return Daemon(name, proc, log=log)

    def start(self, timeout: float = 120) -> StandaloneCluster:
        os.makedirs(self.base, exist_ok=True)
        self.master = self._spawn("master", ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                                             "--port", str(self.port), "--webui-port", str(self.ui_port)],
                                  os.path.join(self.base, "master-local"))
        for i in range(self.n_workers):
            self.start_worker(i)
        self.wait_for_workers(self.n_workers, timeout)
        return self

    def start_worker(self, i: int) -> Daemon:
        work_dir = os.path.join(self.base, f"worker{i}", "work")
        os.makedirs(work_dir, exist_ok=True)
        (ui_port,) = free_ports(1)
        worker = self._spawn(f"worker{i}", ["org.apache.spark.deploy.worker.Worker", self.url, "--host", "127.0.0.1",
                                            "--cores", str(self.cores), "--memory", self.memory,
                                            "--work-dir", work_dir, "--webui-port", str(ui_port)],
                             os.path.join(self.base, f"worker{i}", "local"))
        worker.work_dir = work_dir
        if i < len(self.workers):
            self.workers[i] = worker
        else:
            self.workers.append(worker)
        return worker

    def state(self) -> dict:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.ui_port}/json/", timeout=5) as answer:
            return json.load(answer)

    def wait_for_workers(self, n: int, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while True:
            for daemon in [self.master, *self.workers]:
                if daemon.proc.poll() is not None:
                    raise RuntimeError(f"{daemon.name} exited with {daemon.proc.returncode}; see {daemon.log}")
            try:
                if sum(1 for w in self.state()["workers"] if w["state"] == "ALIVE") >= n:
                    return
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"fewer than {n} workers registered within {timeout}s; see {self.base}/*.log")
            time.sleep(0.5)

    def executors_of(self, worker: Daemon, app_id: str) -> list[int]:
        """The executor JVMs `worker` runs for the application."""
        return [p for p in procfs.children(worker.proc.pid)
                if b"CoarseGrainedExecutorBackend" in procfs.cmdline(p) and app_id.encode() in procfs.cmdline(p)]

    def kill_worker(self, worker: Daemon, app_id: str) -> dict[str, list[int]]:
        """SIGKILL a Worker JVM, its executors and every process below them (store workers included), all
        at once, as a machine lost would; returns what was killed."""
        executors = self.executors_of(worker, app_id)
        below = [p for e in executors for p in procfs.descendants(e)]
        killed = {"worker": [worker.proc.pid], "executors": executors,
                  "store_workers": [p for p in below if procfs.is_store_worker(p)], "others": below}
        for pid in [worker.proc.pid, *executors, *below]:
            _kill(pid)
        worker.proc.wait(timeout=30)
        return killed

    def stop(self) -> None:
        daemons = [d for d in [self.master, *self.workers] if d is not None]
        doomed = {p for d in daemons for p in [d.proc.pid, *procfs.descendants(d.proc.pid)]}
        doomed |= set(self.processes_in_base())
        for pid in doomed:
            _kill(pid)
        for d in daemons:
            try:
                os.killpg(d.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            try:
                d.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                pass
        for pid in self.processes_in_base():  # started while the sweep above ran
            _kill(pid)

    def processes_in_base(self) -> list[int]:
        """Processes whose working directory is inside the cluster's directory (executors, their workers)."""
        out = []
        for pid in procfs.pids():
            try:
                cwd = os.readlink(f"/proc/{pid}/cwd")
            except OSError:
                continue
            if pid != os.getpid() and (cwd == self.base or cwd.startswith(self.base + os.sep)):
                out.append(pid)
        return out


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
