package io.sparkstate.channel;

/**
 * Records which call a worker is serving, so a hung worker is named with the call it hung in (the worker
 * implements it); the data channels report through it.
 */
public interface CallTracker {
  /** A call that waits on the worker starts; {@code handle} is the store handle, or -1. */
  void beginCall(String op, int handle);

  /** The call started by the last {@link #beginCall} returned or failed. */
  void endCall();

  /** For channels used without a worker (tests). */
  CallTracker NONE = new CallTracker() {
    @Override
    public void beginCall(String op, int handle) {}

    @Override
    public void endCall() {}
  };
}
