package io.sparkstate;

import org.apache.hadoop.conf.Configuration;
import org.apache.spark.sql.execution.streaming.state.ReadStateStore;
import org.apache.spark.sql.execution.streaming.state.StateStore;
import org.apache.spark.sql.execution.streaming.state.StateStoreConf;
import org.apache.spark.sql.execution.streaming.state.StateStoreCustomMetric;
import org.apache.spark.sql.execution.streaming.state.StateStoreId;
import org.apache.spark.sql.execution.streaming.state.StateStoreProvider;
import org.apache.spark.sql.types.StructType;

/**
 * Spark's entry point on Spark 3.5: its provider API (no column families, no checkpoint ids, no change
 * feed or snapshot replay, the prefix-scan column count passed as an int) turned into {@link ProviderCore}'s
 * calls.
 */
public final class PythonStateStoreProvider implements StateStoreProvider {
  private final ProviderCore core = new ProviderCore();

  /** Cheap on purpose: the driver creates throw-away instances just to read supportedCustomMetrics. */
  public PythonStateStoreProvider() {
    SparkLine.requireRunningLine();
    StateStoreProvider.$init$(this);
  }

  @Override
  public void init(StateStoreId stateStoreId, StructType keySchema, StructType valueSchema, int numColsPrefixKey,
      StateStoreConf storeConf, Configuration hadoopConf) {
    core.init(stateStoreId, keySchema, valueSchema, numColsPrefixKey, storeConf, hadoopConf,
        SparkApi.checkpointIds(storeConf));
  }

  @Override
  public StateStoreId stateStoreId() {
    return core.stateStoreId();
  }

  @Override
  public StateStore getStore(long version) {
    return getStore(version, false);
  }

  /**
   * The write store at {@code version}; {@code loadEmpty} starts it empty whatever the checkpoint holds.
   * Spark 3.5's API has no such call (Spark 4.2's {@code getStore} takes {@code loadEmpty}): {@code sparkstate
   * migrate}'s copy job calls it (tools.ProviderCalls) to fill a store with another provider's rows.
   */
  public StateStore getStore(long version, boolean loadEmpty) {
    return new PythonStateStore(core.open(version, "", loadEmpty, false));
  }

  @Override
  public ReadStateStore getReadStore(long version) {
    return new PythonStateStore(core.open(version, "", false, true));
  }

  @Override
  public void doMaintenance() {
    core.doMaintenance();
  }

  @Override
  public scala.collection.Seq<StateStoreCustomMetric> supportedCustomMetrics() {
    return ScalaCollections.seq(Metrics.DECLARED);
  }

  @Override
  public void close() {
    core.close();
  }
}
