package io.sparkstate.channel;

/**
 * A failure on a data channel, of one of three kinds: an error the worker reported in an error frame (the
 * channel stays usable); a broken connection (the worker may be dead; the channel is dirty); or the task
 * thread interrupted in the middle of an exchange (the channel is dirty, the worker is fine: a cancelled
 * task is not a dead worker).
 */
public final class DataChannelException extends RuntimeException {
  private final boolean transportFailure;
  private final boolean interrupted;

  DataChannelException(String message, boolean transportFailure, Throwable cause) {
    this(message, transportFailure, false, cause);
  }

  private DataChannelException(String message, boolean transportFailure, boolean interrupted, Throwable cause) {
    super(message, cause);
    this.transportFailure = transportFailure;
    this.interrupted = interrupted;
  }

  /** The task thread was interrupted mid-exchange (NIO closed the socket under it). */
  static DataChannelException interrupted(String message, Throwable cause) {
    return new DataChannelException(message, false, true, cause);
  }

  public boolean isTransportFailure() {
    return transportFailure;
  }

  public boolean isInterrupted() {
    return interrupted;
  }
}
