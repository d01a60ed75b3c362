package io.sparkstate;

import io.sparkstate.channel.DataChannelException;
import org.apache.spark.TaskContext;
import org.apache.spark.TaskKilledException;

/**
 * Sorts a failed call on a store's worker into the exception its task fails with: a dead worker or broken
 * transport becomes {@link WorkerFailedException}, an error raised in Python {@link PythonStoreException},
 * a cancelled task {@link TaskKilledException}. The messages name the store and carry the original text,
 * so a user reads which store failed and why without the worker's log.
 */
final class StoreFailures {
  private StoreFailures() {}

  /**
   * The exception to throw for {@code e}, raised while {@code action} ran on the store {@code store} (as
   * {@link PythonStateStoreProvider#describe} names it) through {@code worker} (null: none yet).
   */
  static RuntimeException classify(String store, String action, Worker worker, RuntimeException e) {
    if (e instanceof PythonStoreException || e instanceof TaskKilledException) {
      return e;
    }
    String named = store + ": cannot " + withoutObject(action) + ": ";
    if (e instanceof DataChannelException && ((DataChannelException) e).isInterrupted()) {
      // A cancelled task, not a dead worker: the lease resets the channel and drains the worker when the
      // task ends (WorkerLease#release), and the worker keeps its other stores.
      TaskContext task = TaskContext.get();
      if (task != null && task.isInterrupted()) {
        return new TaskKilledException(task.getKillReason().getOrElse(() -> "interrupted in "
            + withoutObject(action) + " of " + store));
      }
      return new PythonStoreException(named + e.getMessage(), e);
    }
    if (e instanceof WorkerFailedException) { // raised below the store (pool, channel): add the store's name
      String msg = String.valueOf(e.getMessage());
      return msg.startsWith("sparkstate store [") ? e
          : new WorkerFailedException(named + msg, e);
    }
    boolean transport = brokenControlConnection(e)
        || (e instanceof DataChannelException && ((DataChannelException) e).isTransportFailure());
    if (worker != null && (transport || !worker.isAlive())) {
      return worker.failure(action + " " + store, e);
    }
    if (e instanceof py4j.Py4JException) {
      String reported = PythonStoreException.reportedError(e.getMessage());
      if (reported != null) { // one line; the Python traceback is in the worker's stderr, not repeated here
        return new PythonStoreException(named + reported, null);
      }
    }
    if (e instanceof DataChannelException || e instanceof py4j.Py4JException || e instanceof PythonRaisedException) {
      return new PythonStoreException(named + e.getMessage(), e);
    }
    return e;
  }

  /** A py4j call that failed on its connection (py4j wraps the network error in a plain Py4JException). */
  static boolean brokenControlConnection(Throwable e) {
    for (Throwable t = e; t != null; t = t.getCause()) {
      if (t instanceof py4j.Py4JNetworkException) {
        return true;
      }
    }
    return false;
  }

  /**
   * An action phrased to take the store as its object ("read metrics of") without it, for messages that
   * name the store first ("sparkstate store [...]: cannot read metrics: ...").
   */
  static String withoutObject(String action) {
    return action.endsWith(" of") ? action.substring(0, action.length() - 3) : action;
  }
}
