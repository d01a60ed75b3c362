package io.sparkstate;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.io.InputStream;
import java.util.HashMap;
import java.util.Map;
import java.util.TreeMap;
import org.apache.spark.SparkEnv;
import org.apache.spark.sql.execution.streaming.state.StateStoreConf;
import scala.Option;

/**
 * The few settings the JVM side itself needs (interpreter, transport, timeouts, pool size, shm
 * directory), plus every explicitly set {@code spark.sql.streaming.stateStore.sparkstate.*} key, which is
 * passed to Python untouched: Python (sparkstate.config) owns validation of the full set.
 *
 * <p>Defaults, bounds and choices are not written here: the build puts Python's declarations
 * ({@code config.DECLARATIONS}) into the jar as {@code settings.json}, read once, so the two sides cannot
 * disagree on a key, a default or a range.
 */
final class ShimSettings {
  static final String PREFIX = "spark.sql.streaming.stateStore.sparkstate.";
  static final String PYTHON_EXEC = PREFIX + "pythonExec";
  static final String TRANSPORT = PREFIX + "transport";
  static final String START_TIMEOUT = PREFIX + "workerStartTimeoutMs";
  static final String MAX_WORKERS = PREFIX + "maxWorkers";
  static final String HEARTBEAT_TIMEOUT = PREFIX + "workerHeartbeatTimeoutMs";
  static final String STALL_TIMEOUT = PREFIX + "workerStallTimeoutMs";
  static final String SHM_DIR = PREFIX + "shmDir";
  static final String KEY_FILTER_MAX_KEYS = PREFIX + "keyFilter.maxKeys";
  static final String EMBEDDED = "embedded";
  static final String SHM = "shm";

  /** Python's declarations by full key (see the class comment). */
  static final Map<String, JsonNode> DECLARED = loadDeclarations();

  final Map<String, String> all;
  final String pythonExec;
  final String transport;
  final long workerStartTimeoutMs;
  /** Worker processes the pool may grow to, to keep stores on their workers (WorkerPool). */
  final int maxWorkers;
  /** A worker process whose heartbeat stops this long is hung and killed (WorkerWatchdog). */
  final long heartbeatTimeoutMs;
  /** A call during which the worker reports no progress this long is stuck; the worker is killed. */
  final long stallTimeoutMs;
  /** Where shm segments are created; null: /dev/shm when writable, else java.io.tmpdir. */
  final String shmDir;
  /** Keys a store's {@link KeyFilter} may hold; 0: no filter, every get goes to the worker. */
  final long keyFilterMaxKeys;

  private ShimSettings(Map<String, String> all, String pythonExec) {
    this.all = all;
    this.pythonExec = pythonExec;
    this.transport = choice(all, TRANSPORT);
    this.workerStartTimeoutMs = integer(all, START_TIMEOUT, 0);
    this.heartbeatTimeoutMs = integer(all, HEARTBEAT_TIMEOUT, 0);
    this.stallTimeoutMs = integer(all, STALL_TIMEOUT, 0);
    this.keyFilterMaxKeys = integer(all, KEY_FILTER_MAX_KEYS, 0);
    // Unset: twice the JVM's processors (Python has no default to give: it does not know the executor).
    this.maxWorkers = (int) Math.min(Integer.MAX_VALUE,
        integer(all, MAX_WORKERS, 2L * Runtime.getRuntime().availableProcessors()));
    String dir = all.get(SHM_DIR);
    this.shmDir = dir == null || dir.isBlank() ? null : dir.trim();
  }

  static ShimSettings from(StateStoreConf conf) {
    Map<String, String> all = new TreeMap<>();
    for (Map.Entry<String, String> e : ScalaCollections.asJava(conf.sqlConfs()).entrySet()) {
      if (e.getKey().startsWith(PREFIX)) {
        all.put(e.getKey(), e.getValue());
      }
    }
    return of(all, resolvePythonExec(all.get(PYTHON_EXEC)));
  }

  /** Settings from explicitly set keys (tests build them without Spark). */
  static ShimSettings of(Map<String, String> all, String pythonExec) {
    return new ShimSettings(all, pythonExec);
  }

  private static Map<String, JsonNode> loadDeclarations() {
    try (InputStream in = ShimSettings.class.getResourceAsStream("settings.json")) {
      if (in == null) {
        throw new IllegalStateException("sparkstate.jar lacks io/sparkstate/settings.json; rebuild it with "
            + "`pip install .` (or python _build/backend.py)");
      }
      Map<String, JsonNode> out = new HashMap<>();
      for (JsonNode d : new ObjectMapper().readTree(in)) {
        out.put(d.get("key").asText(), d);
      }
      return out;
    } catch (IOException e) {
      throw new IllegalStateException("cannot read io/sparkstate/settings.json from sparkstate.jar: " + e, e);
    }
  }

  static JsonNode declaration(String key) {
    JsonNode d = DECLARED.get(key);
    if (d == null) {
      throw new IllegalStateException("no declaration of " + key + " in settings.json (the jar and the "
          + "Python package come from different builds)");
    }
    return d;
  }

  private static String choice(Map<String, String> all, String key) {
    JsonNode d = declaration(key);
    String raw = all.get(key);
    String value = raw == null ? d.get("default").asText() : raw.trim().toLowerCase(java.util.Locale.ROOT);
    for (JsonNode c : d.get("choices")) {
      if (c.asText().equals(value)) {
        return value;
      }
    }
    throw invalid(key, raw, d);
  }

  /** The integer value of {@code key}: its declared default when unset ({@code fallback} if that is null). */
  private static long integer(Map<String, String> all, String key, long fallback) {
    JsonNode d = declaration(key);
    String raw = all.get(key);
    if (raw == null) {
      return d.get("default").isNull() ? fallback : d.get("default").asLong();
    }
    long value;
    try {
      value = Long.parseLong(raw.trim());
    } catch (NumberFormatException e) {
      throw invalid(key, raw, d);
    }
    JsonNode maximum = d.get("maximum");
    if (value < d.get("minimum").asLong() || (maximum != null && !maximum.isNull() && value > maximum.asLong())) {
      throw invalid(key, raw, d);
    }
    return value;
  }

  private static IllegalArgumentException invalid(String key, String raw, JsonNode d) {
    return new IllegalArgumentException("invalid value '" + raw + "' for '" + key + "': expected "
        + d.get("valid").asText());
  }

  /** sqlConfs pythonExec, else spark.pyspark.python, else PYSPARK_PYTHON, else python3. */
  private static String resolvePythonExec(String configured) {
    if (configured != null && !configured.isBlank()) {
      return configured.trim();
    }
    SparkEnv env = SparkEnv.get();
    if (env != null) {
      Option<String> fromSpark = env.conf().getOption("spark.pyspark.python");
      if (fromSpark.isDefined() && !fromSpark.get().isBlank()) {
        return fromSpark.get().trim();
      }
    }
    String fromEnv = System.getenv("PYSPARK_PYTHON");
    if (fromEnv != null && !fromEnv.isBlank()) {
      return fromEnv.trim();
    }
    return "python3";
  }
}
