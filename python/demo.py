"""sparkstate demo: a stateful clickstream pipeline on local Spark, with our state store provider.

    python python/demo.py                       # sparkstate provider, ./demo-output
    python python/demo.py --provider rocksdb    # the same pipeline on Spark's RocksDB provider
    python -m sparkstate_jobs.demo --help       # when installed

What it does, each run:
1. appends the next chunk of synthetic clickstream to `<workdir>/input` (one JSON file per micro-batch,
   with re-delivered duplicates and late events; see clickstream.py);
2. runs a streaming query over the new files, one file per micro-batch, then stops:

       events ──watermark(ts, 1 min)──► dropDuplicatesWithinWatermark(event_id)      (state: seen ids)
              ──► groupBy(user, session_window(ts, 30 s)).agg(clicks, checkouts)     (state: open sessions)
              ──► append closed sessions to <workdir>/output/sessions (parquet)

   (`--view pages` swaps the session window for per-minute page counts);
3. prints one line per micro-batch from Spark's progress events (input rows, duration, state rows and
   memory, commit time, and any `sparkstate*` custom metrics of our provider), then a summary.

Run it again with the same `--workdir` and the query resumes from its checkpoint: the state (seen event
ids, open sessions) carries over, and the next chunk of input continues where the last one ended.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time


if not __package__:  # run as a script from a checkout
    from _checkout import ensure_sparkstate_jobs

    ensure_sparkstate_jobs()

from sparkstate.checkpoint.file_manager import CheckpointFileManager  # noqa: E402
from sparkstate.checkpoint.location import discover_stores  # noqa: E402
from sparkstate.config import PREFIX, Settings  # noqa: E402
from sparkstate.checkpoint.spark_logs import SparkLogs  # noqa: E402
from sparkstate.errors import SparkstateError  # noqa: E402
from sparkstate.migration.plan import pinned_provider as pinned_provider_of  # noqa: E402
from sparkstate.migration.plan import provider_name  # noqa: E402
from sparkstate.storage.local import LocalFileIO  # noqa: E402
from sparkstate_jobs import clickstream  # noqa: E402
from sparkstate_jobs.progress import BatchStats, human_bytes, median  # noqa: E402
from sparkstate_jobs.session import (PROVIDER_CLASS_KEY, PROVIDERS, ProviderUnavailable, new_session,  # noqa: E402
                                     parse_conf_pairs, read_conf_file)

WATERMARK_DELAY = "1 minute"
SESSION_GAP = "30 seconds"
PAGE_WINDOW = "1 minute"
RUN_FILE = "demo-run.json"   # what the checkpoint was created with; both are pinned by Spark
# Two cores, and a failed task tried up to 4 times as on a cluster (spark.task.maxFailures); plain local[2]
# ends the query at the first failed task, e.g. one whose state worker hung and was killed.
MASTER = "local[2,4]"
BACKENDS = ("rocksdb", "heap")
VIEWS = ("sessions", "pages")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="sparkstate demo", description=__doc__.split("\n\n", 1)[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--workdir", default="./demo-output",
                   help="input, checkpoint and output live here; reuse it to resume (default: %(default)s)")
    p.add_argument("--batches", type=int, default=8,
                   help="micro-batches (input files) to add this run (default: %(default)s)")
    p.add_argument("--rows-per-batch", type=int, default=5000,
                   help="events per micro-batch, at least 100 (default: %(default)s)")
    p.add_argument("--provider", choices=list(PROVIDERS), default="sparkstate",
                   help="state store provider (default: %(default)s); fixed once the checkpoint exists")
    p.add_argument("--backend", choices=BACKENDS, default=None,
                   help="sparkstate backend (default: the one the checkpoint's state was written with, else "
                        "the backend setting's default, rocksdb); fixed once the checkpoint exists")
    p.add_argument("--view", choices=VIEWS, default=None,
                   help="sessions: per-user session windows; pages: per-minute page counts (default: the one "
                        f"the workdir's checkpoint was made with, else {VIEWS[0]})")
    p.add_argument("--shuffle-partitions", type=int, default=4,
                   help="state store partitions (default: %(default)s)")
    p.add_argument("--conf", action="append", metavar="KEY=VALUE", help="extra Spark conf (repeatable)")
    p.add_argument("--conf-file", action="append", metavar="PATH",
                   help="spark-defaults style file of extra conf, e.g. conf/presets/low-latency.conf")
    args = p.parse_args(argv)
    if args.batches < 0 or args.rows_per_batch < 100 or args.shuffle_partitions < 1:
        p.error("--batches must be >= 0, --rows-per-batch >= 100 and --shuffle-partitions >= 1")
    if args.backend and args.provider != "sparkstate":
        p.error(f"--backend applies to --provider sparkstate only (got --provider {args.provider})")
    return args


def pinned_provider(checkpoint: str) -> str | None:
    """The provider class the checkpoint's newest offset log entry pins, or None for a new checkpoint: Spark
    restarts with it whatever the session says, and `sparkstate migrate` changes it."""
    logs = SparkLogs(LocalFileIO(), checkpoint)
    batches = logs.offset_batches()
    return pinned_provider_of(logs.read_offset(batches[-1])) if batches else None


def check_run_file(workdir: str, args: argparse.Namespace) -> None:
    """Take the view the workdir's checkpoint was made with when none is given, and refuse to resume it with
    another view, or another provider than the one it pins: Spark would silently keep the old one."""
    path = os.path.join(workdir, RUN_FILE)
    if not os.path.exists(path):
        args.view = args.view or VIEWS[0]
        return
    with open(path, encoding="utf-8") as fh:
        recorded = json.load(fh)
    args.view = args.view or recorded.get("view", VIEWS[0])
    args.recorded_backend = recorded.get("backend")
    if pinned_provider(os.path.join(workdir, "checkpoint")) is not None:
        recorded["provider"] = args.provider  # the checkpoint names its provider; it is reported at the start
    for key in ("provider", "view"):
        if recorded.get(key) != getattr(args, key):
            raise SystemExit(
                f"{workdir} holds a checkpoint made with --{key} {recorded.get(key)}; Spark pins the "
                f"state layout in the checkpoint, so use --{key} {recorded.get(key)} or a new --workdir.")


def checkpoint_backend(checkpoint: str) -> str | None:
    """The sparkstate backend that wrote the checkpoint's newest state version (its manifest says; older
    versions may be another backend's, from before a `sparkstate migrate` through another provider), or
    None: a new checkpoint, another provider's, or state kept elsewhere (`stateLocation`)."""
    root, fio = os.path.join(checkpoint, "state"), LocalFileIO()
    if not os.path.isdir(root):
        return None
    newest: tuple[int, CheckpointFileManager] | None = None
    for store in discover_stores(root, fio):
        files = CheckpointFileManager(os.path.join(root, store), fio)
        version = files.latest_version()
        if version is not None and (newest is None or version > newest[0]):
            newest = (version, files)
    return newest[1].read_manifest(newest[0]).backend if newest else None


