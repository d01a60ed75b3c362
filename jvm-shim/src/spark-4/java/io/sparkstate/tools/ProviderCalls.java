package io.sparkstate.tools;

import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.util.UUID;
import java.util.function.BiConsumer;
import org.apache.hadoop.conf.Configuration;
import org.apache.spark.sql.catalyst.expressions.UnsafeRow;
import org.apache.spark.sql.execution.streaming.state.KeyStateEncoderSpec;
import org.apache.spark.sql.execution.streaming.state.NoPrefixKeyStateEncoderSpec;
import org.apache.spark.sql.execution.streaming.state.PrefixKeyScanStateEncoderSpec;
import org.apache.spark.sql.execution.streaming.state.ReadStateStore;
import org.apache.spark.sql.execution.streaming.state.StateStore;
import org.apache.spark.sql.execution.streaming.state.StateStoreConf;
import org.apache.spark.sql.execution.streaming.state.StateStoreId;
import org.apache.spark.sql.execution.streaming.state.StateStoreIterator;
import org.apache.spark.sql.execution.streaming.state.StateStoreProvider;
import org.apache.spark.sql.execution.streaming.state.StateStoreProviderId;
import org.apache.spark.sql.execution.streaming.state.UnsafeRowPair;
import org.apache.spark.sql.types.StructType;
import scala.Option;

/**
 * The provider calls {@link StateCopy} makes, on Spark 4.0 to 4.3: providers take a key encoder spec and
 * column families, stores are read and written in the default column family, and under checkpoint format
 * v2 a read store is the attempt its checkpoint id names. Two calls changed within Spark 4: {@code getStore}
 * takes {@code loadEmpty} from 4.2 on (two arguments before), read stores end with {@code release()} from
 * 4.1 on ({@code abort()} before). Those are looked up by reflection, so one class serves every 4.x line.
 * The spark-3.5 folder has a class of the same name and methods for Spark 3.5.
 */
final class ProviderCalls {
  private static final Method GET_STORE_2 = method(StateStoreProvider.class, "getStore", long.class, Option.class);
  private static final Method RELEASE = method(ReadStateStore.class, "release");

  private ProviderCalls() {}

  /** A provider of {@code conf}'s class for the store {@code id}, initialized; {@code numColsPrefixKey} > 0
   * gives it a prefix-scan key encoder. */
  static StateStoreProvider open(StateStoreId id, StructType keySchema, StructType valueSchema, int numColsPrefixKey,
      StateStoreConf conf, Configuration hadoop) {
    KeyStateEncoderSpec encoder = numColsPrefixKey > 0
        ? new PrefixKeyScanStateEncoderSpec(keySchema, numColsPrefixKey)
        : new NoPrefixKeyStateEncoderSpec(keySchema);
    return StateStoreProvider.createAndInit(new StateStoreProviderId(id, UUID.randomUUID()), keySchema,
        valueSchema, encoder, false, conf, hadoop, false, Option.empty());
  }

  /** The read store at {@code version}; {@code checkpointId} names its attempt (format v2), null for none. */
  static ReadStateStore readStore(StateStoreProvider provider, long version, String checkpointId) {
    return provider.getReadStore(version, Option.apply(checkpointId));
  }

  /**
   * The write store at {@code version}; {@code loadEmpty} starts it empty: Spark's providers have it from
   * 4.2 on, sparkstate's on every 4.x line (its class declares the 4.2 method); else refused.
   */
  static StateStore writeStore(StateStoreProvider provider, long version, boolean loadEmpty) {
    Method withLoadEmpty = method(provider.getClass(), "getStore", long.class, Option.class, boolean.class,
        boolean.class);
    if (withLoadEmpty != null) {
      return (StateStore) invoke(withLoadEmpty, provider, version, Option.empty(), false, loadEmpty);
    }
    if (loadEmpty) {
      throw new UnsupportedOperationException("copying state into " + provider.getClass().getName()
          + " needs a store started empty at a version (getStore's loadEmpty), which Spark has from 4.2 on");
    }
    return (StateStore) invoke(GET_STORE_2, provider, version, Option.empty());
  }

  /** Every pair of the store's default column family, in the store's order; the scan is closed after. */
  static void forEachRow(ReadStateStore store, BiConsumer<UnsafeRow, UnsafeRow> action) {
    StateStoreIterator<UnsafeRowPair> rows = store.iterator(StateStore.DEFAULT_COL_FAMILY_NAME());
    try {
      while (rows.hasNext()) {
        UnsafeRowPair pair = rows.next();
        action.accept(pair.key(), pair.value());
      }
    } finally {
      rows.close();
    }
  }

  static void put(StateStore store, UnsafeRow key, UnsafeRow value) {
    store.put(key, value, StateStore.DEFAULT_COL_FAMILY_NAME());
  }

  /** Ends a read store: release() where Spark has it, abort() before. Never throws past a failure to end. */
  static void release(ReadStateStore store) {
    if (RELEASE != null) {
      invoke(RELEASE, store);
    } else {
      store.abort();
    }
  }

  /** The attempt id of the store's commit (checkpoint format v2), null if it has none. */
  static String committedCheckpointId(StateStore store) {
    Option<String> id = store.getStateStoreCheckpointInfo().stateStoreCkptId();
    return id.isDefined() ? id.get() : null;
  }

  private static Method method(Class<?> owner, String name, Class<?>... parameters) {
    try {
      return owner.getMethod(name, parameters);
    } catch (NoSuchMethodException absent) {
      return null;
    }
  }

  private static Object invoke(Method method, Object target, Object... args) {
    try {
      return method.invoke(target, args);
    } catch (InvocationTargetException e) {
      Throwable cause = e.getCause();
      if (cause instanceof RuntimeException) {
        throw (RuntimeException) cause;
      }
      if (cause instanceof Error) {
        throw (Error) cause;
      }
      throw new IllegalStateException(cause);
    } catch (IllegalAccessException e) {
      throw new IllegalStateException(e);
    }
  }
}
