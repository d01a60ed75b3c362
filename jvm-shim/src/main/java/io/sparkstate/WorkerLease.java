package io.sparkstate;

import java.util.ArrayList;
import java.util.List;
import org.apache.spark.sql.execution.streaming.state.StateStoreId;

/**
 * Exclusive use of one worker (and its data channel) by one task, or, outside a task, by one store.
 * Releasing it aborts whatever store of the lease is still open, so a worker is never handed to the next
 * task with half-written state on its connection, whatever order Spark runs its completion listeners in.
 */
final class WorkerLease {
  private final WorkerPool pool;
  private final Worker worker;
  private final boolean taskScoped;
  private final List<LoadedStore> stores = new ArrayList<>(); // guarded by this
  private boolean released; // guarded by this

  WorkerLease(WorkerPool pool, Worker worker, boolean taskScoped) {
    this.pool = pool;
    this.worker = worker;
    this.taskScoped = taskScoped;
  }

  Worker worker() {
    return worker;
  }

  boolean isTaskScoped() {
    return taskScoped;
  }

  synchronized void track(LoadedStore store) {
    checkActive();
    stores.add(store);
  }

  /** The store of this lease with {@code id} that is still open for updates, or null. */
  synchronized LoadedStore openStore(StateStoreId id) {
    for (LoadedStore store : stores) {
      if (store.id().equals(id) && store.isUpdating()) {
        return store;
      }
    }
    return null;
  }

  synchronized void checkActive() {
    if (released) {
      throw new IllegalStateException("sparkstate: the " + worker + " lease was already returned "
          + "(the store is used after its task completed or after commit/abort)");
    }
  }

  void release() {
    List<LoadedStore> open;
    synchronized (this) {
      if (released) {
        return;
      }
      open = new ArrayList<>(stores);
      stores.clear();
    }
    try {
      worker.resetChannelIfDirty();
      for (LoadedStore store : open) {
        store.abortQuietly();
      }
      worker.resetChannelIfDirty();
    } finally {
      synchronized (this) {
        released = true;
      }
      pool.giveBack(worker);
    }
  }
}
