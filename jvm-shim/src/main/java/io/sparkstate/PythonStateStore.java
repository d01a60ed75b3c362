package io.sparkstate;

import com.fasterxml.jackson.databind.JsonNode;
import io.sparkstate.channel.DataChannel;
import io.sparkstate.channel.ScanChunk;
import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.NoSuchElementException;
import java.util.Set;
import org.apache.spark.sql.catalyst.expressions.UnsafeRow;
import org.apache.spark.sql.execution.streaming.state.KeyStateEncoderSpec;
import org.apache.spark.sql.execution.streaming.state.StateStore;
import org.apache.spark.sql.execution.streaming.state.StateStoreCheckpointInfo;
import org.apache.spark.sql.execution.streaming.state.StateStoreId;
import org.apache.spark.sql.execution.streaming.state.StateStoreIterator;
import org.apache.spark.sql.execution.streaming.state.StateStoreMetrics;
import org.apache.spark.sql.execution.streaming.state.UnsafeRowPair;
import org.apache.spark.sql.types.StructType;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import scala.Option;
import scala.collection.Iterator;
import scala.jdk.javaapi.CollectionConverters;
import scala.runtime.BoxedUnit;

/**
 * One loaded version of a store, for one task: a thin handle on the store open in the leased worker.
 * Puts and removes are buffered on the data channel; get is one round trip; scans stream chunks.
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
final class PythonStateStore implements StateStore {
  private static final Logger LOG = LoggerFactory.getLogger(PythonStateStore.class);
  private static final String DEFAULT_CF = "default";

  private enum State { UPDATING, COMMITTED, ABORTED }

  private final PythonStateStoreProvider provider;
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
  private Option<String> checkpointId = Option.empty();      // the committed attempt's id (format v2)
  private Option<String> baseCheckpointId = Option.empty();  // the id of the version it was built on
  private final StoreKeyFilter keys;
  private final ReadAheadCache readAhead = new ReadAheadCache();

  PythonStateStore(PythonStateStoreProvider provider, WorkerLease lease, int handle, long version, boolean readOnly,
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

  boolean belongsTo(PythonStateStoreProvider p) {
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

  @Override
  public StateStoreId id() {
    return provider.stateStoreId();
  }

  @Override
  public long version() {
    return version;
  }

  // ---- reads ----

  @Override
  public UnsafeRow get(UnsafeRow key, String colFamilyName) {
    checkColumnFamily(colFamilyName);
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

  @Override
  public StateStoreIterator<UnsafeRowPair> iterator(String colFamilyName) {
    checkColumnFamily(colFamilyName);
    checkUpdating("iterator");
    return scan(new byte[0]);
  }

  @Override
  public StateStoreIterator<UnsafeRowPair> prefixScan(UnsafeRow prefixKey, String colFamilyName) {
    checkColumnFamily(colFamilyName);
    checkUpdating("prefixScan");
    byte[] prefix = codec.scanPrefix(prefixKey);
    if (!keys.mayHold(prefix)) { // every key's scan prefix goes in with the key
      return new StateStoreIterator<>(scala.collection.Iterator$.MODULE$.<UnsafeRowPair>empty(),
          () -> BoxedUnit.UNIT);
    }
    return scan(prefix);
  }

  private StateStoreIterator<UnsafeRowPair> scan(byte[] prefix) {
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
    return new StateStoreIterator<>(CollectionConverters.asScala(it), () -> {
      it.close();
      return BoxedUnit.UNIT;
    });
  }

  /**
   * Walks the chunks of one cursor. Rows point into the chunk's byte array (no per-row copy). The worker
   * scans a snapshot taken at SCAN_OPEN, so puts and removes sent meanwhile do not disturb it.
   */
  private final class ScanIterator implements java.util.Iterator<UnsafeRowPair> {
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
      synchronized (PythonStateStore.this) {
        openScans.remove(this);
      }
    }

    /** Tells the worker to drop a cursor that has not reached its end. Never throws. */
    void close() {
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

  @Override
  public void put(UnsafeRow key, UnsafeRow value, String colFamilyName) {
    checkColumnFamily(colFamilyName);
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

  @Override
  public void remove(UnsafeRow key, String colFamilyName) {
    checkColumnFamily(colFamilyName);
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

  @Override
  public long commit() {
    checkWritable("commit");
    closeOpenScans();
    JsonNode result;
    try {
      channel().sync(handle);
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
      checkpointId = optionalText(result, "checkpointId");
      baseCheckpointId = optionalText(result, "baseCheckpointId");
      filter = keys.trusted();
    }
    provider.keyFilterCommitted(newVersion, checkpointId, filter);
    if (!lease.isTaskScoped()) {
      lease.release();
    }
    provider.afterCommit(newVersion);
    return newVersion;
  }

  @Override
  public void abort() {
    abortQuietly();
  }

  /** Read stores end here. Must not throw: Spark calls it from cleanup paths. */
  @Override
  public void release() {
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

  @Override
  public synchronized boolean hasCommitted() {
    return state == State.COMMITTED;
  }

  @Override
  public StateStoreMetrics metrics() {
    State current;
    JsonNode cached;
    long filtered;
    long aheadGets;
    long filterBytes;
    synchronized (this) {
      current = state;
      cached = commitMetrics;
      filtered = keys.filteredGets();
      aheadGets = readAhead.gets();
      filterBytes = keys.sizeInBytes();
    }
    // commit's "metrics" saves a call when it has the metrics() shape; otherwise ask the worker.
    if (current == State.COMMITTED && cached != null && cached.has("numKeys")) {
      return Metrics.fromJson(cached, filtered, aheadGets, filterBytes);
    }
    if (current == State.ABORTED) {
      return Metrics.fromJson(null);
    }
    try {
      if (current == State.UPDATING) {
        channel().sync(handle);
      }
      return Metrics.fromJson(Json.parse(worker.control().metrics(handle), "metrics"), filtered, aheadGets,
          filterBytes);
    } catch (RuntimeException e) {
      throw provider.failure("read metrics of", version, worker, e);
    }
  }

  @Override
  public synchronized StateStoreCheckpointInfo getStateStoreCheckpointInfo() {
    long batchVersion = state == State.COMMITTED ? committedVersion : version + 1;
    return new StateStoreCheckpointInfo(provider.stateStoreId().partitionId(), batchVersion, checkpointId,
        baseCheckpointId);
  }

  private static Option<String> optionalText(JsonNode doc, String field) {
    JsonNode value = doc.get(field);
    return value == null || value.isNull() ? Option.empty() : Option.apply(value.asText());
  }

  @Override
  public scala.collection.immutable.Set<String> allColumnFamilyNames() {
    return CollectionConverters.asScala(java.util.Set.of(DEFAULT_CF)).toSet();
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

  private void checkColumnFamily(String name) {
    if (!DEFAULT_CF.equals(name)) {
      throw new UnsupportedOperationException("sparkstate has only the default column family, not '" + name + "'");
    }
  }

  private static UnsupportedOperationException unsupported(String what) {
    return new UnsupportedOperationException("sparkstate does not support " + what + " (used by "
        + "transformWithState and join state formats 3/4, which Spark reserves for RocksDBStateStoreProvider)");
  }

  // ---- features of column families and multiple values per key: rejected ----

  @Override
  public Iterator<UnsafeRow> valuesIterator(UnsafeRow key, String colFamilyName) {
    throw unsupported("multiple values per key (valuesIterator)");
  }

  @Override
  public StateStoreIterator<UnsafeRowPair> prefixScanWithMultiValues(UnsafeRow prefixKey, String colFamilyName) {
    throw unsupported("multiple values per key (prefixScanWithMultiValues)");
  }

  @Override
  public StateStoreIterator<UnsafeRowPair> iteratorWithMultiValues(String colFamilyName) {
    throw unsupported("multiple values per key (iteratorWithMultiValues)");
  }

  @Override
  public void putList(UnsafeRow key, UnsafeRow[] values, String colFamilyName) {
    throw unsupported("multiple values per key (putList)");
  }

  @Override
  public void merge(UnsafeRow key, UnsafeRow value, String colFamilyName) {
    throw unsupported("merge");
  }

  @Override
  public void mergeList(UnsafeRow key, UnsafeRow[] values, String colFamilyName) {
    throw unsupported("mergeList");
  }

  @Override
  public boolean removeColFamilyIfExists(String colFamilyName) {
    throw unsupported("column families (removeColFamilyIfExists)");
  }

  @Override
  public void createColFamilyIfAbsent(String colFamilyName, StructType keySchema, StructType valueSchema,
      KeyStateEncoderSpec keyStateEncoderSpec, boolean useMultipleValuesPerKey, boolean isInternal) {
    throw unsupported("column families (createColFamilyIfAbsent)");
  }
}
