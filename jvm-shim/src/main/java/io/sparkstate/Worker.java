package io.sparkstate;

/**
 * What a task leases: something that holds opened stores and answers control calls and data frames for
 * them. {@link WorkerProcess} is a separate Python process (transports socket and py4j);
 * {@link EmbeddedWorker} is a store registry inside the executor's embedded interpreter (transport
 * embedded). Stores never see the difference.
 */
abstract class Worker {
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

  abstract WorkerControl control();

  /** The data channel, connected on first use and after a reset. */
  abstract DataChannel channel();

  /** Drops a channel left in an unknown state (a frame or response cut off), so the next lease reconnects. */
  abstract void resetChannelIfDirty();

  abstract boolean isAlive();

  /** The exception for a failed call; a broken transport makes the worker dead for good. */
  abstract WorkerFailedException failure(String action, Throwable cause);

  /** Ends the worker and frees what it holds. */
  abstract void kill();

  /** The polite stop, sent to every worker at once before {@link #kill} waits on each. */
  abstract void closeStdin();
}
