package io.sparkstate;

import java.util.Map;
import org.apache.hadoop.conf.Configuration;
import org.apache.spark.sql.execution.streaming.state.StateStoreConf;
import org.apache.spark.sql.execution.streaming.state.StateStoreCustomMetric;
import org.apache.spark.sql.execution.streaming.state.StateStoreId;
import org.apache.spark.sql.execution.streaming.state.StateStoreInstanceMetric;
import org.apache.spark.sql.execution.streaming.state.StateStoreMetrics;
import org.apache.spark.sql.execution.streaming.state.StateStoreProvider$;

/**
 * What differs in Spark 4.1 to 4.3's API below the provider and store classes: the metrics' constructors, the
 * query's run id, checkpoint format v2 and the reports after a commit. One class per line, same name and
 * methods, so the sources shared by every line call it without knowing the line.
 */
final class SparkApi {
  private SparkApi() {}

  static StateStoreCustomMetric sizeMetric(String name, String desc) {
    return SizeMetric.create(name, desc);
  }

  static StateStoreMetrics metrics(long numKeys, long memoryUsedBytes, Map<StateStoreCustomMetric, Object> custom) {
    return new StateStoreMetrics(numKeys, memoryUsedBytes, ScalaCollections.map(custom),
        scala.collection.immutable.Map$.MODULE$.<StateStoreInstanceMetric, Object>empty());
  }

  static String runId(Configuration conf) {
    return StateStoreProvider$.MODULE$.getRunId(conf);
  }

  static boolean checkpointIds(StateStoreConf conf) {
    return conf.enableStateStoreCheckpointIds();
  }

  static void afterCommit(StateStoreConf conf, Configuration hadoopConf, StateStoreId id, String runId, long version) {
    CoordinatorReports.afterCommit(conf, hadoopConf, id, runId, version);
  }
}
