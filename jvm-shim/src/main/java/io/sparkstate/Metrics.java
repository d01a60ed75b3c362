package io.sparkstate;

import com.fasterxml.jackson.databind.JsonNode;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.apache.spark.sql.execution.streaming.state.StateStoreCustomMetric;
import org.apache.spark.sql.execution.streaming.state.StateStoreCustomSumMetric;
import org.apache.spark.sql.execution.streaming.state.StateStoreCustomTimingMetric;
import org.apache.spark.sql.execution.streaming.state.StateStoreMetrics;

/**
 * The custom metrics sparkstate declares to Spark and the mapping from the {@code custom} map Python
 * reports. Spark builds its SQL metrics from {@code supportedCustomMetrics()} of a fresh provider, so the
 * list is static; names Python reports but Spark was not told about are dropped, declared names Python
 * leaves out are reported as 0.
 */
final class Metrics {
  /** Counted in the JVM (LoadedStore), not reported by Python. */
  static final String FILTERED_GETS = "sparkstateFilteredGets";
  static final String READ_AHEAD_GETS = "sparkstateReadAheadGets";
  static final String COMMIT_WAIT_MS = "sparkstateCommitWaitMs";
  static final List<StateStoreCustomMetric> DECLARED = List.of(
      new StateStoreCustomTimingMetric("sparkstateCommitMs", "sparkstate: time to commit a version"),
      new StateStoreCustomTimingMetric(COMMIT_WAIT_MS,
          "sparkstate: time the commit waited for the worker to apply the batch's last buffered writes"),
      new StateStoreCustomTimingMetric("sparkstateLoadMs", "sparkstate: time to load a version"),
      new StateStoreCustomSumMetric("sparkstateCheckpointLoads",
          "sparkstate: loads that restored a store from the checkpoint instead of reusing it live"),
      new StateStoreCustomTimingMetric("sparkstateFlushMs", "sparkstate: time to flush writes to the backend"),
      new StateStoreCustomTimingMetric("sparkstateUploadMs", "sparkstate: time to upload checkpoint files"),
      new StateStoreCustomSumMetric("sparkstateFilesUploaded", "sparkstate: checkpoint files uploaded"),
      new StateStoreCustomSumMetric("sparkstateFilesReused", "sparkstate: checkpoint files reused from earlier versions"),
      SparkApi.sizeMetric("sparkstateBytesUploaded", "sparkstate: bytes uploaded to the checkpoint"),
      SparkApi.sizeMetric("sparkstateCheckpointBytes", "sparkstate: size of the committed version"),
      SparkApi.sizeMetric("sparkstateWorkerRssBytes",
          "sparkstate: resident memory of the store worker processes (each store's share of its worker's)"),
      new StateStoreCustomSumMetric("sparkstateTtlExpiredKeys",
          "sparkstate: keys idle-state expiry deleted from the store in the batch"),
      new StateStoreCustomSumMetric(FILTERED_GETS,
          "sparkstate: gets and prefix scans of absent keys answered by the shim's key filter, without the worker"),
      new StateStoreCustomSumMetric(READ_AHEAD_GETS,
          "sparkstate: gets answered from values fetched ahead in one round trip (a join's eviction pass)"));

  private Metrics() {}

  /** Builds Spark metrics from {@code {"numKeys", "memoryUsedBytes", "custom": {name: long}}}. */
  static StateStoreMetrics fromJson(JsonNode json) {
    return fromJson(json, Map.of(), 0);
  }

  /**
   * As {@link #fromJson(JsonNode)}, plus what the shim itself counts: {@code countedHere} by metric name
   * (its filtered gets, the gets its read-ahead answered, the commit's wait), and its filter's bytes.
   */
  static StateStoreMetrics fromJson(JsonNode json, Map<String, Long> countedHere, long keyFilterBytes) {
    JsonNode custom = json == null ? null : json.get("custom");
    Map<StateStoreCustomMetric, Object> values = new LinkedHashMap<>();
    for (StateStoreCustomMetric m : DECLARED) {
      JsonNode v = custom == null ? null : custom.get(m.name());
      Long here = countedHere.get(m.name());
      values.put(m, here != null ? here : v != null && v.canConvertToLong() ? v.asLong() : 0L);
    }
    return SparkApi.metrics(json == null ? 0L : json.path("numKeys").asLong(0),
        (json == null ? 0L : json.path("memoryUsedBytes").asLong(0)) + keyFilterBytes, values);
  }
}
