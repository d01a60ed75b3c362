package io.sparkstate;

/** Records which call a worker is serving (see {@link Worker}); the data channels report through it. */
interface CallTracker {
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
