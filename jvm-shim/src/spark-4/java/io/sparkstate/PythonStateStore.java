package io.sparkstate;

import org.apache.spark.sql.catalyst.expressions.UnsafeRow;
import org.apache.spark.sql.execution.streaming.state.KeyStateEncoderSpec;
import org.apache.spark.sql.execution.streaming.state.StateStore;
import org.apache.spark.sql.execution.streaming.state.StateStoreCheckpointInfo;
import org.apache.spark.sql.execution.streaming.state.StateStoreIterator;
import org.apache.spark.sql.execution.streaming.state.UnsafeRowPair;
import org.apache.spark.sql.types.StructType;
import scala.collection.Iterator;
import scala.runtime.BoxedUnit;

/**
 * Spark 4's {@code StateStore} over a {@link LoadedStore}: the default column family only, one value per
 * key. Declares the methods of every 4.x line (putList, mergeList and release from 4.1, the multi-value
 * scans and allColumnFamilyNames from 4.2), rejecting those sparkstate does not serve.
 */
final class PythonStateStore extends StoreOverLoaded implements StateStore {
  private static final String DEFAULT_CF = "default";

  PythonStateStore(LoadedStore store) {
    super(store);
  }

  @Override
  public UnsafeRow get(UnsafeRow key, String colFamilyName) {
    checkColumnFamily(colFamilyName);
    return store.get(key);
  }

  @Override
  public StateStoreIterator<UnsafeRowPair> iterator(String colFamilyName) {
    checkColumnFamily(colFamilyName);
    return iterator(store.iterator());
  }

  @Override
  public StateStoreIterator<UnsafeRowPair> prefixScan(UnsafeRow prefixKey, String colFamilyName) {
    checkColumnFamily(colFamilyName);
    return iterator(store.prefixScan(prefixKey));
  }

  private static StateStoreIterator<UnsafeRowPair> iterator(LoadedStore.Scan scan) {
    return new StateStoreIterator<>(ScalaCollections.iterator(scan), () -> {
      scan.close();
      return BoxedUnit.UNIT;
    });
  }

  @Override
  public void put(UnsafeRow key, UnsafeRow value, String colFamilyName) {
    checkColumnFamily(colFamilyName);
    store.put(key, value);
  }

  @Override
  public void remove(UnsafeRow key, String colFamilyName) {
    checkColumnFamily(colFamilyName);
    store.remove(key);
  }

  /** Spark 4.1 on: read stores end here. Must not throw: Spark calls it from cleanup paths. */
  public void release() {
    store.release();
  }

  @Override
  public StateStoreCheckpointInfo getStateStoreCheckpointInfo() {
    return new StateStoreCheckpointInfo(store.id().partitionId(), store.batchVersion(), store.checkpointId(),
        store.baseCheckpointId());
  }

  /** Spark 4.2 on. */
  public scala.collection.immutable.Set<String> allColumnFamilyNames() {
    return ScalaCollections.set(java.util.Set.of(DEFAULT_CF));
  }

  private static void checkColumnFamily(String name) {
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

  /** Spark 4.2 on. */
  public StateStoreIterator<UnsafeRowPair> prefixScanWithMultiValues(UnsafeRow prefixKey, String colFamilyName) {
    throw unsupported("multiple values per key (prefixScanWithMultiValues)");
  }

  /** Spark 4.2 on. */
  public StateStoreIterator<UnsafeRowPair> iteratorWithMultiValues(String colFamilyName) {
    throw unsupported("multiple values per key (iteratorWithMultiValues)");
  }

  /** Spark 4.1 on. */
  public void putList(UnsafeRow key, UnsafeRow[] values, String colFamilyName) {
    throw unsupported("multiple values per key (putList)");
  }

  @Override
  public void merge(UnsafeRow key, UnsafeRow value, String colFamilyName) {
    throw unsupported("merge");
  }

  /** Spark 4.1 on. */
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
