package io.sparkstate;

import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * What a task leases: something that holds opened stores and answers control calls and data frames for
 * them. {@link WorkerProcess} is a separate Python process (transports socket and py4j);
 * {@link EmbeddedWorker} is a store registry inside the executor's embedded interpreter (transport
 * embedded). Stores never see the difference.
 */
abstract class Worker {
  private static final Logger LOG = LoggerFactory.getLogger(Worker.class);

  final String id;
  final String pythonExec;
  final String transport;

  Worker(String id, String pythonExec, String transport) {
    this.id = id;
    this.pythonExec = pythonExec;
    this.transport = transport;
  }

  static Worker start(String id, ShimSettings settings) {
    return settings.transport.equals(ShimSettings.EMBEDDED)
        ? EmbeddedWorker.start(id, settings)
        : WorkerProcess.start(id, settings);
  }

  /** Why the worker is dead, or null while it is usable. */
  protected volatile String deathReason;
  private DataChannel channel; // guarded by this

  /** The control calls; refused once the worker is dead. */
  final WorkerControl control() {
    if (deathReason != null) {
      throw failure("use the worker", null);
    }
    return controlObject();
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

  /** Drops a channel left in an unknown state (a frame or response cut off), so the next lease reconnects. */
  final synchronized void resetChannelIfDirty() {
    if (channel != null && channel.isDirty()) {
      LOG.info("sparkstate {}: resetting its data channel", this);
      closeChannel();
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
