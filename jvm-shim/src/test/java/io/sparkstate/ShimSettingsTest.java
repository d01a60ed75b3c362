package io.sparkstate;

import static io.sparkstate.ShimTests.check;
import static io.sparkstate.ShimTests.equal;
import static io.sparkstate.ShimTests.raises;

import com.fasterxml.jackson.databind.JsonNode;
import java.util.Map;

/** The shim's settings follow Python's declarations (settings.json in the jar), never its own copies. */
final class ShimSettingsTest {
  private static ShimSettings of(Map<String, String> raw) {
    return ShimSettings.of(raw, "python3");
  }

  public static void testDefaultsComeFromTheDeclarations() {
    ShimSettings s = of(Map.of());
    equal(ShimSettings.declaration(ShimSettings.TRANSPORT).get("default").asText(), s.transport, "transport");
    equal(ShimSettings.declaration(ShimSettings.START_TIMEOUT).get("default").asLong(), s.workerStartTimeoutMs,
        "start timeout");
    equal(ShimSettings.declaration(ShimSettings.HEARTBEAT_TIMEOUT).get("default").asLong(), s.heartbeatTimeoutMs,
        "heartbeat timeout");
    equal(ShimSettings.declaration(ShimSettings.STALL_TIMEOUT).get("default").asLong(), s.stallTimeoutMs,
        "stall timeout");
    equal(2 * Runtime.getRuntime().availableProcessors(), s.maxWorkers, "maxWorkers unset");
    equal(null, s.shmDir, "shmDir unset");
  }

  public static void testEveryKeyTheShimReadsIsDeclared() {
    for (String key : new String[] {ShimSettings.PYTHON_EXEC, ShimSettings.TRANSPORT, ShimSettings.START_TIMEOUT,
        ShimSettings.MAX_WORKERS, ShimSettings.HEARTBEAT_TIMEOUT, ShimSettings.STALL_TIMEOUT, ShimSettings.SHM_DIR}) {
      check(ShimSettings.DECLARED.containsKey(key), key + " is not declared in config.py");
    }
  }

  public static void testBoundsComeFromTheDeclarations() {
    for (String key : new String[] {ShimSettings.START_TIMEOUT, ShimSettings.HEARTBEAT_TIMEOUT,
        ShimSettings.STALL_TIMEOUT, ShimSettings.MAX_WORKERS}) {
      JsonNode d = ShimSettings.declaration(key);
      long min = d.get("minimum").asLong();
      of(Map.of(key, Long.toString(min)));
      IllegalArgumentException e = raises(IllegalArgumentException.class,
          () -> of(Map.of(key, Long.toString(min - 1))), key + " below its minimum");
      check(e.getMessage().contains(key) && e.getMessage().contains(d.get("valid").asText()), e.getMessage());
      raises(IllegalArgumentException.class, () -> of(Map.of(key, "soon")), key + " not a number");
    }
  }

  public static void testTimeoutsAboveTheirMaximumAreRefused() {
    // The JVM counts them in nanoseconds: an unbounded value would overflow into a negative limit.
    for (String key : new String[] {ShimSettings.START_TIMEOUT, ShimSettings.HEARTBEAT_TIMEOUT,
        ShimSettings.STALL_TIMEOUT}) {
      JsonNode d = ShimSettings.declaration(key);
      long max = d.get("maximum").asLong();
      check(max > 0 && max < Long.MAX_VALUE / 1_000_000L, key + " maximum " + max + " fits in nanoseconds");
      of(Map.of(key, Long.toString(max)));
      IllegalArgumentException e = raises(IllegalArgumentException.class,
          () -> of(Map.of(key, "10000000000000")), key + " above its maximum");
      check(e.getMessage().contains(key) && e.getMessage().contains(d.get("valid").asText()), e.getMessage());
    }
  }

  public static void testChoicesComeFromTheDeclarations() {
    for (JsonNode c : ShimSettings.declaration(ShimSettings.TRANSPORT).get("choices")) {
      equal(c.asText(), of(Map.of(ShimSettings.TRANSPORT, " " + c.asText().toUpperCase() + " ")).transport,
          "transport " + c);
    }
    IllegalArgumentException e = raises(IllegalArgumentException.class,
        () -> of(Map.of(ShimSettings.TRANSPORT, "carrier-pigeon")), "unknown transport");
    check(e.getMessage().contains("'carrier-pigeon'") && e.getMessage().contains("shm"), e.getMessage());
  }
}
