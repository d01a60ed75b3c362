package io.sparkstate;

import java.nio.ByteBuffer;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * The values of one store fetched ahead of the gets about to come ({@link JoinReadAhead}), by storage
 * key. A get looks here first; the store's own puts and removes keep the values current, so an answer
 * from here is the worker's; the next fetch replaces them and commit or abort drops them. Used by the
 * store's task thread; the store's lock orders {@link #drop} and {@link #gets} with it.
 */
final class ReadAheadCache {
  /** The value of a key fetched as absent, or removed since. */
  static final byte[] ABSENT = new byte[0];

  /** null: nothing fetched. */
  private Map<ByteBuffer, byte[]> values;
  private long gets;
  /** How many gets the latest fetch answered: none means the guess of what comes next was wrong. */
  private int hits;

  /**
   * The value fetched ahead for {@code storageKey}: a copy of it, {@link #ABSENT}, or null when it was not
   * fetched (the get goes to the worker). A value found here counts as a get answered.
   */
  byte[] get(byte[] storageKey) {
    Map<ByteBuffer, byte[]> ahead = values;
    if (ahead == null) {
      return null;
    }
    byte[] fetched = ahead.get(ByteBuffer.wrap(storageKey));
    if (fetched == null) {
      return null;
    }
    hits++;
    gets++;
    return fetched == ABSENT ? ABSENT : fetched.clone();
  }

  /**
   * Whether to fetch again: false, dropping the values, when the latest fetch answered no get (the
   * caller's guess of what comes next is wrong for this pass).
   */
  boolean worthFetching() {
    if (values != null && hits == 0) {
      values = null;
      return false;
    }
    return true;
  }

  /** The values of {@code storageKeys} just fetched (null: absent), in place of the earlier ones. */
  void fetched(List<byte[]> storageKeys, byte[][] fetched) {
    Map<ByteBuffer, byte[]> byKey = new HashMap<>(storageKeys.size() * 2);
    for (int i = 0; i < fetched.length; i++) {
      byKey.put(ByteBuffer.wrap(storageKeys.get(i)), fetched[i] == null ? ABSENT : fetched[i]);
    }
    values = byKey;
    hits = 0;
  }

  /** The store put {@code value} under {@code storageKey}. */
  void put(byte[] storageKey, byte[] value) {
    if (values != null) {
      values.computeIfPresent(ByteBuffer.wrap(storageKey), (k, old) -> value);
    }
  }

  /** The store removed {@code storageKey}. */
  void remove(byte[] storageKey) {
    if (values != null) {
      values.computeIfPresent(ByteBuffer.wrap(storageKey), (k, old) -> ABSENT);
    }
  }

  /** Forgets the values (the store committed or aborted). */
  void drop() {
    values = null;
  }

  /** Gets answered from fetched values. */
  long gets() {
    return gets;
  }
}
