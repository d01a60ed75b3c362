package io.sparkstate.channel;

import java.util.List;

/**
 * The data path to one worker (docs/internals/bridge.md, "Data frames"): puts and removes are buffered and
 * sent as BATCH frames without a round trip; gets, scans and SYNC are synchronous. One channel belongs to the
 * worker and is used by one leasing task at a time; implementations are nonetheless synchronized so a stray
 * second thread of the same task cannot interleave frames.
 */
public interface DataChannel extends AutoCloseable {
  /** Buffers a put; {@code key} and {@code value} are owned by the channel from now on. */
  void put(int handle, byte[] key, byte[] value);

  /** Buffers a remove; {@code key} is owned by the channel from now on. */
  void remove(int handle, byte[] key);

  /** The stored value bytes, or null when the key is absent. Flushes pending batches first. */
  byte[] get(int handle, byte[] key);

  /**
   * The stored values of {@code keys} in one round trip (null: absent), after every buffered write, so
   * each answer reflects them.
   */
  byte[][] getMany(int handle, List<byte[]> keys);

  /** Opens a cursor over a consistent view of all keys starting with {@code prefix} (empty: all keys). */
  ScanChunk scanOpen(int handle, byte[] prefix);

  ScanChunk scanNext(int handle, int cursor);

  /** Closes a cursor that has not reported done (asynchronous). */
  void scanClose(int handle, int cursor);

  /** Flushes pending batches and waits for the worker to have applied them; surfaces async errors. */
  void sync(int handle);

  /** Drops the buffered, unsent records of one store (used by abort). */
  void discard(int handle);

  /**
   * True when the connection cannot be reused as is: it failed, or a frame or its response was cut off
   * (for example by a task interrupt). The worker then reopens it before the next lease.
   */
  boolean isDirty();

  @Override
  void close();
}
