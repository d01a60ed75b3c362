"""A small stateful job run as its own driver process by test_driver_crash.py (which SIGKILLs it).

    python crash_driver.py <workdir> <backend> <pythonExec>

Reads `<workdir>/in` (one JSON-lines file per trigger), counts and sums `v` per key, and writes each
micro-batch's rows to `<workdir>/out/batch-<id>.json` (a re-run batch overwrites its file), until the
input is drained (availableNow). Exits 0 when done.
"""
import json
import os
import sys

import sparkstate
from pyspark.sql import SparkSession
from pyspark.sql import functions as F


def main() -> None:
    workdir, backend, python = sys.argv[1:4]
    builder = (SparkSession.builder.master("local[2]").appName("sparkstate-crash-driver")
               .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "3")
               .config("spark.sql.streaming.stateStore.maintenanceInterval", "2s"))
    spark = sparkstate.configure(builder, backend=backend, pythonExec=python).getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    out = os.path.join(workdir, "out")
    os.makedirs(out, exist_ok=True)

    def write_batch(df, batch_id):
        rows = [r.asDict() for r in df.collect()]
        tmp = os.path.join(out, f".batch-{batch_id}.tmp")
        with open(tmp, "w") as f:
            json.dump(rows, f)
        os.replace(tmp, os.path.join(out, f"batch-{batch_id}.json"))

    counts = (spark.readStream.schema("k string, v long").option("maxFilesPerTrigger", 1)
              .json(os.path.join(workdir, "in"))
              .groupBy("k").agg(F.count("*").alias("n"), F.sum("v").alias("total")))
    query = (counts.writeStream.outputMode("update").foreachBatch(write_batch)
             .option("checkpointLocation", os.path.join(workdir, "ckpt")).trigger(availableNow=True).start())
    query.awaitTermination()
    spark.stop()


if __name__ == "__main__":
    main()
