package io.sparkstate;

import com.fasterxml.jackson.databind.JsonNode;
import io.sparkstate.channel.DataChannel;
import io.sparkstate.channel.ScanChunk;
import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.NoSuchElementException;
import java.util.Set;
import org.apache.spark.sql.catalyst.expressions.UnsafeRow;
import org.apache.spark.sql.execution.streaming.state.StateStoreId;
import org.apache.spark.sql.execution.streaming.state.StateStoreMetrics;
import org.apache.spark.sql.execution.streaming.state.UnsafeRowPair;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import scala.Option;

/**
 * One loaded version of a store, for one task: a thin handle on the store open in the leased worker. Puts
 * and removes are buffered on the data channel; get is one round trip; scans stream chunks. This is the
 * store's work common to every Spark line; each line's {@code PythonStateStore} implements that line's
 * {@code StateStore} on top of it.
 *
 * <pre>
 *   UPDATING ──commit()──▶ COMMITTED
 *      └──abort() / release() / lease returned──▶ ABORTED      (abort is idempotent, never throws)
 * </pre>
 * The same object serves as the read store ({@code getReadStore}) and, after
 * {@code upgradeReadStoreToWriteStore}, as the write store. A store that never wrote is left as loaded on
 * abort (no Python call), so the next batch can reuse the live database.
 *
 * <p>Some gets are answered without the worker: of a key the store cannot hold, by its
 * {@link StoreKeyFilter}; of a key a join's eviction pass fetched ahead, by its {@link ReadAheadCache}.
 * The store tells both of its puts (and the cache of its removes), so their answers stay the worker's.
 */
final class LoadedStore {
  private static final Logger LOG = LoggerFactory.getLogger(LoadedStore.class);

  private enum State { UPDATING, COMMITTED, ABORTED }

  private final ProviderCore provider;
  private final WorkerLease lease;
  private final Worker worker;
  private final int handle;
  private final long version;
  private final KeyCodec codec;
  private final Set<ScanIterator> openScans = new LinkedHashSet<>();
  private boolean readOnly;
  private State state = State.UPDATING;
  private boolean wrote;
  private long committedVersion = -1;
  private JsonNode commitMetrics;
  private long commitWaitMs;
  private Option<String> checkpointId = Option.empty();      // the committed attempt's id (format v2)
  private Option<String> baseCheckpointId = Option.empty();  // the id of the version it was built on
  private final StoreKeyFilter keys;
  private final ReadAheadCache readAhead = new ReadAheadCache();

  LoadedStore(ProviderCore provider, WorkerLease lease, int handle, long version, boolean readOnly,
      KeyCodec codec, KeyFilter keyFilter) {
    this.provider = provider;
    this.lease = lease;
    this.worker = lease.worker();
    this.handle = handle;
    this.version = version;
    this.readOnly = readOnly;
    this.codec = codec;
    this.keys = new StoreKeyFilter(keyFilter, provider.keyFilterMaxKeys(), codec);
  }

  boolean belongsTo(ProviderCore p) {
    return provider == p;
  }

  KeyCodec codec() {
    return codec;
  }

  synchronized boolean isUpdating() {
    return state == State.UPDATING;
  }

  /** Turns this read store into the write store; false if it can no longer be used. */
  synchronized boolean upgradeToWrite() {
    if (state != State.UPDATING) {
      return false;
    }
    readOnly = false;
    return true;
  }

  StateStoreId id() {
    return provider.stateStoreId();
  }

  long version() {
    return version;
  }

  // ---- reads ----

  UnsafeRow get(UnsafeRow key) {
    checkUpdating("get");
    byte[] storageKey = codec.storageKey(key, false);
    if (!keys.mayHold(storageKey)) {
      return null;
    }
    byte[] fetched = readAhead.get(storageKey);
    if (fetched != null) {
      return fetched == ReadAheadCache.ABSENT ? null : codec.valueRow(fetched, 0, fetched.length);
    }
    byte[] value;
    try {
      value = channel().get(handle, storageKey);
    } catch (RuntimeException e) {
      throw provider.failure("get", version, worker, e);
    }
    return value == null ? null : codec.valueRow(value, 0, value.length);
  }

