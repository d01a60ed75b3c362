package io.sparkstate.tools;

import io.sparkstate.PythonStateStoreProvider;
import java.util.UUID;
import java.util.function.BiConsumer;
import org.apache.hadoop.conf.Configuration;
import org.apache.spark.sql.catalyst.expressions.UnsafeRow;
import org.apache.spark.sql.execution.streaming.state.ReadStateStore;
import org.apache.spark.sql.execution.streaming.state.StateStore;
import org.apache.spark.sql.execution.streaming.state.StateStoreConf;
import org.apache.spark.sql.execution.streaming.state.StateStoreId;
import org.apache.spark.sql.execution.streaming.state.StateStoreProvider;
import org.apache.spark.sql.execution.streaming.state.StateStoreProviderId;
import org.apache.spark.sql.execution.streaming.state.UnsafeRowPair;
import org.apache.spark.sql.types.StructType;
import scala.collection.Iterator;

/**
 * The provider calls {@link StateCopy} makes, on Spark 3.5: providers take the prefix-scan column count as
 * an int, stores have no column families and no checkpoint ids, scans are plain Scala iterators, and read
 * stores end with {@code abort()}. Spark's providers cannot start a write store empty at a version on 3.5;
 * sparkstate's provider can ({@link PythonStateStoreProvider#getStore(long, boolean)}). The spark-4 folder
 * has a class of the same name and methods for Spark 4.
 */
final class ProviderCalls {
  private ProviderCalls() {}

  /** A provider of {@code conf}'s class for the store {@code id}, initialized. */
  static StateStoreProvider open(StateStoreId id, StructType keySchema, StructType valueSchema, int numColsPrefixKey,
      StateStoreConf conf, Configuration hadoop) {
    return StateStoreProvider.createAndInit(new StateStoreProviderId(id, UUID.randomUUID()), keySchema,
        valueSchema, numColsPrefixKey, conf, hadoop);
  }

  /** The read store at {@code version}; Spark 3.5 has no checkpoint ids, so {@code checkpointId} must be null. */
  static ReadStateStore readStore(StateStoreProvider provider, long version, String checkpointId) {
    if (checkpointId != null) {
      throw new UnsupportedOperationException("reading the attempt " + checkpointId + " of version " + version
          + " needs checkpoint format v2, which Spark has from 4.0 on");
    }
    return provider.getReadStore(version);
  }

  /**
   * The write store at {@code version}; {@code loadEmpty} starts it empty, which on Spark 3.5 only
   * sparkstate's provider does; else refused.
   */
  static StateStore writeStore(StateStoreProvider provider, long version, boolean loadEmpty) {
    if (!loadEmpty) {
      return provider.getStore(version);
    }
    if (provider instanceof PythonStateStoreProvider) {
      return ((PythonStateStoreProvider) provider).getStore(version, true);
    }
    throw new UnsupportedOperationException("copying state into " + provider.getClass().getName()
        + " needs a store started empty at a version (getStore's loadEmpty), which Spark has from 4.2 on");
  }

  /** Every pair of the store, in the store's order. */
  static void forEachRow(ReadStateStore store, BiConsumer<UnsafeRow, UnsafeRow> action) {
    Iterator<UnsafeRowPair> rows = store.iterator();
    while (rows.hasNext()) {
      UnsafeRowPair pair = rows.next();
      action.accept(pair.key(), pair.value());
    }
  }

  static void put(StateStore store, UnsafeRow key, UnsafeRow value) {
    store.put(key, value);
  }

  /** Ends a read store (Spark 3.5 has no release()). */
  static void release(ReadStateStore store) {
    store.abort();
  }

  /** Spark 3.5 has no checkpoint ids: always null. */
  static String committedCheckpointId(StateStore store) {
    return null;
  }
}
