package io.sparkstate;

import java.util.concurrent.locks.ReentrantReadWriteLock;
import org.apache.hadoop.conf.Configuration;
import org.apache.spark.sql.catalyst.expressions.UnsafeRow;
import org.apache.spark.sql.execution.streaming.state.KeyStateEncoderSpec;
import org.apache.spark.sql.execution.streaming.state.NoPrefixKeyStateEncoderSpec;
import org.apache.spark.sql.execution.streaming.state.PrefixKeyScanStateEncoderSpec;
import org.apache.spark.sql.execution.streaming.state.ReadStateStore;
import org.apache.spark.sql.execution.streaming.state.StateSchemaProvider;
import org.apache.spark.sql.execution.streaming.state.StateStore;
import org.apache.spark.sql.execution.streaming.state.StateStoreConf;
import org.apache.spark.sql.execution.streaming.state.StateStoreCustomMetric;
import org.apache.spark.sql.execution.streaming.state.StateStoreId;
import org.apache.spark.sql.execution.streaming.state.StateStoreProvider;
import org.apache.spark.sql.execution.streaming.state.SupportsFineGrainedReplay;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.util.NextIterator;
import scala.Enumeration;
import scala.Option;
import scala.Tuple4;

/**
 * Spark's entry point on Spark 4.0 to 4.3: Spark 4's provider API turned into {@link ProviderCore}'s calls.
 * It declares the methods of every 4.x line (a method a line lacks is never called there): {@code getStore}
 * with two arguments (4.0, 4.1) and four (4.2 on), the replay of 4.0 and of 4.1 on, the Scala trait fields
 * of 4.3. Compiled once per line against that line's jars, so each jar is checked against its own API.
 */
public final class PythonStateStoreProvider implements StateStoreProvider, SupportsFineGrainedReplay {
  private final ProviderCore core = new ProviderCore();

  // Scala trait fields of StateStoreProvider (4.3), set by $init$.
  private volatile boolean unloaded;
  private ReentrantReadWriteLock maintenanceLock;

  /** Cheap on purpose: the driver creates throw-away instances just to read supportedCustomMetrics. */
  public PythonStateStoreProvider() {
    SparkLine.requireRunningLine();
    StateStoreProvider.$init$(this);
  }

  public boolean unloaded() {
    return unloaded;
  }

  public void unloaded_$eq(boolean value) {
    unloaded = value;
  }

  public ReentrantReadWriteLock maintenanceLock() {
    return maintenanceLock;
  }

  public void org$apache$spark$sql$execution$streaming$state$StateStoreProvider$_setter_$maintenanceLock_$eq(
      ReentrantReadWriteLock lock) {
    maintenanceLock = lock;
  }

  @Override
  public void init(StateStoreId stateStoreId, StructType keySchema, StructType valueSchema,
      KeyStateEncoderSpec keyStateEncoderSpec, boolean useColumnFamilies, StateStoreConf storeConf,
      Configuration hadoopConf, boolean useMultipleValuesPerKey, Option<StateSchemaProvider> stateSchemaProvider) {
    if (useColumnFamilies) {
      throw new UnsupportedOperationException("sparkstate does not support column families (used by "
          + "transformWithState and join state formats 3/4); use RocksDBStateStoreProvider for those queries");
    }
    if (useMultipleValuesPerKey) {
      throw new UnsupportedOperationException("sparkstate does not support multiple values per key");
    }
    int numColsPrefixKey = 0;
    if (keyStateEncoderSpec instanceof PrefixKeyScanStateEncoderSpec) {
      numColsPrefixKey = ((PrefixKeyScanStateEncoderSpec) keyStateEncoderSpec).numColsPrefixKey();
      if (numColsPrefixKey <= 0) {
        throw new IllegalArgumentException("invalid numColsPrefixKey " + numColsPrefixKey + " for a key of "
            + keySchema.length() + " columns");
      }
    } else if (!(keyStateEncoderSpec instanceof NoPrefixKeyStateEncoderSpec)) {
      throw new UnsupportedOperationException("sparkstate supports NoPrefix and PrefixKeyScan key encoder "
          + "specs, not " + keyStateEncoderSpec);
    }
    core.init(stateStoreId, keySchema, valueSchema, numColsPrefixKey, storeConf, hadoopConf,
        SparkApi.checkpointIds(storeConf));
  }

