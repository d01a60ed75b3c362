package io.sparkstate;

import io.sparkstate.channel.CallTracker;
import io.sparkstate.channel.DataChannel;
import org.apache.spark.SparkEnv;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * What a task leases: something that holds opened stores and answers control calls and data frames for
 * them. {@link WorkerProcess} is a separate Python process (transports shm, socket and py4j);
 * {@link EmbeddedWorker} is a store registry inside the executor's embedded interpreter (transport
 * embedded). Stores never see the difference.
 *
 * <p>Every call that waits on the worker (a control call, a synchronous data frame, a flush that may
 * block) is bracketed by {@link #beginCall}/{@link #endCall}, so {@link WorkerWatchdog} can tell which
 * call a hung worker was serving and for how long. One task uses a worker at a time, so at most one call
 * is in flight; the fields are volatile because the watchdog reads them from its own thread.
 */
abstract class Worker implements CallTracker {
  private static final Logger LOG = LoggerFactory.getLogger(Worker.class);

  final String id;
  final String pythonExec;
  final String transport;
  /** The application this worker serves (null outside one): its stores end with it (WorkerPool). */
  final SparkEnv sparkEnv;

  Worker(String id, String pythonExec, String transport) {
    this.id = id;
    this.pythonExec = pythonExec;
    this.transport = transport;
    this.sparkEnv = SparkEnv.get();
  }

  static Worker start(String id, ShimSettings settings) {
    return settings.transport.equals(ShimSettings.EMBEDDED)
        ? EmbeddedWorker.start(id, settings)
        : WorkerProcess.start(id, settings);
  }

  /** Why the worker is dead, or null while it is usable. */
  protected volatile String deathReason;
  private DataChannel channel; // guarded by this
  private final WorkerControl trackedControl = TrackedControl.wrap(this, this::controlObject);

  // The call in flight (see the class comment): written by the calling task thread, read by the watchdog.
  private volatile String callOp;
  private volatile int callHandle;
  private volatile long callSinceNanos; // 0: no call in flight

  @Override
  public final void beginCall(String op, int handle) {
    callOp = op;
    callHandle = handle;
    callSinceNanos = System.nanoTime() | 1; // never 0 while a call is in flight
  }

  @Override
  public final void endCall() {
    callSinceNanos = 0;
  }

  /** When the call in flight started ({@link System#nanoTime}), or 0 when the worker is idle. */
  final long callSinceNanos() {
    return callSinceNanos;
  }

  /** Names the call in flight for an error message, e.g. "load of store handle 3 (in flight for 31.2 s)". */
  final String describeCall(long nowNanos) {
    long since = callSinceNanos;
    if (since == 0) {
      return "no call in flight";
    }
    int handle = callHandle;
    return callOp + (handle >= 0 ? " of store handle " + handle : "") + " (in flight for "
        + String.format(java.util.Locale.ROOT, "%.1f s", (nowNanos - since) / 1e9) + ")";
  }

  /** The control calls, each tracked as the call in flight; refused once the worker is dead. */
  final WorkerControl control() {
    if (deathReason != null) {
      throw failure("use the worker", null);
    }
    return trackedControl;
  }

  /** The data channel, connected on first use and after a reset. */
  final synchronized DataChannel channel() {
    if (deathReason != null) {
      throw failure("use the data channel", null);
    }
    if (channel == null) {
      channel = openChannel();
    }
    return channel;
  }

  /**
   * Drops a channel left in an unknown state (a frame or response cut off), so the next lease reconnects,
   * and waits until the worker has finished with it ({@link #drainAbandonedConnections}).
   */
  final void resetChannelIfDirty() {
    synchronized (this) {
      if (channel == null || !channel.isDirty()) {
        return;
      }
      LOG.info("sparkstate {}: resetting its data channel", this);
      closeChannel();
    }
    if (deathReason == null) {
      drainAbandonedConnections();
    }
  }

  protected final synchronized void closeChannel() {
    if (channel != null) {
      channel.close();
      channel = null;
    }
  }

  protected abstract WorkerControl controlObject();

  protected abstract DataChannel openChannel();

  /**
   * After a data connection was abandoned with a request in flight (a task interrupted mid-call), waits
   * until the worker has finished with every connection it served, so no stale frame can reach a store
   * after the next task loaded it. Transports whose calls cannot be abandoned need nothing.
   */
  void drainAbandonedConnections() {}

  abstract boolean isAlive();

  /**
   * Whether a store opened on {@code holder} can be used through this worker as it is (same handle, live
   * state). A process reaches only its own stores; embedded workers share their interpreter's stores.
   */
  boolean reaches(Worker holder) {
    return holder == this;
  }

  /** Whether this worker reaches every store of its kind (then placement never moves a store to it). */
  boolean sharesStores() {
    return false;
  }

  /** The exception for a failed call; a broken transport makes the worker dead for good. */
  abstract WorkerFailedException failure(String action, Throwable cause);

  /** Ends the worker and frees what it holds. */
  abstract void kill();

  /** The polite stop, sent to every worker at once before {@link #kill} waits on each. */
  abstract void closeStdin();
}
