package io.sparkstate;

import java.util.concurrent.CompletableFuture;

/**
 * The py4j entry point of one worker's gateway: the only Java object a freshly started worker can reach.
 * The worker calls {@link #register} once it has its callback server and data socket up; the JVM waits on
 * the resulting future.
 */
public final class WorkerHandshake {
  /** What a worker reports when it registers. */
  static final class Registration {
    final WorkerControl control;
    final String socketPath;
    final long pid;

    Registration(WorkerControl control, String socketPath, long pid) {
      this.control = control;
      this.socketPath = socketPath;
      this.pid = pid;
    }
  }

  private final String workerId;
  private final CompletableFuture<Registration> registered = new CompletableFuture<>();

  WorkerHandshake(String workerId) {
    this.workerId = workerId;
  }

  /** Called by the Python worker through py4j. */
  public void register(String workerId, WorkerControl control, String socketPath, long pid) {
    if (!this.workerId.equals(workerId)) {
      throw new IllegalArgumentException("worker id mismatch: expected " + this.workerId + ", got " + workerId);
    }
    if (control == null) {
      throw new IllegalArgumentException("worker " + workerId + " registered without a control object");
    }
    if (!registered.complete(new Registration(control, socketPath, pid))) {
      throw new IllegalStateException("worker " + workerId + " registered twice");
    }
  }

  CompletableFuture<Registration> registration() {
    return registered;
  }
}
