package io.sparkstate;

/**
 * An operation on a store failed in the Python worker (or on the way to it). The message names the store
 * (operator, partition, store name, version) and carries the Python error text.
 */
public final class PythonStoreException extends RuntimeException {
  public PythonStoreException(String message, Throwable cause) {
    super(message, cause);
  }
}
