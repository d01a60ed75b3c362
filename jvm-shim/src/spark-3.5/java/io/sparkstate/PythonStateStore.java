package io.sparkstate;

import org.apache.spark.sql.catalyst.expressions.UnsafeRow;
import org.apache.spark.sql.execution.streaming.state.StateStore;
import org.apache.spark.sql.execution.streaming.state.UnsafeRowPair;
import scala.collection.Iterator;

/**
 * Spark 3.5's {@code StateStore} over a {@link LoadedStore}. Its scans are plain Scala iterators with no
 * close: a scan left before its end is closed with the store, at commit or abort (a scan after the commit,
 * with the task's lease).
 */
final class PythonStateStore extends StoreOverLoaded implements StateStore {
  PythonStateStore(LoadedStore store) {
    super(store);
  }

  @Override
  public UnsafeRow get(UnsafeRow key) {
    return store.get(key);
  }

  /** After the commit too: Spark 3.5's complete-mode aggregation reads every row once it committed. */
  @Override
  public Iterator<UnsafeRowPair> iterator() {
    return ScalaCollections.iterator(store.hasCommitted() ? store.committedRows() : store.iterator());
  }

  @Override
  public Iterator<UnsafeRowPair> prefixScan(UnsafeRow prefixKey) {
    return ScalaCollections.iterator(store.prefixScan(prefixKey));
  }

  @Override
  public void put(UnsafeRow key, UnsafeRow value) {
    store.put(key, value);
  }

  @Override
  public void remove(UnsafeRow key) {
    store.remove(key);
  }
}
