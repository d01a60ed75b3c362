package io.sparkstate;

import java.util.Map;
import java.util.TreeMap;
import org.apache.spark.SparkEnv;
import org.apache.spark.sql.execution.streaming.state.StateStoreConf;
import scala.Option;
import scala.jdk.javaapi.CollectionConverters;

/**
 * The few settings the JVM side itself needs (interpreter, transport, start timeout, pool size), plus every
 * explicitly set {@code spark.sql.streaming.stateStore.sparkstate.*} key, which is passed to Python
 * untouched: Python (sparkstate.config) owns validation of the full set.
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
  static final String EMBEDDED = "embedded";
  static final String SHM = "shm";

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

  private ShimSettings(Map<String, String> all, String pythonExec, String transport, long timeoutMs,
      int maxWorkers, long heartbeatTimeoutMs, long stallTimeoutMs, String shmDir) {
    this.all = all;
    this.pythonExec = pythonExec;
    this.transport = transport;
    this.workerStartTimeoutMs = timeoutMs;
    this.maxWorkers = maxWorkers;
    this.heartbeatTimeoutMs = heartbeatTimeoutMs;
    this.stallTimeoutMs = stallTimeoutMs;
    this.shmDir = shmDir;
  }

  static ShimSettings from(StateStoreConf conf) {
    Map<String, String> all = new TreeMap<>();
    for (Map.Entry<String, String> e : CollectionConverters.asJava(conf.sqlConfs()).entrySet()) {
      if (e.getKey().startsWith(PREFIX)) {
        all.put(e.getKey(), e.getValue());
      }
    }
    String transport = all.getOrDefault(TRANSPORT, SHM).trim().toLowerCase(java.util.Locale.ROOT);
    if (!transport.equals("socket") && !transport.equals(SHM) && !transport.equals("py4j")
        && !transport.equals(EMBEDDED)) {
      throw new IllegalArgumentException("invalid value '" + all.get(TRANSPORT) + "' for '" + TRANSPORT
          + "': expected shm, socket, py4j, embedded");
    }
    long timeout = intAtLeast(all, START_TIMEOUT, 60000, 1000);
    int maxWorkers = (int) Math.min(Integer.MAX_VALUE,
        intAtLeast(all, MAX_WORKERS, 2L * Runtime.getRuntime().availableProcessors(), 1));
    long heartbeat = intAtLeast(all, HEARTBEAT_TIMEOUT, 30000, 1000);
    long stall = intAtLeast(all, STALL_TIMEOUT, 600000, 1000);
    String shmDir = all.get(SHM_DIR);
    return new ShimSettings(all, resolvePythonExec(all.get(PYTHON_EXEC)), transport, timeout, maxWorkers, heartbeat,
        stall, shmDir == null || shmDir.isBlank() ? null : shmDir.trim());
  }

  /** The integer value of {@code key}, or {@code dflt} if unset; not a number or below {@code min}: an error. */
  private static long intAtLeast(Map<String, String> all, String key, long dflt, long min) {
    String raw = all.get(key);
    if (raw == null) {
      return dflt;
    }
    long value;
    try {
      value = Long.parseLong(raw.trim());
    } catch (NumberFormatException e) {
      value = min - 1;
    }
    if (value < min) {
      throw new IllegalArgumentException("invalid value '" + raw + "' for '" + key + "': expected an integer >= "
          + min);
    }
    return value;
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