  /** Every entry, in the worker's order; the caller closes the scan if it stops early. */
  Scan iterator() {
    checkUpdating("iterator");
    return scan(new byte[0]);
  }

  /** The entries whose key starts with {@code prefixKey}'s columns. */
  Scan prefixScan(UnsafeRow prefixKey) {
    checkUpdating("prefixScan");
    byte[] prefix = codec.scanPrefix(prefixKey);
    if (!keys.mayHold(prefix)) { // every key's scan prefix goes in with the key
      return Scan.EMPTY;
    }
    return scan(prefix);
  }

  /**
   * The rows of the version this store committed, read through a read store of that version that ends
   * with the scan (or with the task's lease). Spark 3.5's complete-mode aggregation reads every row after
   * its commit.
   */
  Scan committedRows() {
    long committed;
    String id;
    synchronized (this) {
      if (state != State.COMMITTED) {
        throw new IllegalStateException("cannot read the committed rows of " + provider.describe(version)
            + ": it is " + (state == State.UPDATING ? "not committed" : "aborted"));
      }
      committed = committedVersion;
      id = checkpointId.isDefined() ? checkpointId.get() : "";
    }
    LoadedStore reader = provider.open(committed, id, false, true);
    Scan rows = reader.iterator();
    return new Scan() {
      @Override
      public boolean hasNext() {
        boolean more = rows.hasNext();
        if (!more) {
          reader.release();
        }
        return more;
      }

      @Override
      public UnsafeRowPair next() {
        return rows.next();
      }

      @Override
      public void close() {
        rows.close();
        reader.release();
      }
    };
  }

  /** A scan of a store: its rows, and {@code close()} for a caller that stops before the end. */
  interface Scan extends java.util.Iterator<UnsafeRowPair>, AutoCloseable {
    Scan EMPTY = new Scan() {
      @Override
      public boolean hasNext() {
        return false;
      }

      @Override
      public UnsafeRowPair next() {
        throw new NoSuchElementException();
      }

      @Override
      public void close() {}
    };

    @Override
    void close();
  }

  private Scan scan(byte[] prefix) {
    JoinReadAhead ahead = prefix.length == 0
        ? JoinReadAhead.forFullScan(provider.stateStoreId(), provider.keySchema(), provider.valueSchema(), codec, lease)
        : null;
    KeyFilter.Builder feed = prefix.length == 0 ? keys.fullScanStarts() : null;
    ScanChunk first;
    try {
      first = channel().scanOpen(handle, prefix);
    } catch (RuntimeException e) {
      throw provider.failure("scan", version, worker, e);
    }
    ScanIterator it = new ScanIterator(first, feed, ahead);
    if (!first.done) {
      synchronized (this) {
        openScans.add(it);
      }
    }
    if (ahead != null) { // after the cursor is tracked: a failed fetch leaves it to be closed with the store
      ahead.chunk(first);
    }
    return it;
  }

  /**
   * Walks the chunks of one cursor. Rows point into the chunk's byte array (no per-row copy). The worker
   * scans a snapshot taken at SCAN_OPEN, so puts and removes sent meanwhile do not disturb it.
   */
  private final class ScanIterator implements Scan {
    private ScanChunk chunk;
    private int index;
    private int offset;
    private boolean closed;
    /** A full scan's filter in the making: every key passing by goes in; null for other scans. */
    private final KeyFilter.Builder feed;
    /** A join eviction pass's fetch of the values its chunks name; null for other scans. */
    private final JoinReadAhead ahead;

    ScanIterator(ScanChunk first, KeyFilter.Builder feed, JoinReadAhead ahead) {
      this.chunk = first;
      this.feed = feed;
      this.ahead = ahead;
      this.closed = first.done && first.count == 0;
      if (closed) {
        keys.fullScanEnded(feed);
      }
    }

    @Override
    public boolean hasNext() {
      while (!closed && index >= chunk.count) {
        if (chunk.done) {
          finished();
          keys.fullScanEnded(feed);
          return false;
        }
        try {
          chunk = channel().scanNext(handle, chunk.cursor);
        } catch (RuntimeException e) {
          finished();
          throw provider.failure("scan", version, worker, e);
        }
        index = 0;
        offset = 0;
        if (ahead != null) {
          ahead.chunk(chunk);
        }
      }
      return !closed;
    }

