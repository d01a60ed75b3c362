package io.sparkstate;

/**
 * A Python worker died, failed to start, or its connection broke. The message names the interpreter, the
 * exit code and the tail of the worker's stderr log, because that log is the only place the cause is.
 */
public final class WorkerFailedException extends RuntimeException {
  public WorkerFailedException(String message) {
    super(message);
  }

  public WorkerFailedException(String message, Throwable cause) {
    super(message, cause);
  }
}
