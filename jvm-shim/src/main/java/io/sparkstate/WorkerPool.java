package io.sparkstate;

import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.spark.TaskContext;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The JVM-wide set of Python workers. A task leases one worker for its whole life (every store the task
 * opens uses it), preferring the worker that already holds the task's first store, then any idle worker,
 * then a new one; so the pool grows to the number of concurrently running tasks. Outside a task, each
 * store takes its own lease and returns it when it commits, aborts or is released.
 */
final class WorkerPool {
  private static final Logger LOG = LoggerFactory.getLogger(WorkerPool.class);
  private static final WorkerPool INSTANCE = new WorkerPool();

  private final List<Worker> workers = new ArrayList<>(); // guarded by this
  private final Set<Worker> busy = new HashSet<>(); // guarded by this
  private final ConcurrentHashMap<Long, WorkerLease> taskLeases = new ConcurrentHashMap<>();
  private final AtomicLong nextId = new AtomicLong();
  private boolean shutdownHookAdded; // guarded by this
  private volatile boolean shuttingDown;

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
        }
        return gone;
      });
      if (preferred != null && isIdleMatch(preferred, settings)) {
        busy.add(preferred);
        return preferred;
      }
      for (Worker w : workers) {
        if (isIdleMatch(w, settings)) {
          busy.add(w);
          return w;
        }
      }
    }
    // Spawn outside the lock: a start takes a second or more and other tasks may find idle workers meanwhile.
    Worker started = Worker.start("w" + nextId.incrementAndGet(), settings);
    synchronized (this) {
      workers.add(started);
      busy.add(started);
      if (!shutdownHookAdded) {
        shutdownHookAdded = true;
        Runtime.getRuntime().addShutdownHook(new Thread(this::killAll, "sparkstate-worker-shutdown"));
      }
      LOG.info("sparkstate pool: started {}, {} worker(s) in this JVM", started, workers.size());
    }
    return started;
  }

  private boolean isIdleMatch(Worker w, ShimSettings settings) {
    return w.isAlive() && !busy.contains(w) && w.pythonExec.equals(settings.pythonExec)
        && w.transport.equals(settings.transport);
  }

  synchronized void giveBack(Worker worker) {
    busy.remove(worker);
    if (!worker.isAlive()) {
      workers.remove(worker);
      worker.kill(); // stops its gateway and removes its private directory
    }
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
    for (Worker w : all) {
      w.closeStdin(); // all at once, so they exit in parallel before kill() waits on each
    }
    for (Worker w : all) {
      try {
        w.kill();
      } catch (RuntimeException e) {
        // shutting down: nothing left to report to
      }
    }
  }
}
