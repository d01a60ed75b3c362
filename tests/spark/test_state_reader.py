"""The state data source (`spark.read.format("statestore")`) over a checkpoint written by the
provider under test must return exactly the state the operator holds, per version and partition.
"""
from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from datagen import EVENT_SCHEMA, random_events
from spark_harness import BatchCollector, InputDir, assert_same_rows, committed_batches, run_available_now

N_PARTITIONS = 3  # spark.sql.shuffle.partitions in conftest


def _stats(df: DataFrame) -> DataFrame:
    return df.groupBy("k").agg(F.count("*").alias("n"), F.max("v").alias("hi"))


def _state_rows(spark, checkpoint: str, **options) -> list[tuple]:
    """(k, <agg buffer fields...>, partition_id) for every key in the aggregation's state store."""
    reader = spark.read.format("statestore")
    for key, value in options.items():
        reader = reader.option(key, value)
    df = reader.load(checkpoint)
    assert set(df.columns) >= {"key", "value", "partition_id"}, df.columns
    return [(r["key"]["k"], *r["value"], r["partition_id"]) for r in df.collect()]


def _expected(batch: DataFrame) -> list:
    # count -> its buffer holds the count; max -> its buffer holds the max. The key's partition is
    # pmod(murmur3(k, seed 42), n), which SQL's hash() computes.
    return (_stats(batch).withColumn("partition", F.expr(f"pmod(hash(k), {N_PARTITIONS})"))
            .select("k", "n", "hi", "partition").collect())


def test_statestore_reader_returns_aggregation_state(spark, tmp_path):
    source = InputDir(spark, str(tmp_path / "events"), EVENT_SCHEMA)
    checkpoint = str(tmp_path / "checkpoint")
    files = random_events(seed=21, n_files=5, per_file=40, n_keys=15)
    sink = BatchCollector()

    def run():
        run_available_now(sink.attach(_stats(source.stream()).writeStream.outputMode("update")), checkpoint)

    source.add_all(files[:2])
    run()
    first_last_batch = committed_batches(checkpoint)[-1]
    source.add_all(files[2:])
    run()
    last_batch = committed_batches(checkpoint)[-1]
    assert last_batch > first_last_batch

    # Latest version: all input.
    assert_same_rows(_state_rows(spark, checkpoint), _expected(source.batch()), min_rows=15)
    # Explicit latest batch id gives the same.
    assert_same_rows(_state_rows(spark, checkpoint, batchId=last_batch), _expected(source.batch()))
    # An older version (end of the first run) still holds the first run's state only.
    first_files = [f"{source.path}/part-{i:05d}.json" for i in range(2)]
    first_batch_df = spark.read.schema(EVENT_SCHEMA).json(first_files)
    assert_same_rows(_state_rows(spark, checkpoint, batchId=first_last_batch), _expected(first_batch_df),
                     min_rows=10)
    # The state matches what the query emitted.
    emitted = [(r["k"], r["n"], r["hi"]) for r in sink.updated(["k"])]
    assert_same_rows([row[:3] for row in _state_rows(spark, checkpoint)], emitted)


def test_statestore_reader_returns_dedup_state(spark, tmp_path):
    source = InputDir(spark, str(tmp_path / "events"), EVENT_SCHEMA)
    checkpoint, output = str(tmp_path / "checkpoint"), str(tmp_path / "output")
    files = random_events(seed=22, n_files=4, per_file=40, n_keys=5, v_range=10)

    def run():
        run_available_now(source.stream().dropDuplicates(["k", "v"]).writeStream.format("parquet")
                          .option("path", output), checkpoint)

    source.add_all(files[:2])
    run()
    source.add_all(files[2:])
    run()
    state = spark.read.format("statestore").load(checkpoint)
    got = [(r["key"]["k"], r["key"]["v"], r["partition_id"]) for r in state.collect()]
    expected = (source.batch().select("k", "v").distinct()
                .withColumn("p", F.expr(f"pmod(hash(k, v), {N_PARTITIONS})")).collect())
    assert_same_rows(got, expected, min_rows=30)


def test_state_metadata_source(spark, tmp_path):
    source = InputDir(spark, str(tmp_path / "events"), EVENT_SCHEMA)
    checkpoint = str(tmp_path / "checkpoint")
    source.add_all(random_events(seed=23, n_files=2, per_file=20, n_keys=4))
    run_available_now(_stats(source.stream()).writeStream.outputMode("complete").format("noop"), checkpoint)
    meta = spark.read.format("state-metadata").load(checkpoint).collect()
    assert len(meta) == 1
    assert meta[0]["numPartitions"] == N_PARTITIONS
    assert meta[0]["maxBatchId"] == committed_batches(checkpoint)[-1]
