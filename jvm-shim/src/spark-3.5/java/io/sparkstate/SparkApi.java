package io.sparkstate;

import java.util.Map;
import org.apache.hadoop.conf.Configuration;
import org.apache.spark.sql.execution.streaming.state.StateStoreConf;
import org.apache.spark.sql.execution.streaming.state.StateStoreCustomMetric;
import org.apache.spark.sql.execution.streaming.state.StateStoreCustomSizeMetric;
import org.apache.spark.sql.execution.streaming.state.StateStoreId;
import org.apache.spark.sql.execution.streaming.state.StateStoreMetrics;

/**
 * What differs in Spark 3.5's API below the provider and store classes: the metrics' constructors, the
 * query's run id, checkpoint format v2 and the reports after a commit. One class per line, same name and
 * methods, so the sources shared by every line call it without knowing the line.
 */
final class SparkApi {
  private SparkApi() {}

  static StateStoreCustomMetric sizeMetric(String name, String desc) {
    return new StateStoreCustomSizeMetric(name, desc);
  }

  static StateStoreMetrics metrics(long numKeys, long memoryUsedBytes, Map<StateStoreCustomMetric, Object> custom) {
    return new StateStoreMetrics(numKeys, memoryUsedBytes, ScalaCollections.map(custom));
  }

  /** Spark 3.5 passes no query run id to its providers: the stores' writer identity goes without it. */
  static String runId(Configuration conf) {
    return null;
  }

  /**
   * Spark 3.5 has no checkpoint format v2; a query that asks for it (the setting Spark 4 reads) is refused
   * rather than run without it.
   */
  static boolean checkpointIds(StateStoreConf conf) {
    String asked = ScalaCollections.asJava(conf.sqlConfs()).get(CHECKPOINT_FORMAT_KEY);
    if (asked != null && !asked.trim().equals("1")) {
      throw new UnsupportedOperationException(CHECKPOINT_FORMAT_KEY + "=" + asked.trim() + ": checkpoint format "
          + "v2 needs Spark 4.0 or later; this Spark is 3.5");
    }
    return false;
  }

  private static final String CHECKPOINT_FORMAT_KEY = "spark.sql.streaming.stateStore.checkpointFormatVersion";

  /** Spark 3.5's coordinator takes no commit or snapshot reports from a provider. */
  static void afterCommit(StateStoreConf conf, Configuration hadoopConf, StateStoreId id, String runId, long version) {}
}