def resolve_backend(checkpoint: str, args: argparse.Namespace, conf: dict[str, str]) -> None:
    """Resume on the backend the checkpoint's state was written with (`--backend` is fixed once the
    checkpoint exists): a query on another backend would fail at its first commit."""
    pinned = pinned_provider(checkpoint)
    ours = args.provider == "sparkstate" if pinned is None else provider_name(pinned) == "sparkstate"
    written = checkpoint_backend(checkpoint) if ours else None
    if written is None and ours and SparkLogs(LocalFileIO(), checkpoint).commit_batches():
        written = getattr(args, "recorded_backend", None)  # state kept elsewhere (stateLocation): the run file's
    asked = args.backend or conf.get(PREFIX + "backend")
    if written is None:
        return
    if asked and asked != written:
        raise SystemExit(f"{os.path.dirname(checkpoint)} holds state written by the {written} backend; a checkpoint "
                         f"keeps its backend, so use --backend {written} or a new --workdir.")
    if args.backend is None and asked is None:
        print(f"backend: {written}, which the checkpoint's state was written with")
    args.backend = written


def record_run_file(workdir: str, args: argparse.Namespace, conf: dict[str, str]) -> None:
    """What the checkpoint is made with; the backend too, for a resume whose state lies where the demo does
    not read it (`stateLocation`)."""
    path = os.path.join(workdir, RUN_FILE)
    if not os.path.exists(path):
        run = {"provider": args.provider, "view": args.view}
        if args.provider == "sparkstate":
            run["backend"] = args.backend or conf.get(PREFIX + "backend") or Settings().backend
        with open(path, "w", encoding="utf-8") as fh:
            json.dump(run, fh)


def build_query(spark, input_dir: str, view: str):
    """The pipeline: watermark → dedup by event_id → sessions per user (or page counts per minute)."""
    from pyspark.sql import functions as F  # noqa: PLC0415

    events = (spark.readStream
              .schema("event_id STRING, user STRING, page STRING, ts TIMESTAMP")
              .option("maxFilesPerTrigger", 1)          # one input file = one micro-batch
              .json(input_dir))
    unique = (events
              .withWatermark("ts", WATERMARK_DELAY)    # events older than this are late and dropped
              .dropDuplicatesWithinWatermark(["event_id"]))
    if view == "sessions":
        return (unique
                .groupBy("user", F.session_window("ts", SESSION_GAP).alias("session"))
                .agg(F.count("*").alias("clicks"),
                     F.sum(F.when(F.col("page") == "/checkout", 1).otherwise(0)).alias("checkouts"))
                .select("user", F.col("session.start").alias("start"), F.col("session.end").alias("end"),
                        "clicks", "checkouts"))
    return (unique
            .groupBy(F.window("ts", PAGE_WINDOW).alias("minute"), "page")
            .count()
            .select(F.col("minute.start").alias("minute"), "page", "count"))