    @Override
    public UnsafeRowPair next() {
      if (!hasNext()) {
        throw new NoSuchElementException();
      }
      int klen = chunk.keyLengths[index];
      int vlen = chunk.valueLengths[index];
      if (feed != null) {
        keys.scanned(feed, chunk.data, offset, klen);
      }
      UnsafeRow key = codec.keyRow(chunk.data, offset, klen);
      UnsafeRow value = codec.valueRow(chunk.data, offset + klen, vlen);
      offset += klen + vlen;
      index++;
      return new UnsafeRowPair(key, value);
    }

    private void finished() {
      closed = true;
      synchronized (LoadedStore.this) {
        openScans.remove(this);
      }
    }

    /** Tells the worker to drop a cursor that has not reached its end. Never throws. */
    @Override
    public void close() {
      if (closed) {
        return;
      }
      boolean cursorOpen = !chunk.done;
      finished();
      if (cursorOpen) {
        try {
          worker.channel().scanClose(handle, chunk.cursor);
        } catch (RuntimeException e) {
          LOG.debug("sparkstate: cannot close a scan cursor of {}", provider.describe(version), e);
        }
      }
    }
  }

  /**
   * Fetches the values of {@code storageKeys} in one round trip for the gets that follow, in place of what
   * an earlier call fetched. Returns false, fetching nothing, when that earlier fetch answered no get: the
   * caller's guess of what comes next is wrong for this pass.
   */
  boolean fetchAhead(List<byte[]> storageKeys) {
    checkUpdating("get");
    if (!readAhead.worthFetching()) {
      return false;
    }
    byte[][] values;
    try {
      values = channel().getMany(handle, storageKeys);
    } catch (RuntimeException e) {
      throw provider.failure("get", version, worker, e);
    }
    readAhead.fetched(storageKeys, values);
    return true;
  }

  // ---- writes ----

  void put(UnsafeRow key, UnsafeRow value) {
    checkWritable("put");
    if (value == null) {
      throw new IllegalArgumentException("cannot put a null value into " + provider.describe(version));
    }
    byte[] storageKey = codec.storageKey(key, true);
    byte[] valueBytes = KeyCodec.valueBytes(value);
    wrote = true;
    readAhead.put(storageKey, valueBytes);
    keys.put(storageKey);
    try {
      channel().put(handle, storageKey, valueBytes);
    } catch (RuntimeException e) {
      throw provider.failure("put", version, worker, e);
    }
  }

  void remove(UnsafeRow key) {
    checkWritable("remove");
    byte[] storageKey = codec.storageKey(key, false);
    wrote = true;
    readAhead.remove(storageKey);
    try {
      channel().remove(handle, storageKey);
    } catch (RuntimeException e) {
      throw provider.failure("remove", version, worker, e);
    }
  }

  // ---- lifecycle ----

  long commit() {
    checkWritable("commit");
    closeOpenScans();
    JsonNode result;
    long waitMs;
    try {
      long t0 = System.nanoTime();
      channel().sync(handle);
      waitMs = (System.nanoTime() - t0) / 1_000_000;
      result = Json.parse(worker.control().commit(handle), "commit");
    } catch (RuntimeException e) {
      throw provider.failure("commit", version, worker, e);
    }
    long newVersion = result.path("version").asLong(-1);
    if (newVersion != version + 1) {
      throw new IllegalStateException(provider.describe(version) + ": the worker committed version "
          + newVersion + ", expected " + (version + 1));
    }
    KeyFilter filter;
    synchronized (this) {
      state = State.COMMITTED;
      readAhead.drop();
      committedVersion = newVersion;
      commitMetrics = result.get("metrics");
      commitWaitMs = waitMs;
      checkpointId = optionalText(result, "checkpointId");
      baseCheckpointId = optionalText(result, "baseCheckpointId");
      filter = keys.trusted();
    }
    provider.keyFilterCommitted(newVersion, checkpointId.isDefined() ? checkpointId.get() : "", filter);
    if (!lease.isTaskScoped()) {
      lease.release();
    }
    provider.afterCommit(newVersion);
    return newVersion;
  }

