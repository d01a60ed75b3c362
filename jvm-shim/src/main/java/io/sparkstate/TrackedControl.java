package io.sparkstate;

import io.sparkstate.channel.CallTracker;
import java.util.function.Supplier;

/**
 * The control calls of a worker, each bracketed as the worker's call in flight ({@link CallTracker}), so
 * a worker that stops answering is named with the call it hung in.
 */
final class TrackedControl implements WorkerControl {
  private final CallTracker tracker;
  private final Supplier<WorkerControl> target;

  private TrackedControl(CallTracker tracker, Supplier<WorkerControl> target) {
    this.tracker = tracker;
    this.target = target;
  }

  static WorkerControl wrap(CallTracker tracker, Supplier<WorkerControl> target) {
    return new TrackedControl(tracker, target);
  }

  @Override
  public String hello() {
    tracker.beginCall("hello", -1);
    try {
      return target.get().hello();
    } finally {
      tracker.endCall();
    }
  }

  @Override
  public String open(String spec) {
    tracker.beginCall("open", -1);
    try {
      return target.get().open(spec);
    } finally {
      tracker.endCall();
    }
  }

  @Override
  public String load(int handle, long version, String checkpointId) {
    tracker.beginCall("load", handle);
    try {
      return target.get().load(handle, version, checkpointId);
    } finally {
      tracker.endCall();
    }
  }

  @Override
  public String loadEmpty(int handle, long version) {
    tracker.beginCall("loadEmpty", handle);
    try {
      return target.get().loadEmpty(handle, version);
    } finally {
      tracker.endCall();
    }
  }

  @Override
  public String replay(int handle, long snapshotVersion, long endVersion, String snapshotCheckpointId,
      String endCheckpointId) {
    tracker.beginCall("replay", handle);
    try {
      return target.get().replay(handle, snapshotVersion, endVersion, snapshotCheckpointId, endCheckpointId);
    } finally {
      tracker.endCall();
    }
  }

  @Override
  public String changes(int handle, long startVersion, long endVersion, String endCheckpointId) {
    tracker.beginCall("changes", handle);
    try {
      return target.get().changes(handle, startVersion, endVersion, endCheckpointId);
    } finally {
      tracker.endCall();
    }
  }

  @Override
  public String commit(int handle) {
    tracker.beginCall("commit", handle);
    try {
      return target.get().commit(handle);
    } finally {
      tracker.endCall();
    }
  }

  @Override
  public void abort(int handle) {
    tracker.beginCall("abort", handle);
    try {
      target.get().abort(handle);
    } finally {
      tracker.endCall();
    }
  }

  @Override
  public String metrics(int handle) {
    tracker.beginCall("metrics", handle);
    try {
      return target.get().metrics(handle);
    } finally {
      tracker.endCall();
    }
  }

  @Override
  public void maintenance(int handle, String kind) {
    // Spark's maintenance threads call this while a task may use the worker: not tracked as the task's
    // call (the watchdog still sees a hung worker by its heartbeat).
    target.get().maintenance(handle, kind);
  }

  @Override
  public void release(int handle) {
    tracker.beginCall("release", handle);
    try {
      target.get().release(handle);
    } finally {
      tracker.endCall();
    }
  }

  @Override
  public void close(int handle) {
    target.get().close(handle); // also called by Spark's maintenance threads when a provider is unloaded
  }

  @Override
  public byte[] data(byte[] frame) {
    return target.get().data(frame); // tracked by the data channel that sends it
  }

  @Override
  public String drainData(long timeoutMs) {
    tracker.beginCall("drain abandoned data connections", -1);
    try {
      return target.get().drainData(timeoutMs);
    } finally {
      tracker.endCall();
    }
  }

  @Override
  public void shutdown() {
    target.get().shutdown();
  }
}
