package io.sparkstate;

import java.util.List;
import java.util.function.Supplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One daemon thread per JVM that reads every worker process's heartbeat file a few times a second and
 * kills a worker that is hung or stuck ({@link Liveness}); each round also lets the pool stop the workers
 * of a stopped SparkContext. Killing is all it does: the calls blocked on
 * that worker (a py4j read, a shared-memory wait, a socket read) then see the process gone and fail their
 * task with the reason, and Spark's retry runs on a fresh worker.
 */
final class WorkerWatchdog {
  private static final Logger LOG = LoggerFactory.getLogger(WorkerWatchdog.class);
  static final long PERIOD_MS = 200;
  /** A gap this much longer than the period between two rounds means this thread itself was paused. */
  private static final long PAUSE_NANOS = 1_000_000_000L;

  private final Supplier<List<Worker>> workers;
  private final Runnable housekeeping;
  private Thread thread; // guarded by this

  /** {@code housekeeping} runs first in every round (the pool stops the workers of a stopped context). */
  WorkerWatchdog(Supplier<List<Worker>> workers, Runnable housekeeping) {
    this.workers = workers;
    this.housekeeping = housekeeping;
  }

  synchronized void ensureRunning() {
    if (thread != null) {
      return;
    }
    thread = new Thread(this::run, "sparkstate-watchdog");
    thread.setDaemon(true);
    thread.start();
  }

  private void run() {
    long last = System.nanoTime();
    while (true) {
      try {
        Thread.sleep(PERIOD_MS);
      } catch (InterruptedException e) {
        return;
      }
      long now = System.nanoTime();
      long gap = now - last;
      last = now;
      try {
        round(now, gap > PAUSE_NANOS ? gap - PERIOD_MS * 1_000_000L : 0);
      } catch (RuntimeException e) {
        LOG.warn("sparkstate watchdog: a check failed", e);
      }
    }
  }

  private void round(long now, long pauseNanos) {
    housekeeping.run();
    for (Worker w : workers.get()) {
      if (!(w instanceof WorkerProcess) || !w.isAlive()) {
        continue;
      }
      WorkerProcess process = (WorkerProcess) w;
      if (pauseNanos > 0) {
        process.liveness().forgive(pauseNanos);
      }
      String reason = process.checkLiveness(now);
      if (reason != null) {
        process.declareHung(reason, now);
      }
    }
  }
}
