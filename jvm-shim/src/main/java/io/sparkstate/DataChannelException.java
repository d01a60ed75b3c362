package io.sparkstate;

/**
 * A failure on a data channel. {@code transportFailure} tells a broken connection (the worker may be dead;
 * the channel is dirty) from an error the worker reported in an error frame (the channel stays usable).
 */
final class DataChannelException extends RuntimeException {
  private final boolean transportFailure;

  DataChannelException(String message, boolean transportFailure, Throwable cause) {
    super(message, cause);
    this.transportFailure = transportFailure;
  }

  boolean isTransportFailure() {
    return transportFailure;
  }
}
