package io.sparkstate;

import io.sparkstate.channel.ScanChunk;
import java.util.ArrayList;
import java.util.List;
import org.apache.spark.sql.catalyst.expressions.UnsafeRow;
import org.apache.spark.sql.execution.streaming.state.StateStoreId;
import org.apache.spark.sql.types.LongType;
import org.apache.spark.sql.types.StructType;

/**
 * A stream-stream join's eviction pass, read ahead. Spark's join state manager (state format 2) keeps two
 * stores per side: {@code <side>-keyToNumValues} (key → how many values) and
 * {@code <side>-keyWithIndexToValue} ((key, index) → value). Evicting by value, it scans the first and,
 * for each key, gets each index of the second one at a time: a round trip to the worker per stored value.
 * Each chunk of that scan names all of those gets, so this fetches them with one GET_MANY per chunk into
 * the second store's read-ahead, where the gets then find them ({@link LoadedStore#fetchAhead}). A
 * pass that does not get them (eviction by key removes values without reading them) turns this off after
 * one chunk.
 */
final class JoinReadAhead {
  static final String COUNTS_SUFFIX = "keyToNumValues";
  /** Keys fetched per chunk at most: bounds the read-ahead's memory and the frame's size. */
  static final int MAX_KEYS = 4096;

  private final KeyCodec countsCodec;
  private final LoadedStore values;
  private boolean active = true;

  private JoinReadAhead(KeyCodec countsCodec, LoadedStore values) {
    this.countsCodec = countsCodec;
    this.values = values;
  }

  /**
   * For a full scan of {@code counts}: the read-ahead into its side's keyWithIndexToValue store, when
   * {@code counts} is a join's keyToNumValues store and that store, keyed by the same columns and an
   * index, is open in the same task; else null.
   */
  static JoinReadAhead forFullScan(StateStoreId countsId, StructType countsKeySchema, StructType countsValueSchema,
      KeyCodec countsCodec, WorkerLease lease) {
    String name = countsId.storeName();
    if (!lease.isTaskScoped() || !name.endsWith(COUNTS_SUFFIX) || countsValueSchema.length() != 1
        || !(countsValueSchema.fields()[0].dataType() instanceof LongType)) {
      return null;
    }
    String valuesName = name.substring(0, name.length() - COUNTS_SUFFIX.length()) + KeyCodec.JOIN_INDEXED_STORE_SUFFIX;
    StateStoreId valuesId = new StateStoreId(countsId.checkpointRootLocation(), countsId.operatorId(),
        countsId.partitionId(), valuesName);
    LoadedStore values = lease.openStore(valuesId);
    if (values == null || !values.codec().indexesKeysOf(countsKeySchema)) {
      return null;
    }
    return new JoinReadAhead(countsCodec, values);
  }

  /** Fetches the values of every key in {@code chunk} (a chunk of the keyToNumValues scan). */
  void chunk(ScanChunk chunk) {
    if (!active || chunk.count == 0) {
      return;
    }
    KeyCodec valuesCodec = values.codec();
    List<byte[]> keys = new ArrayList<>();
    int offset = 0;
    for (int i = 0; i < chunk.count && keys.size() < MAX_KEYS; i++) {
      int klen = chunk.keyLengths[i];
      int vlen = chunk.valueLengths[i];
      UnsafeRow key = countsCodec.keyRow(chunk.data, offset, klen);
      long count = countsCodec.valueRow(chunk.data, offset + klen, vlen).getLong(0);
      for (long index = 0; index < count && keys.size() < MAX_KEYS; index++) {
        keys.add(valuesCodec.indexedStorageKey(key, index));
      }
      offset += klen + vlen;
    }
    if (!keys.isEmpty()) {
      active = values.fetchAhead(keys);
    }
  }
}