  @Override
  public StateStoreId stateStoreId() {
    return core.stateStoreId();
  }

  /** Spark 4.2 on. Every commit is a full durable version, so forceSnapshotOnCommit needs no action. */
  public StateStore getStore(long version, Option<String> stateStoreCkptId, boolean forceSnapshotOnCommit,
      boolean loadEmpty) {
    return new PythonStateStore(core.open(version, idOf(stateStoreCkptId), loadEmpty, false));
  }

  /** Spark 4.0 and 4.1. */
  public StateStore getStore(long version, Option<String> stateStoreCkptId) {
    return getStore(version, stateStoreCkptId, false, false);
  }

  @Override
  public ReadStateStore getReadStore(long version, Option<String> stateStoreCkptId) {
    return new PythonStateStore(core.open(version, idOf(stateStoreCkptId), false, true));
  }

  /** Spark 4.2 on. */
  public StateStore upgradeReadStoreToWriteStore(ReadStateStore readStore, long version,
      Option<String> stateStoreCkptId, boolean forceSnapshotOnCommit) {
    if (readStore instanceof PythonStateStore && core.upgrade(((PythonStateStore) readStore).loaded(), version)) {
      return (PythonStateStore) readStore;
    }
    readStore.abort();
    return getStore(version, stateStoreCkptId, forceSnapshotOnCommit, false);
  }

  /** Spark 4.1. */
  public StateStore upgradeReadStoreToWriteStore(ReadStateStore readStore, long version,
      Option<String> stateStoreCkptId) {
    return upgradeReadStoreToWriteStore(readStore, version, stateStoreCkptId, false);
  }

  /** Spark 4.1 on: {@code snapshotStartBatchId} of the statestore source. */
  public StateStore replayStateFromSnapshot(long snapshotVersion, long endVersion, boolean readOnly,
      Option<String> snapshotVersionCkptId, Option<String> endVersionCkptId) {
    return new PythonStateStore(core.replay(snapshotVersion, endVersion, readOnly, idOf(snapshotVersionCkptId),
        idOf(endVersionCkptId)));
  }

  /** Spark 4.0. */
  public StateStore replayStateFromSnapshot(long snapshotVersion, long endVersion) {
    return replayStateFromSnapshot(snapshotVersion, endVersion, false, Option.empty(), Option.empty());
  }

  /** Spark 4.0. */
  public ReadStateStore replayReadStateFromSnapshot(long snapshotVersion, long endVersion) {
    return replayStateFromSnapshot(snapshotVersion, endVersion, true, Option.empty(), Option.empty());
  }

  /** Spark's change feed ({@code readChangeFeed} of the statestore source) of versions start..end. */
  public NextIterator<Tuple4<Enumeration.Value, UnsafeRow, UnsafeRow, Object>> getStateStoreChangeDataReader(
      long startVersion, long endVersion, Option<String> colFamilyNameOpt, Option<String> endVersionCkptId) {
    if (colFamilyNameOpt != null && colFamilyNameOpt.isDefined()) {
      throw new UnsupportedOperationException("sparkstate stores have no column families (asked for "
          + colFamilyNameOpt.get() + ")");
    }
    String path = core.changes(startVersion, endVersion, idOf(endVersionCkptId));
    return new ChangeFileReader(path, core.newCodec(), core.describe(endVersion));
  }

  /** Spark 4.0. */
  public NextIterator<Tuple4<Enumeration.Value, UnsafeRow, UnsafeRow, Object>> getStateStoreChangeDataReader(
      long startVersion, long endVersion, Option<String> colFamilyNameOpt) {
    return getStateStoreChangeDataReader(startVersion, endVersion, colFamilyNameOpt, Option.empty());
  }

  public void doSnapshotMaintenance() {
    core.doSnapshotMaintenance();
  }

  public void doCleanupMaintenance() {
    core.doCleanupMaintenance();
  }

  @Override
  public void doMaintenance() {
    core.doMaintenance();
  }

  @Override
  public scala.collection.immutable.Seq<StateStoreCustomMetric> supportedCustomMetrics() {
    return ScalaCollections.seq(Metrics.DECLARED);
  }

  @Override
  public void close() {
    core.close();
  }

  /** A checkpoint id for the worker: the attempt Spark recorded (format v2), or "" for none. */
  static String idOf(Option<String> ckptId) {
    return ckptId != null && ckptId.isDefined() ? ckptId.get() : "";
  }
}
