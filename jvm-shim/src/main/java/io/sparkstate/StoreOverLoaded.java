package io.sparkstate;

import org.apache.spark.sql.execution.streaming.state.StateStoreId;
import org.apache.spark.sql.execution.streaming.state.StateStoreMetrics;

/**
 * The part of Spark's {@code StateStore} whose methods are the same on every Spark line, answered by a
 * {@link LoadedStore}. Each line's {@code PythonStateStore} extends it and implements that line's
 * interface: these public methods satisfy the interface's methods of the same signature.
 */
abstract class StoreOverLoaded {
  final LoadedStore store;

  StoreOverLoaded(LoadedStore store) {
    this.store = store;
  }

  LoadedStore loaded() {
    return store;
  }

  public StateStoreId id() {
    return store.id();
  }

  public long version() {
    return store.version();
  }

  public long commit() {
    return store.commit();
  }

  public void abort() {
    store.abort();
  }

  public boolean hasCommitted() {
    return store.hasCommitted();
  }

  public StateStoreMetrics metrics() {
    return store.metrics();
  }
}
