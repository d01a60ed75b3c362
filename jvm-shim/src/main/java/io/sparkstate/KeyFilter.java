package io.sparkstate;

import org.apache.spark.unsafe.Platform;

/**
 * A Bloom filter over the storage keys of one store, kept in the executor JVM so that a {@code get} of a
 * key the store cannot hold is answered without a call to the worker.
 *
 * <p>Why it is in the shim: Spark's operators call {@code get} once per input row and most of those rows
 * carry keys the state does not have yet (a new event for dropDuplicates, a new join key, a new group).
 * Every such get is a synchronous hand-over to the worker process and back, and that hand-over, not the
 * store's lookup, is most of what a row costs (docs/benchmarks/workloads.md). The filter holds
 * no values and decides nothing about state: "maybe present" sends the get to the worker as before.
 *
 * <p>It only ever gains keys: a removed key stays in (a false positive costs one ordinary get), and the
 * filter is rebuilt from the next full scan once its newest segment is three-quarters full.
 * A new store's filter grows as a chain of segments, each four times the capacity of the one before, so a
 * store of a few keys costs a few kilobytes and a store of millions does not need its size up front; one
 * built by a scan ({@link Builder}) is a single segment sized for twice the keys it saw. Past
 * {@code maxKeys} it stops answering ({@link #saturated}): every get then goes to the worker.
 *
 * <p>Which versions a filter covers, and when it is trusted, is the business of {@link KeyFilterHandover}
 * (between batches) and {@link StoreKeyFilter} (within one); this class is only the set. Not synchronized:
 * one task thread adds and asks. A second attempt of the same partition in the same executor may share it;
 * its adds race only with bits the first attempt does not need.
 */
final class KeyFilter {
  static final int FIRST_CAPACITY = 4096;
  private static final int GROWTH = 4;
  private static final int BITS_PER_KEY = 12;
  private static final int PROBES = 8;

  private final long maxKeys;
  private volatile Segment[] segments;
  private volatile boolean saturated;
  private long added;

  KeyFilter(long maxKeys) {
    this(maxKeys, FIRST_CAPACITY);
  }

  private KeyFilter(long maxKeys, long firstCapacity) {
    this.maxKeys = maxKeys;
    this.segments = new Segment[] {new Segment(Math.min(firstCapacity, Math.max(1, maxKeys)))};
  }

  /** False only if {@code key} was never added. */
  boolean mightContain(byte[] key) {
    Segment[] current = segments; // before the flag: a saturating add clears the segments after setting it
    if (saturated) {
      return true;
    }
    return anyContains(current, hash(key));
  }

  private static boolean anyContains(Segment[] segments, long h) {
    for (int i = segments.length - 1; i >= 0; i--) { // the newest, largest segment holds most keys
      if (segments[i].mightContain(h)) {
        return true;
      }
    }
    return false;
  }

  void add(byte[] key) {
    addHash(hash(key));
  }

  /** Adds the key whose {@link #hash} is {@code h}. */
  void addHash(long h) {
    if (saturated) {
      return;
    }
    Segment[] current = segments;
    if (anyContains(current, h)) {
      return; // in already (or indistinguishable from a key that is): asking again answers "maybe"
    }
    Segment last = current[current.length - 1];
    if (last.count >= last.capacity) {
      long total = 0;
      for (Segment s : current) {
        total += s.capacity;
      }
      if (total >= maxKeys) {
        saturate();
        return;
      }
      Segment[] grown = java.util.Arrays.copyOf(current, current.length + 1);
      last = new Segment(Math.min((long) last.capacity * GROWTH, Math.max(1, maxKeys - total)));
      grown[current.length] = last;
      segments = grown;
    }
    last.add(h);
    added++;
  }

  /** Frees the bits: every answer is "maybe" from here on. */
  private void saturate() {
    saturated = true;
    segments = new Segment[0];
  }

  /**
   * Collects the hashes of the keys a full scan passes (and of the puts made meanwhile), then builds a
   * filter of one segment sized for them: twice their number, so the keys of the next batches fit
   * without a larger segment before the next rebuild. 8 bytes per key while the scan runs.
   */
  static final class Builder {
    private final long maxKeys;
    private long[] hashes = new long[1024];
    private int count;
    private boolean overflow;

