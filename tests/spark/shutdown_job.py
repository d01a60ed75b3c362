"""A small stateful availableNow job run as its own driver by test_shutdown.py.

    python shutdown_job.py <workdir> stop     # SparkSession.stop(), then report the workers left
    spark-submit ... shutdown_job.py <workdir> submit   # end without stop(): the JVM must exit by itself

Reads `<workdir>/in` (JSON lines), counts per key into `<workdir>/out.json`. With `stop`, after
`spark.stop()` it waits up to 15 s for the store workers started by this driver's JVM to exit and prints
`workers left: [...]`; the process then stays alive, as a notebook would.
"""
import json
import os
import sys
import time

from processes import live_pids
from pyspark.sql import SparkSession
from pyspark.sql import functions as F


def worker_pids(job_tag: str | None = None) -> list[int]:
    """Live sparkstate workers whose environment has SPARKSTATE_TEST_JOB=<job_tag> (default: this job's)."""
    tag = job_tag or os.environ["SPARKSTATE_TEST_JOB"]
    return live_pids(f"SPARKSTATE_TEST_JOB={tag}\0", "sparkstate.worker")


def main() -> None:
    workdir, mode = sys.argv[1], sys.argv[2]
    builder = (SparkSession.builder.master("local[2]").appName(f"sparkstate-shutdown-{mode}")
               .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2"))
    if mode == "stop":
        import sparkstate

        builder = sparkstate.configure(builder)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    counts = (spark.readStream.schema("k string, v long").json(os.path.join(workdir, "in"))
              .groupBy("k").agg(F.count("*").alias("n")))
    query = (counts.writeStream.outputMode("complete").format("memory").queryName("counts")
             .option("checkpointLocation", os.path.join(workdir, f"ckpt-{mode}"))
             .trigger(availableNow=True).start())
    query.awaitTermination()
    rows = {r["k"]: r["n"] for r in spark.sql("select * from counts").collect()}
    with open(os.path.join(workdir, f"out-{mode}.json"), "w") as f:
        json.dump(rows, f)
    print("workers during the job:", worker_pids(), flush=True)
    if mode == "stop":
        spark.stop()
        deadline = time.monotonic() + 15
        while worker_pids() and time.monotonic() < deadline:
            time.sleep(0.2)
        print("workers left:", worker_pids(), flush=True)


if __name__ == "__main__":
    main()
