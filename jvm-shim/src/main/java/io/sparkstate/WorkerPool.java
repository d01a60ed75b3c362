package io.sparkstate;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Predicate;
import java.util.function.ToIntFunction;
import org.apache.spark.TaskContext;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The JVM-wide set of Python workers. A task leases one worker for its whole life (every store the task
 * opens uses it), preferring the worker that already holds the task's first store (or, embedded, any
 * worker that reaches it), then an idle worker holding no stores, then a new one while the pool is below
 * {@code maxWorkers}, then the idle worker holding the fewest stores, and a new one if none is idle (a
 * task never waits for a worker). Taking a worker that holds other partitions' stores would make their
 * next tasks move them (a restore from the checkpoint), so the pool grows past the number of running
 * tasks, up to {@code maxWorkers}, to keep each store on its worker.
 * Outside a task, each store takes its own lease and returns it when it commits, aborts or is released.
 */
final class WorkerPool {
  private static final Logger LOG = LoggerFactory.getLogger(WorkerPool.class);
  private static final WorkerPool INSTANCE = new WorkerPool();

  private final List<Worker> workers = new ArrayList<>(); // guarded by this
  private final Set<Worker> busy = new HashSet<>(); // guarded by this
  private final Map<Worker, Integer> storesHeld = new HashMap<>(); // guarded by this: open stores per worker
  private final ConcurrentHashMap<Long, WorkerLease> taskLeases = new ConcurrentHashMap<>();
  private final AtomicLong nextId = new AtomicLong();
  private boolean shutdownHookAdded; // guarded by this
  private volatile boolean shuttingDown;
  private final WorkerWatchdog watchdog = new WorkerWatchdog(this::snapshot, this::stopWorkersOfStoppedContexts);

  static WorkerPool get() {
    return INSTANCE;
  }

  /**
   * The lease to use for a store: the current task's lease (taken now if this is the task's first store),
   * or, outside a task, a fresh lease owned by the store.
   */
  WorkerLease leaseFor(ShimSettings settings, Worker preferred) {
    TaskContext task = TaskContext.get();
    if (task == null) {
      return new WorkerLease(this, acquire(settings, preferred), false);
    }
    long attempt = task.taskAttemptId();
    WorkerLease existing = taskLeases.get(attempt);
    if (existing != null) {
      if (!existing.worker().isAlive()) {
        throw existing.worker().failure("serve task attempt " + attempt, null);
      }
      return existing;
    }
    WorkerLease lease = new WorkerLease(this, acquire(settings, preferred), true);
    taskLeases.put(attempt, lease);
    task.addTaskCompletionListener(ctx -> {
      taskLeases.remove(attempt);
      lease.release();
    });
    return lease;
  }

  private Worker acquire(ShimSettings settings, Worker preferred) {
    synchronized (this) {
      workers.removeIf(w -> {
        boolean gone = !w.isAlive() && !busy.contains(w);
        if (gone) {
          w.kill(); // stops its gateway and removes its private directory
          storesHeld.remove(w);
        }
        return gone;
      });
      List<Worker> idle = new ArrayList<>();
      for (Worker w : workers) {
        if (isIdleMatch(w, settings)) {
          idle.add(w);
        }
      }
      long matching = workers.stream().filter(w -> w.isAlive() && matches(w, settings)).count();
      Worker chosen = choose(preferred != null && idle.contains(preferred) ? preferred : null, idle,
          Worker::sharesStores, this::held, matching, settings.maxWorkers);
      if (chosen != null) {
        busy.add(chosen);
        return chosen;
      }
    }
    // Spawn outside the lock: a start takes a second or more and other tasks may find idle workers meanwhile.
    Worker started = Worker.start("w" + nextId.incrementAndGet(), settings);
    synchronized (this) {
      workers.add(started);
      busy.add(started);
      watchdog.ensureRunning();
      if (!shutdownHookAdded) {
        shutdownHookAdded = true;
        Runtime.getRuntime().addShutdownHook(new Thread(this::killAll, "sparkstate-worker-shutdown"));
      }
      LOG.info("sparkstate pool: started {}, {} worker(s) in this JVM", started, workers.size());
    }
    return started;
  }