    Builder(long maxKeys) {
      this.maxKeys = maxKeys;
    }

    /** Takes the key whose {@link KeyFilter#hash} is {@code h}. */
    void addHash(long h) {
      if (overflow) {
        return;
      }
      if (count >= maxKeys || count == Integer.MAX_VALUE - 8) {
        overflow = true;
        hashes = null;
        return;
      }
      if (count == hashes.length) {
        hashes = java.util.Arrays.copyOf(hashes, (int) Math.min(Integer.MAX_VALUE - 8, 2L * count));
      }
      hashes[count++] = h;
    }

    /** The filter of every key added; past {@code maxKeys} a saturated one (it answers "maybe"). */
    KeyFilter build() {
      if (overflow) {
        KeyFilter filter = new KeyFilter(maxKeys, 1);
        filter.saturate();
        return filter;
      }
      KeyFilter filter = new KeyFilter(maxKeys, Math.max(FIRST_CAPACITY, 2L * count));
      for (int i = 0; i < count; i++) {
        filter.addHash(hashes[i]);
      }
      hashes = null;
      return filter;
    }
  }

  /**
   * Whether the newest segment is three-quarters full, so the next full scan should rebuild the filter
   * before the keys that churn through it (removed keys are never taken out) make it grow by a segment
   * four times as large.
   */
  boolean worn() {
    if (saturated) {
      return false;
    }
    Segment last = segments[segments.length - 1];
    return 4 * last.count >= 3 * last.capacity;
  }

  boolean saturated() {
    return saturated;
  }

  long sizeInBytes() {
    long bytes = 0;
    for (Segment s : segments) {
      bytes += 8L * s.words.length;
    }
    return bytes;
  }

  static long hash(byte[] key) {
    return hash(key, 0, key.length);
  }

  /** A 64-bit hash of the bytes: 8 at a time, mixed with the finalizer of MurmurHash3's 64-bit variant. */
  static long hash(byte[] data, int off, int len) {
    long h = 0x9E3779B97F4A7C15L ^ len;
    long base = Platform.BYTE_ARRAY_OFFSET + off;
    int i = 0;
    for (; i + 8 <= len; i += 8) {
      h = (h ^ mix(Platform.getLong(data, base + i))) * 0xC2B2AE3D27D4EB4FL;
      h = Long.rotateLeft(h, 29);
    }
    long tail = 0;
    for (int shift = 0; i < len; i++, shift += 8) {
      tail |= (data[off + i] & 0xFFL) << shift;
    }
    return mix(h ^ mix(tail));
  }

  private static long mix(long k) {
    k ^= k >>> 33;
    k *= 0xFF51AFD7ED558CCDL;
    k ^= k >>> 33;
    k *= 0xC4CEB9FE1A85EC53L;
    k ^= k >>> 33;
    return k;
  }

  /** One Bloom filter of fixed capacity; probes by double hashing of the 64-bit hash. */
  private static final class Segment {
    final long capacity;
    final long[] words;
    final long bits;
    long count;

    Segment(long capacity) {
      this.capacity = capacity;
      long wanted = Math.max(64, capacity * BITS_PER_KEY);
      this.words = new long[(int) Math.min(Integer.MAX_VALUE - 8, (wanted + 63) >>> 6)];
      this.bits = 64L * words.length;
    }

    boolean mightContain(long h) {
      long h1 = h;
      long h2 = (h >>> 32) | 1L;
      for (int i = 0; i < PROBES; i++) {
        long bit = Long.remainderUnsigned(h1, bits);
        if ((words[(int) (bit >>> 6)] & (1L << bit)) == 0) {
          return false;
        }
        h1 += h2;
      }
      return true;
    }

    void add(long h) {
      long h1 = h;
      long h2 = (h >>> 32) | 1L;
      for (int i = 0; i < PROBES; i++) {
        long bit = Long.remainderUnsigned(h1, bits);
        words[(int) (bit >>> 6)] |= 1L << bit;
        h1 += h2;
      }
      count++;
    }
  }
}
