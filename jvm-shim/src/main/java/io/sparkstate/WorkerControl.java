package io.sparkstate;

/**
 * Control calls into a Python worker (docs/internals/bridge.md, "Control calls"). Implemented in Python as a
 * py4j callback object; arguments and results are JSON strings except {@link #data}. A Python error arrives
 * as a {@code py4j.Py4JException} carrying the Python message; a dead connection as {@code
 * py4j.Py4JNetworkException}.
 */
public interface WorkerControl {
  /** {@code {"pid", "python", "version"}}. */
  String hello();

  /** Opens a store from its spec JSON; returns {@code {"handle": int}}. */
  String open(String spec);

  /**
   * Loads committed {@code version}: exactly its attempt {@code checkpointId} under checkpoint format v2 (the
   * id Spark's commit log recorded; "" for none). Returns {@code {"version", "loadMs", "source"}}.
   */
  String load(int handle, long version, String checkpointId);

  /**
   * Starts the store empty at {@code version} (Spark's {@code loadEmpty}: offline tools that write a whole
   * state as one new version); the next commit writes version+1. Returns what {@link #load} returns.
   */
  String loadEmpty(int handle, long version);

  /**
   * Rebuilds {@code endVersion} from the snapshot of {@code snapshotVersion} plus the change logs after it
   * (Spark's snapshot replay; under format v2 along the lineage of attempt {@code endCheckpointId}, "" for
   * none); returns what {@link #load} returns.
   */
  String replay(int handle, long snapshotVersion, long endVersion, String snapshotCheckpointId,
      String endCheckpointId);

  /**
   * Writes the changes of versions {@code startVersion..endVersion} to a local file ({@link ChangeFileReader}
   * reads and deletes it), under format v2 those of the lineage of attempt {@code endCheckpointId} ("" for
   * none); returns {@code {"path", "rows"}}.
   */
  String changes(int handle, long startVersion, long endVersion, String endCheckpointId);

  /**
   * Makes version+1 durable; returns {@code {"version": newVersion, "checkpointId", "baseCheckpointId",
   * "metrics": {...}}} (the ids are null under checkpoint format 1).
   */
  String commit(int handle);

  /** Discards uncommitted writes; idempotent. */
  void abort(int handle);

  /** {@code {"numKeys", "memoryUsedBytes", "custom": {name: long}}}. */
  String metrics(int handle);

  /** {@code kind} is "snapshot" or "cleanup". */
  void maintenance(int handle, String kind);

  /** Closes the opened store but keeps its local files (another worker may take the store over). */
  void release(int handle);

  /** Closes the store and deletes this instance's local files. */
  void close(int handle);

  /** One request frame in, its response bytes out (empty for async frames); used by transport=py4j. */
  byte[] data(byte[] frame);

  /**
   * Waits until every data connection the worker was serving has ended (the JVM closed them); returns
   * {@code {"drained": true}}, or false when some connection is still busy after {@code timeoutMs}.
   */
  String drainData(long timeoutMs);

  void shutdown();
}
