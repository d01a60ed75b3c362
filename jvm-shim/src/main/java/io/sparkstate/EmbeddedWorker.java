package io.sparkstate;

import io.sparkstate.channel.DataChannel;
import io.sparkstate.channel.EmbeddedDataChannel;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A worker inside the executor's embedded interpreter (transport=embedded): a store registry and the same
 * Python control object a worker process serves over py4j, reached through Jep. There is no process and no
 * socket, so a get costs a function call instead of two context switches
 * (docs/internals/bridge.md, "transport=embedded").
 */
final class EmbeddedWorker extends Worker {
  private static final Logger LOG = LoggerFactory.getLogger(EmbeddedWorker.class);
  private static final String MODULE = EmbeddedPython.ENTRY_MODULE + ".";
  /** A JVM shutdown must not hang on Python; stopping a worker then gets this long. */
  private static final long STOP_WAIT_MS = 2000;

  private final EmbeddedPython python;
  private final WorkerControl control;

  private EmbeddedWorker(String id, ShimSettings settings, EmbeddedPython python) {
    super(id, settings.pythonExec, settings.transport);
    this.python = python;
    this.control = new Control();
  }

  static EmbeddedWorker start(String id, ShimSettings settings) {
    EmbeddedPython python = EmbeddedPython.get(settings.pythonExec, settings.workerStartTimeoutMs);
    Object hello;
    try {
      hello = python.invoke(MODULE + "start_worker", id);
    } catch (RuntimeException e) {
      throw new WorkerFailedException("cannot start embedded sparkstate worker " + id + " (interpreter '"
          + settings.pythonExec + "'): " + e.getMessage() + ". Is sparkstate installed for that interpreter?", e);
    }
    LOG.info("sparkstate embedded worker {} started: {}", id, hello);
    EmbeddedWorker worker = new EmbeddedWorker(id, settings, python);
    String refused = BuildId.mismatchOfHello(String.valueOf(hello), settings.pythonExec);
    if (refused != null) {
      worker.kill();
      throw new WorkerFailedException(refused);
    }
    return worker;
  }

  @Override
  protected WorkerControl controlObject() {
    return control;
  }

  @Override
  protected DataChannel openChannel() {
    return EmbeddedDataChannel.open(python, id);
  }

  @Override
  boolean isAlive() {
    return deathReason == null;
  }

  /** Every embedded worker of one interpreter shares its store table (sparkstate/worker/registry.py). */
  @Override
  boolean reaches(Worker holder) {
    return holder == this || (holder instanceof EmbeddedWorker other && other.python == python);
  }

  @Override
  boolean sharesStores() {
    return true;
  }

  @Override
  WorkerFailedException failure(String action, Throwable cause) {
    if (cause != null && deathReason == null) {
      deathReason = "cannot " + action + ": " + cause;
      LOG.warn("sparkstate embedded worker {} is dead: {}", id, deathReason);
    }
    return new WorkerFailedException("sparkstate embedded worker " + id + " (interpreter '" + pythonExec
        + "') failed: cannot " + action + " (" + deathReason + ")"
        + (cause != null ? ": " + cause.getMessage() : "") + ". The Python traceback is in the executor's stderr.",
        cause);
  }

  /** Closes the worker's stores (keeping nothing but the checkpoint) on a helper thread, bounded in time. */
  @Override
  void kill() {
    closeChannel();
    if (deathReason == null) {
      deathReason = "stopped";
    }
    Thread stopper = new Thread(() -> {
      try {
        python.invoke(MODULE + "stop_worker", id);
      } catch (RuntimeException e) {
        LOG.debug("sparkstate embedded worker {}: stop failed", id, e);
      }
    }, "sparkstate-embedded-stop-" + id);
    stopper.setDaemon(true);
    stopper.start();
    try {
      stopper.join(STOP_WAIT_MS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  @Override
  void closeStdin() {
    // nothing to signal: there is no process
  }

  @Override
  public String toString() {
    return "embedded worker " + id;
  }

  /** The control calls, forwarded to the worker's Python control object on the calling thread. */
  private final class Control implements WorkerControl {
    private Object call(String method, Object... args) {
      Object[] all = new Object[args.length + 2];
      all[0] = id;
      all[1] = method;
      System.arraycopy(args, 0, all, 2, args.length);
      return python.invoke(MODULE + "call", all);
    }

    private String text(String method, Object... args) {
      Object result = call(method, args);
      return result == null ? null : result.toString();
    }

    @Override
    public String hello() {
      return text("hello");
    }

    @Override
    public String open(String spec) {
      return text("open", spec);
    }

    @Override
    public String load(int handle, long version, String checkpointId) {
      return text("load", handle, version, checkpointId);
    }

    @Override
    public String loadEmpty(int handle, long version) {
      return text("loadEmpty", handle, version);
    }

    @Override
    public String replay(int handle, long snapshotVersion, long endVersion, String snapshotCheckpointId,
        String endCheckpointId) {
      return text("replay", handle, snapshotVersion, endVersion, snapshotCheckpointId, endCheckpointId);
    }

    @Override
    public String changes(int handle, long startVersion, long endVersion, String endCheckpointId) {
      return text("changes", handle, startVersion, endVersion, endCheckpointId);
    }

    @Override
    public String commit(int handle) {
      return text("commit", handle);
    }

    @Override
    public void abort(int handle) {
      call("abort", handle);
    }

    @Override
    public String metrics(int handle) {
      return text("metrics", handle);
    }

    @Override
    public void maintenance(int handle, String kind) {
      call("maintenance", handle, kind);
    }

    @Override
    public void release(int handle) {
      call("release", handle);
    }

    @Override
    public void close(int handle) {
      call("close", handle);
    }

    @Override
    public byte[] data(byte[] frame) {
      throw new UnsupportedOperationException("transport=embedded moves frames through its data channel");
    }

    @Override
    public String drainData(long timeoutMs) {
      return "{\"drained\": true}"; // embedded frames are handed over by synchronous calls: none is abandoned
    }

    @Override
    public void shutdown() {
      kill();
    }
  }
}
