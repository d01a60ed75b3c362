package io.sparkstate;

import org.apache.spark.sql.execution.streaming.state.StateStoreCustomMetric;
import org.apache.spark.sql.execution.streaming.state.StateStoreCustomSizeMetric;

/** A size metric as Spark 4.3 constructs it (its third argument: not a snapshot metric). */
final class SizeMetric {
  private SizeMetric() {}

  static StateStoreCustomMetric create(String name, String desc) {
    return new StateStoreCustomSizeMetric(name, desc, false);
  }
}