class ProgressPrinter:
    """Prints one line per micro-batch as Spark reports it, and keeps the stats for the summary."""

    LEGEND = ("state rows / state mem: rows in the state stores and the memory they report using (Spark's "
              "memoryUsedBytes summed over operators; RocksDB: memtables, table readers and a share of the "
              "worker's block cache, plus the SST files with rocksdb.mmapReads; heap: the live state and kept "
              "versions), not the worker processes' RSS; commit ms: summed over tasks; late: rows dropped by "
              "the watermark")

    HEADER = (f"{'batch':>5} {'input':>7} {'ms':>6} {'state rows':>10} {'state mem':>10} "
              f"{'commit ms':>9} {'late':>5}  watermark")

    def __init__(self) -> None:
        self.batches: list[BatchStats] = []

    def on_progress(self, progress) -> None:
        b = BatchStats.from_progress(progress)
        self.batches.append(b)
        late = sum(op.rows_dropped_by_watermark for op in b.operators)
        print(f"{b.batch_id:>5} {b.input_rows:>7} {b.duration_ms:>6} {b.state_rows:>10} "
              f"{human_bytes(b.state_memory_bytes):>10} {b.commit_ms:>9} {late:>5}  {b.watermark or '-'}",
              flush=True)
        for op in b.operators:
            ours = op.ours
            if ours:  # our provider's custom metrics; zeros left out to keep the line short
                shown = " ".join(f"{k[len('sparkstate'):]}={v}" for k, v in sorted(ours.items()) if v)
                print(f"{'':>6}{op.name} sparkstate: {shown or 'all 0'}", flush=True)


def attach_listener(spark, printer: ProgressPrinter) -> object:
    from pyspark.sql.streaming import StreamingQueryListener  # noqa: PLC0415

    class Listener(StreamingQueryListener):
        def onQueryStarted(self, event):  # noqa: N802 - Spark's names
            pass

        def onQueryProgress(self, event):  # noqa: N802
            printer.on_progress(event.progress)

        def onQueryIdle(self, event):  # noqa: N802
            pass

        def onQueryTerminated(self, event):  # noqa: N802
            pass

    listener = Listener()
    spark.streams.addListener(listener)
    return listener


def summarize(spark, args, chunk, printer: ProgressPrinter, output_dir: str, elapsed: float) -> None:
    from pyspark.sql import functions as F  # noqa: PLC0415

    batches = printer.batches
    data_batches = [b for b in batches if b.input_rows > 0]
    print()
    print(f"== summary ({args.provider}, view={args.view}) ==")
    print(f"input this run     : {chunk.events} events in {len(chunk.files)} files "
          f"({chunk.duplicates} re-delivered, {chunk.late} late)")
    print(f"micro-batches      : {len(batches)} ({len(data_batches)} with data), wall time {elapsed:.1f} s")
    if data_batches:
        # The first batch of every run pays for JVM warm-up and loading the state; leave it out.
        steady = data_batches[1:] or data_batches
        print(f"batch duration     : median {median([b.duration_ms for b in steady]):.0f} ms, first batch "
              f"{data_batches[0].duration_ms} ms; commit median {median([b.commit_ms for b in steady]):.0f} ms "
              f"(summed over tasks)")
    if batches:
        last = batches[-1]
        late = sum(op.rows_dropped_by_watermark for b in batches for op in b.operators)
        for op in last.operators:
            print(f"state {op.name:<13}: {op.rows_total} rows, {human_bytes(op.memory_bytes)}")
        print(f"late rows dropped  : {late}")
        if not any(op.ours for op in last.operators):
            print("sparkstate metrics : (none reported: not our provider)")
        for op in last.operators:
            if op.ours:
                shown = " ".join(f"{k[len('sparkstate'):]}={v}" for k, v in sorted(op.ours.items()))
                print(f"sparkstate {op.name:<8}: {shown}")
    if os.path.isdir(output_dir) and any(not n.startswith(("_", ".")) for n in os.listdir(output_dir)):
        out = spark.read.parquet(output_dir)
        print(f"output rows (total): {out.count()} in {output_dir}")
        if args.view == "sessions":
            print("top users by closed sessions:")
            (out.groupBy("user")
                .agg(F.count("*").alias("sessions"), F.sum("clicks").alias("clicks"),
                     F.sum("checkouts").alias("checkouts"))
                .orderBy(F.desc("sessions"), "user").show(5, truncate=False))
        else:
            print("busiest page-minutes:")
            out.orderBy(F.desc("count"), "minute", "page").show(5, truncate=False)
    else:
        print("output             : nothing emitted yet (windows close once the watermark passes them)")


