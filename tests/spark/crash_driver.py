"""A small stateful job run as its own driver process by test_driver_crash.py (which SIGKILLs it).

    python crash_driver.py <workdir> <pythonExec> <backend> [<backend> ...]

One query per backend, running at the same time: each reads `<workdir>/in` (one JSON-lines file per
trigger), counts and sums `v` per key, and writes each micro-batch's rows to
`<workdir>/<backend>/out/batch-<id>.json` (a re-run batch overwrites its file), until the input is
drained (availableNow); its checkpoint is `<workdir>/<backend>/ckpt`. Exits 0 when all are done.
"""
import json
import os
import sys

import sparkstate
from pyspark.sql import SparkSession
from pyspark.sql import functions as F


def main() -> None:
    workdir, python, backends = sys.argv[1], sys.argv[2], sys.argv[3:]
    builder = (SparkSession.builder.master("local[2]").appName("sparkstate-crash-driver")
               .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "3")
               .config("spark.sql.streaming.stateStore.maintenanceInterval", "2s"))
    spark = sparkstate.configure(builder, pythonExec=python).getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    queries = [start(spark, workdir, backend) for backend in backends]
    for query in queries:
        query.awaitTermination()
    spark.stop()


def start(spark, workdir: str, backend: str):
    out = os.path.join(workdir, backend, "out")
    os.makedirs(out, exist_ok=True)

    def write_batch(df, batch_id):
        rows = [r.asDict() for r in df.collect()]
        tmp = os.path.join(out, f".batch-{batch_id}.tmp")
        with open(tmp, "w") as f:
            json.dump(rows, f)
        os.replace(tmp, os.path.join(out, f"batch-{batch_id}.json"))

    spark.conf.set("spark.sql.streaming.stateStore.sparkstate.backend", backend)  # read when the query starts
    counts = (spark.readStream.schema("k string, v long").option("maxFilesPerTrigger", 1)
              .json(os.path.join(workdir, "in"))
              .groupBy("k").agg(F.count("*").alias("n"), F.sum("v").alias("total")))
    return (counts.writeStream.outputMode("update").foreachBatch(write_batch).queryName(backend)
            .option("checkpointLocation", os.path.join(workdir, backend, "ckpt")).trigger(availableNow=True).start())


if __name__ == "__main__":
    main()
