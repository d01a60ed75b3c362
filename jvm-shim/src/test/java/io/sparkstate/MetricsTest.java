package io.sparkstate;

import static io.sparkstate.ShimTests.check;
import static io.sparkstate.ShimTests.equal;

import java.util.Map;
import org.apache.spark.sql.execution.streaming.state.StateStoreCustomMetric;
import org.apache.spark.sql.execution.streaming.state.StateStoreMetrics;

/** The metrics the shim counts itself (filtered gets, read-ahead gets, the commit's wait) beside Python's. */
final class MetricsTest {
  private static long value(StateStoreMetrics metrics, String name) {
    for (StateStoreCustomMetric m : Metrics.DECLARED) {
      if (m.name().equals(name)) {
        return ((Number) metrics.customMetrics().apply(m)).longValue();
      }
    }
    throw new AssertionError(name + " is not declared");
  }

  public static void testWhatTheShimCountsTakesThePlaceOfPythonsFigure() {
    StateStoreMetrics m = Metrics.fromJson(Json.parse("{\"numKeys\": 3, \"memoryUsedBytes\": 10, \"custom\": "
        + "{\"sparkstateCommitMs\": 7, \"sparkstateCommitWaitMs\": 99}}", "metrics"),
        Map.of(Metrics.COMMIT_WAIT_MS, 5L, Metrics.FILTERED_GETS, 2L), 4);
    equal(7L, value(m, "sparkstateCommitMs"), "Python's own figure");
    equal(5L, value(m, Metrics.COMMIT_WAIT_MS), "the shim's wait, not Python's");
    equal(2L, value(m, Metrics.FILTERED_GETS), "the shim's filtered gets");
    equal(0L, value(m, Metrics.READ_AHEAD_GETS), "declared, reported by nobody: 0");
    equal(3L, m.numKeys(), "keys");
    equal(14L, m.memoryUsedBytes(), "Python's memory plus the key filter's bytes");
  }

  public static void testEveryMetricTheShimCountsIsDeclared() {
    for (String name : new String[] {Metrics.COMMIT_WAIT_MS, Metrics.FILTERED_GETS, Metrics.READ_AHEAD_GETS}) {
      check(Metrics.DECLARED.stream().anyMatch(m -> m.name().equals(name)), name + " is declared to Spark");
    }
  }
}