  void abort() {
    abortQuietly();
  }

  /** Read stores end here. Must not throw: Spark calls it from cleanup paths. */
  void release() {
    try {
      abortQuietly();
    } catch (Throwable e) {
      LOG.warn("sparkstate: release of {} failed", provider.describe(version), e);
    }
  }

  /**
   * Idempotent and tolerant of a failed commit or a dead worker: drops unsent writes, surfaces nothing,
   * and tells the worker to discard what it received. Also called when the lease is returned.
   */
  void abortQuietly() {
    synchronized (this) {
      if (state != State.UPDATING) {
        return;
      }
      state = State.ABORTED;
      readAhead.drop();
    }
    closeOpenScans();
    if (wrote && worker.isAlive()) {
      try {
        DataChannel channel = worker.channel();
        channel.discard(handle);
        if (!channel.isDirty()) {
          channel.sync(handle); // errors of earlier batches belong to the writes being discarded
        }
      } catch (RuntimeException e) {
        LOG.debug("sparkstate: sync before abort of {} failed", provider.describe(version), e);
      }
      try {
        worker.control().abort(handle);
      } catch (RuntimeException e) {
        LOG.warn("sparkstate: abort of {} failed: {}", provider.describe(version), e.getMessage());
      }
    }
    if (!lease.isTaskScoped()) {
      lease.release();
    }
  }

  private void closeOpenScans() {
    List<ScanIterator> scans;
    synchronized (this) {
      scans = new ArrayList<>(openScans);
    }
    for (ScanIterator scan : scans) {
      scan.close();
    }
  }

  synchronized boolean hasCommitted() {
    return state == State.COMMITTED;
  }

  StateStoreMetrics metrics() {
    State current;
    JsonNode cached;
    long filterBytes;
    Map<String, Long> countedHere;
    synchronized (this) {
      current = state;
      cached = commitMetrics;
      countedHere = Map.of(Metrics.FILTERED_GETS, keys.filteredGets(), Metrics.READ_AHEAD_GETS, readAhead.gets(),
          Metrics.COMMIT_WAIT_MS, commitWaitMs);
      filterBytes = keys.sizeInBytes();
    }
    // commit's "metrics" saves a call when it has the metrics() shape; otherwise ask the worker.
    if (current == State.COMMITTED && cached != null && cached.has("numKeys")) {
      return Metrics.fromJson(cached, countedHere, filterBytes);
    }
    if (current == State.ABORTED) {
      return Metrics.fromJson(null);
    }
    try {
      if (current == State.UPDATING) {
        channel().sync(handle);
      }
      return Metrics.fromJson(Json.parse(worker.control().metrics(handle), "metrics"), countedHere, filterBytes);
    } catch (RuntimeException e) {
      throw provider.failure("read metrics of", version, worker, e);
    }
  }

  /** The version this batch commits (checkpoint format v2's batch version). */
  synchronized long batchVersion() {
    return state == State.COMMITTED ? committedVersion : version + 1;
  }

  /** The committed attempt's id (checkpoint format v2), empty before the commit or without ids. */
  synchronized Option<String> checkpointId() {
    return checkpointId;
  }

  /** The id of the attempt this version was built on (checkpoint format v2). */
  synchronized Option<String> baseCheckpointId() {
    return baseCheckpointId;
  }

  private static Option<String> optionalText(JsonNode doc, String field) {
    JsonNode value = doc.get(field);
    return value == null || value.isNull() ? Option.empty() : Option.apply(value.asText());
  }

  // ---- guards ----

  private DataChannel channel() {
    lease.checkActive();
    return worker.channel();
  }

  private synchronized void checkUpdating(String op) {
    if (state != State.UPDATING) {
      throw new IllegalStateException("cannot " + op + " " + provider.describe(version) + ": it is already "
          + (state == State.COMMITTED ? "committed" : "aborted"));
    }
  }

  private void checkWritable(String op) {
    checkUpdating(op);
    if (readOnly) {
      throw new IllegalStateException("cannot " + op + " on the read-only " + provider.describe(version));
    }
  }
}