  /**
   * Which idle worker a task takes (the class comment's order), or null to start a new one: the
   * preferred worker (it holds the task's first store); any worker that shares its stores (embedded);
   * an idle worker holding no stores; a new worker while fewer than {@code maxWorkers} match; the idle
   * worker holding the fewest stores; a new one when none is idle. Pure, so it is tested alone.
   */
  static <W> W choose(W preferredIdle, List<W> idle, Predicate<W> sharesStores, ToIntFunction<W> held,
      long matching, int maxWorkers) {
    if (preferredIdle != null) {
      return preferredIdle;
    }
    W fewest = null;
    for (W w : idle) {
      if (sharesStores.test(w)) {
        return w; // nothing moves: embedded workers reach each other's stores
      }
      if (fewest == null || held.applyAsInt(w) < held.applyAsInt(fewest)) {
        fewest = w;
      }
    }
    // maxWorkers bounds growth for placement only: a task that finds no idle worker always gets a new one.
    boolean growing = matching < maxWorkers;
    return fewest != null && (held.applyAsInt(fewest) == 0 || !growing) ? fewest : null;
  }

  private boolean isIdleMatch(Worker w, ShimSettings settings) {
    return w.isAlive() && !busy.contains(w) && matches(w, settings);
  }

  private static boolean matches(Worker w, ShimSettings settings) {
    return w.pythonExec.equals(settings.pythonExec) && w.transport.equals(settings.transport);
  }

  private int held(Worker w) {
    return storesHeld.getOrDefault(w, 0);
  }

  /** A store was opened on {@code worker} (placement bookkeeping; see the class comment). */
  synchronized void storeOpened(Worker worker) {
    storesHeld.merge(worker, 1, Integer::sum);
  }

  /** A store left {@code worker} (released to move elsewhere, or closed). */
  synchronized void storeLeft(Worker worker) {
    storesHeld.computeIfPresent(worker, (w, n) -> n > 1 ? n - 1 : null);
  }

  synchronized void giveBack(Worker worker) {
    busy.remove(worker);
    if (!worker.isAlive()) {
      workers.remove(worker);
      storesHeld.remove(worker);
      worker.kill(); // stops its gateway and removes its private directory
    }
  }

  /**
   * Stops the worker processes started under a SparkEnv that has since stopped: `SparkSession.stop()` in a
   * driver that lives on (a notebook, a PySpark script that goes on) ends the application, and its stores
   * go with it. Called by the watchdog every round. Embedded workers stay: one JVM embeds one interpreter.
   */
  void stopWorkersOfStoppedContexts() {
    List<Worker> stopped = new ArrayList<>();
    synchronized (this) {
      for (Worker w : workers) {
        if (w.sparkEnv != null && w.sparkEnv.isStopped() && w instanceof WorkerProcess) {
          stopped.add(w);
        }
      }
      for (Worker w : stopped) {
        workers.remove(w);
        busy.remove(w);
        storesHeld.remove(w);
      }
    }
    if (stopped.isEmpty()) {
      return;
    }
    LOG.info("sparkstate pool: the SparkContext stopped; stopping its {} worker(s)", stopped.size());
    stopAll(stopped);
  }

  /** The workers of this JVM, for the watchdog. */
  synchronized List<Worker> snapshot() {
    return new ArrayList<>(workers);
  }

  boolean isShuttingDown() {
    return shuttingDown;
  }

  private void killAll() {
    shuttingDown = true;
    List<Worker> all;
    synchronized (this) {
      all = new ArrayList<>(workers);
    }
    stopAll(all);
  }

  private static void stopAll(List<Worker> all) {
    for (Worker w : all) {
      w.closeStdin(); // all at once, so they exit in parallel before kill() waits on each
    }
    for (Worker w : all) {
      try {
        w.kill();
      } catch (RuntimeException e) {
        LOG.debug("sparkstate pool: stopping {} failed", w, e);
      }
    }
  }
}