def first_lines(message: str, limit: int = 3) -> str:
    """The head of an error, before its first stack frame: Spark's messages go on with JVM stack traces
    and the query's plan."""
    lines = []
    for line in message.splitlines():
        if line.lstrip().startswith("at ") or len(lines) == limit:
            break
        if line.strip():
            lines.append(line)
    return "\n".join(lines)


def add_offline_batches_to_the_sink_log(checkpoint: str, output_dir: str, compact_interval: int) -> None:
    """After `sparkstate rescale` or `sparkstate migrate` on `<workdir>/checkpoint`, the parquet sink's own
    log needs the command's batch (see sparkstate.rewrite.file_sink); the demo knows its output path, so
    it adds it."""
    try:
        from sparkstate.rescaling import repair_file_sink
    except ImportError:  # a Spark provider only, without sparkstate installed: no sparkstate command ran
        return
    added = repair_file_sink(checkpoint, output_dir, compact_interval)
    if added:
        print(f"file sink log: recorded rescale/migration batch(es) {added} in {output_dir}/_spark_metadata")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    workdir = os.path.abspath(args.workdir)
    input_dir = os.path.join(workdir, "input")
    checkpoint = os.path.join(workdir, "checkpoint")
    check_run_file(workdir, args)
    output_dir = os.path.join(workdir, "output", args.view)

    try:
        conf = {}
        for path in args.conf_file or []:
            conf.update(read_conf_file(path))
        conf.update(parse_conf_pairs(args.conf))
        Settings.parse({k: v for k, v in conf.items() if k.startswith(PREFIX)})  # fail here, not in a task
        resolve_backend(checkpoint, args, conf)
        spark = new_session("sparkstate-demo", args.provider, master=MASTER,
                            shuffle_partitions=args.shuffle_partitions, backend=args.backend, conf=conf)
    except (ProviderUnavailable, SparkstateError, ValueError, OSError) as exc:
        print(f"sparkstate demo: {exc}", file=sys.stderr)
        return 2
    os.makedirs(workdir, exist_ok=True)
    record_run_file(workdir, args, conf)

    chunk = clickstream.generate(workdir, input_dir, args.batches, args.rows_per_batch)
    resumed = os.path.isdir(os.path.join(checkpoint, "commits"))
    print(f"workdir {workdir}: {'resuming from checkpoint' if resumed else 'new checkpoint'}; "
          f"added {len(chunk.files)} input files x {args.rows_per_batch} events")
    configured = spark.conf.get(PROVIDER_CLASS_KEY)
    pinned = pinned_provider(checkpoint)
    if pinned and pinned != configured:
        print(f"provider: {pinned}, which the checkpoint pins (set when it was created, or by sparkstate "
              f"migrate); --provider {args.provider} applies to new checkpoints only")
        args.provider = provider_name(pinned)  # what this run's summary is of
    else:
        print(f"provider: {configured}")

    if resumed and os.path.isdir(os.path.join(output_dir, "_spark_metadata")):
        interval = int(spark.conf.get("spark.sql.streaming.fileSink.log.compactInterval", "10"))
        add_offline_batches_to_the_sink_log(checkpoint, output_dir, interval)

    from pyspark.errors import StreamingQueryException  # noqa: PLC0415 - keep `--help` fast

    printer = ProgressPrinter()
    attach_listener(spark, printer)
    print(ProgressPrinter.LEGEND)
    print(ProgressPrinter.HEADER, flush=True)
    started = time.monotonic()
    try:
        query = (build_query(spark, input_dir, args.view).writeStream
                 .queryName("sparkstate_demo")
                 .format("parquet")
                 .outputMode("append")
                 .option("path", output_dir)
                 .option("checkpointLocation", checkpoint)
                 .trigger(availableNow=True)            # process every file not yet seen, then stop
                 .start())
        try:
            query.awaitTermination()
        except StreamingQueryException as exc:  # say why in a few lines, not a Py4J trace
            print(f"sparkstate demo: the query failed: {first_lines(str(exc))}\n"
                  f"Every batch it committed is in {checkpoint}: run the same command again to resume. If it "
                  f"fails the same way, `sparkstate verify --checkpoint {checkpoint}` checks the state and says "
                  "how to roll back.", file=sys.stderr)
            return 1
        # Progress events are delivered asynchronously; give the last ones a moment to arrive.
        deadline = time.monotonic() + 5
        while len(printer.batches) < len(query.recentProgress) and time.monotonic() < deadline:
            time.sleep(0.1)
        summarize(spark, args, chunk, printer, output_dir, time.monotonic() - started)
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
