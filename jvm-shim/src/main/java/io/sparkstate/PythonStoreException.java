package io.sparkstate;

/**
 * An operation on a store failed in the Python worker (or on the way to it). The message names the store
 * (operator, partition, store name, version) and carries the Python error text.
 */
public final class PythonStoreException extends RuntimeException {
  /** What py4j puts before the Python side's formatted traceback. */
  private static final String PY4J_RETURN = "Return Message: ";
  /** The worker's control calls raise every error as one {@code RuntimeError("<Type>: <message>")}. */
  private static final String REPORTED = "RuntimeError: ";

  public PythonStoreException(String message, Throwable cause) {
    super(message, cause);
  }

  /**
   * The Python error of a failed py4j call without py4j's wrapping and the Python traceback (the worker
   * logs that in its stderr): {@code "ConfigError: invalid value ..."}; null when the text has another
   * shape (then the caller keeps the whole exception).
   */
  static String reportedError(String py4jMessage) {
    if (py4jMessage == null || !py4jMessage.contains(PY4J_RETURN)) {
      return null;
    }
    int at = py4jMessage.lastIndexOf("\n" + REPORTED);
    if (at < 0) {
      return null;
    }
    return py4jMessage.substring(at + 1 + REPORTED.length()).strip();
  }
}
