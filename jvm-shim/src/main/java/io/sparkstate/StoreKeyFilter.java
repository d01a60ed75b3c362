package io.sparkstate;

/**
 * The {@link KeyFilter} of one loaded store, kept current as the store is used, so a get of a key the
 * store cannot hold is answered without the worker.
 *
 * <p>A filter is trusted only while it holds every key the store can hold: from the provider (an empty
 * store, or the version this provider committed last) or, failing that, once a full scan
 * ({@code iterator()}) has run to its end, since every key the worker has passes through it and every put
 * goes into the filter first. Spark's eviction passes (watermarks of dropDuplicates, joins, aggregations)
 * are such scans, so a store restored from the checkpoint gets its filter without a scan of its own. A
 * worn filter is rebuilt the same way. The trusted filter is handed to the provider on commit and taken
 * up by the next batch's store.
 */
final class StoreKeyFilter {
  private final KeyCodec codec;
  /** Keys a filter may hold; 0: the store keeps none. */
  private final long maxKeys;
  /** Holds every key the store can hold; null: ask the worker. */
  private KeyFilter trusted;
  /** The keys of a full scan that has not ended yet, and of the puts made since it began: the next filter. */
  private KeyFilter.Builder pending;
  private long filteredGets;

  /** {@code trusted}: a filter holding every key of the loaded version, or null when there is none. */
  StoreKeyFilter(KeyFilter trusted, long maxKeys, KeyCodec codec) {
    this.trusted = trusted;
    this.maxKeys = maxKeys;
    this.codec = codec;
  }

  /**
   * False when the store cannot hold {@code key} (a storage key, or a scan prefix): a get or prefix scan
   * of it is then answered "absent" without the worker, and counted.
   */
  boolean mayHold(byte[] key) {
    KeyFilter filter = trusted;
    if (filter != null && !filter.mightContain(key)) {
      filteredGets++;
      return false;
    }
    return true;
  }

  /** A put of {@code storageKey}: into the trusted filter and the one being built, whichever exist. */
  void put(byte[] storageKey) {
    if (trusted != null || pending != null) {
      add(storageKey, 0, storageKey.length, trusted, pending);
    }
  }

  /**
   * A full scan starts: the builder its keys go into, to become the trusted filter when it ends; null
   * when the store keeps no filter, or has a trusted one that is not worn yet.
   */
  KeyFilter.Builder fullScanStarts() {
    if (maxKeys <= 0) {
      return null;
    }
    synchronized (this) {
      if (pending == null && (trusted == null || trusted.worn())) {
        pending = new KeyFilter.Builder(maxKeys);
      }
      return pending;
    }
  }

  /** A key a full scan passed ({@code len} bytes of {@code data} from {@code off}) into its builder. */
  void scanned(KeyFilter.Builder feed, byte[] data, int off, int len) {
    add(data, off, len, null, feed);
  }

  /** A full scan saw every key: its filter, with the puts made meanwhile, holds all the store has. */
  void fullScanEnded(KeyFilter.Builder feed) {
    if (feed == null) {
      return;
    }
    synchronized (this) {
      if (feed == pending) {
        trusted = feed.build();
        pending = null;
      }
    }
  }

  /** The filter to hand to the provider on commit; null when none can be trusted. */
  synchronized KeyFilter trusted() {
    return trusted;
  }

  /** Gets and prefix scans answered "absent" by the filter. */
  synchronized long filteredGets() {
    return filteredGets;
  }

  synchronized long sizeInBytes() {
    return trusted == null ? 0 : trusted.sizeInBytes();
  }

  /**
   * A storage key and, in a store with prefix scans, its scan prefix (so prefixScan can ask the filter
   * too) into the trusted filter and the one being built, whichever exist; each hashed once.
   */
  private void add(byte[] data, int off, int len, KeyFilter filter, KeyFilter.Builder builder) {
    long h = KeyFilter.hash(data, off, len);
    int prefixLength = codec.scanPrefixLength(data, off);
    long prefixHash = prefixLength > 0 ? KeyFilter.hash(data, off, prefixLength) : 0;
    if (filter != null) {
      filter.addHash(h);
      if (prefixLength > 0) {
        filter.addHash(prefixHash);
      }
    }
    if (builder != null) {
      builder.addHash(h);
      if (prefixLength > 0) {
        builder.addHash(prefixHash);
      }
    }
  }
}
