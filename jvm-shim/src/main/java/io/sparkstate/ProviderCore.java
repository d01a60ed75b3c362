package io.sparkstate;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.BiFunction;
import org.apache.hadoop.conf.Configuration;
import org.apache.spark.sql.execution.streaming.state.StateStoreConf;
import org.apache.spark.sql.execution.streaming.state.StateStoreId;
import org.apache.spark.sql.types.StructType;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The provider's work common to every Spark line: one instance per (checkpoint, operator, partition, store
 * name, query run) per executor, behind that line's {@code PythonStateStoreProvider} (Spark's entry point,
 * which turns the line's API into these calls). It holds no state itself; the store lives in a Python worker ({@link WorkerPool}). The
 * provider remembers which worker currently has the store open and moves it (release there, open here)
 * when the task's leased worker is a different one.
 *
 * <p>Thread model: one task at a time calls getStore and uses the store; Spark's maintenance threads call
 * doSnapshotMaintenance/doCleanupMaintenance concurrently (and never hold up a task: we take no lock of
 * theirs). The placement fields are guarded by {@code this}.
 */
final class ProviderCore {
  private static final Logger LOG = LoggerFactory.getLogger(ProviderCore.class);
  static final String INTERNAL_PARTITIONS_KEY = "spark.sql.streaming.internal.stateStore.partitions";
  static final String SHUFFLE_PARTITIONS_KEY = "spark.sql.shuffle.partitions";
  private static final AtomicBoolean PARTITION_SOURCE_LOGGED = new AtomicBoolean();

  private StateStoreId id;
  private StructType keySchema;
  private StructType valueSchema;
  private int numColsPrefixKey;
  private boolean checkpointIds;
  private StateStoreConf storeConf;
  private Configuration hadoopConf;
  private String queryRunId;
  private int numPartitions;
  private boolean keyGroupsRoute;
  private long keyFilterMaxKeys;
  private ShimSettings settings;
  private String specJson;

  private Worker holder; // guarded by this: the worker that has the store open, or null
  private int handle = -1; // guarded by this: the store's handle on holder
  /** The key filter this provider's last commit left, for the store the next batch loads. */
  private final KeyFilterHandover keyFilters = new KeyFilterHandover();

  /**
   * Checks and keeps what Spark passed to init. {@code numColsPrefixKey} is 0 for a store without prefix
   * scans; {@code checkpointIds} is checkpoint format v2 (a line without it passes false).
   */
  void init(StateStoreId stateStoreId, StructType keySchema, StructType valueSchema, int numColsPrefixKey,
      StateStoreConf storeConf, Configuration hadoopConf, boolean checkpointIds) {
    if (numColsPrefixKey < 0 || (numColsPrefixKey > 0 && numColsPrefixKey >= keySchema.length())) {
      throw new IllegalArgumentException("invalid numColsPrefixKey " + numColsPrefixKey + " for a key of "
          + keySchema.length() + " columns");
    }
    this.numColsPrefixKey = numColsPrefixKey;
    this.checkpointIds = checkpointIds;
    this.id = stateStoreId;
    this.keySchema = keySchema;
    this.valueSchema = valueSchema;
    this.storeConf = storeConf;
    this.hadoopConf = hadoopConf;
    this.queryRunId = readRunId(hadoopConf);
    this.numPartitions = readNumPartitions(hadoopConf);
    this.settings = ShimSettings.from(storeConf);
    // Built and dropped: a key schema the codec cannot route fails here, at init, not at the first load.
    // Each store gets its own codec (its projections hold mutable rows and are not shared).
    KeyCodec probe = new KeyCodec(keySchema, valueSchema, numColsPrefixKey, id.storeName(), numPartitions,
        id.partitionId());
    this.keyGroupsRoute = probe.keyGroupsRoute();
    // A join's keyWithIndexToValue store is asked only for the (key, index) pairs its keyToNumValues store
    // counts, which it holds: a filter there would never answer a get, only cost a hash per get and put.
    this.keyFilterMaxKeys = probe.isJoinIndexed() ? 0 : settings.keyFilterMaxKeys;
    this.specJson = Json.write(spec(UUID.randomUUID().toString()));
  }

  private static String readRunId(Configuration conf) {
    try {
      return SparkApi.runId(conf);
    } catch (Throwable e) { // getRunId asserts the key is present; tests and tools may not set it
      return null;
    }
  }

  /** The state partition count Spark routes with; see docs/internals/keys.md, "Keys and key groups". */
  private static int readNumPartitions(Configuration conf) {
    String internal = conf.get(INTERNAL_PARTITIONS_KEY);
    String shuffle = conf.get(SHUFFLE_PARTITIONS_KEY);
    String chosen = internal != null ? internal : shuffle;
    if (PARTITION_SOURCE_LOGGED.compareAndSet(false, true)) {
      LOG.info("sparkstate: state partition count from hadoopConf: {}={}, {}={}; using {}",
          INTERNAL_PARTITIONS_KEY, internal, SHUFFLE_PARTITIONS_KEY, shuffle, chosen != null ? chosen : "200");
    }
    try {
      return chosen != null ? Integer.parseInt(chosen.trim()) : 200;
    } catch (NumberFormatException e) {
      throw new IllegalArgumentException("sparkstate: cannot parse the state partition count '" + chosen + "'", e);
    }
  }

  private ObjectNode spec(String instanceId) {
    ObjectNode spec = Json.object();
    spec.put("checkpointLocation", id.storeCheckpointLocation().toString());
    spec.put("operatorId", id.operatorId());
    spec.put("partitionId", id.partitionId());
    spec.put("storeName", id.storeName());
    spec.put("instanceId", instanceId);
    spec.put("queryRunId", queryRunId);
    spec.put("keySchema", keySchema.json());
    spec.put("valueSchema", valueSchema.json());
    spec.put("numColsPrefixKey", numColsPrefixKey);
    spec.put("numPartitions", numPartitions);
    spec.put("keyGroupsRoute", keyGroupsRoute);
    // Checkpoint format v2: every commit gets a unique id, returned by getStateStoreCheckpointInfo.
    spec.put("checkpointIds", checkpointIds);
    spec.put("minVersionsToRetain", storeConf.minVersionsToRetain());
    ObjectNode conf = spec.putObject("settings");
    for (Map.Entry<String, String> e : settings.all.entrySet()) {
      conf.put(e.getKey(), e.getValue());
    }
    // The Hadoop conf's fs.s3a.* entries (spark.hadoop.fs.s3a.* land there), raw: Python decides which
    // it honours. They can hold credentials, so the spec is never logged.
    ObjectNode s3a = spec.putObject("hadoopS3a");
    for (Map.Entry<String, String> e : hadoopConf.getPropsWithPrefix("fs.s3a.").entrySet()) {
      s3a.put("fs.s3a." + e.getKey(), e.getValue());
    }
    return spec;
  }

  StateStoreId stateStoreId() {
    return id;
  }

  StructType keySchema() {
    return keySchema;
  }

  StructType valueSchema() {
    return valueSchema;
  }

  /**
   * Turns {@code store} into the write store of {@code version}: true if it was this provider's read store
   * of that version and still usable; otherwise the caller releases it and opens a new one.
   */
  boolean upgrade(LoadedStore store, long version) {
    return store.belongsTo(this) && store.version() == version && store.upgradeToWrite();
  }

  /**
   * Spark's snapshot replay ({@code snapshotStartBatchId} of the statestore source): {@code endVersion}
   * rebuilt from the snapshot of {@code snapshotVersion} and the change logs after it, not from its own files.
   */
  LoadedStore replay(long snapshotVersion, long endVersion, boolean readOnly, String snapshotVersionCkptId,
      String endVersionCkptId) {
    if (snapshotVersion < 1 || endVersion < snapshotVersion) {
      throw new IllegalArgumentException("cannot replay versions " + snapshotVersion + ".." + endVersion + " of "
          + describe(endVersion) + ": the snapshot version must be at least 1 and at most the end version");
    }
    return open(endVersion, readOnly, "replay", null,
        (control, h) -> control.replay(h, snapshotVersion, endVersion, snapshotVersionCkptId, endVersionCkptId));
  }

  /**
   * Spark's change feed ({@code readChangeFeed} of the statestore source) of versions start..end: the path
   * of a local file of (version, key, value or none) records the worker wrote; the caller reads it with
   * {@link #newCodec()} and deletes it.
   */
  String changes(long startVersion, long endVersion, String endVersionCkptId) {
    requireInit();
    WorkerLease lease = WorkerPool.get().leaseFor(settings, currentHolder());
    Worker worker = lease.worker();
    try {
      int h = placeOn(worker, endVersion);
      return Json.parse(worker.control().changes(h, startVersion, endVersion, endVersionCkptId), "changes")
          .path("path").asText();
    } catch (RuntimeException e) {
      throw failure("read the changes of versions " + startVersion + ".." + endVersion + " of", endVersion,
          worker, e);
    } finally {
      if (!lease.isTaskScoped()) {
        lease.release();
      }
    }
  }

  /** A codec for this store's rows (each reader gets its own: its projections hold mutable rows). */
  KeyCodec newCodec() {
    return new KeyCodec(keySchema, valueSchema, numColsPrefixKey, id.storeName(), numPartitions, id.partitionId());
  }

  private void requireInit() {
    if (id == null) {
      throw new IllegalStateException("sparkstate provider used before init");
    }
  }

  /**
   * The store at {@code version} for a task; {@code checkpointId} is the attempt Spark recorded (format
   * v2), or "" for none; {@code loadEmpty} starts it empty whatever the checkpoint holds.
   */
  LoadedStore open(long version, String checkpointId, boolean loadEmpty, boolean readOnly) {
    requireInit();
    if (version < 0) {
      throw new IllegalArgumentException("version cannot be negative: " + version + " (" + describe(version) + ")");
    }
    if (loadEmpty && readOnly) {
      throw new IllegalArgumentException("loadEmpty asks for a store to write: " + describe(version));
    }
    // Version 0 is the empty state before a query's first batch.
    KeyFilter keyFilter = keyFilters.forLoad(version, checkpointId, loadEmpty || version == 0, keyFilterMaxKeys);
    return open(version, readOnly, "load", keyFilter,
        (control, h) -> loadEmpty ? control.loadEmpty(h, version) : control.load(h, version, checkpointId));
  }

  /** A store committed {@code version} with {@code filter} (null: it had none it could trust). */
  void keyFilterCommitted(long version, String checkpointId, KeyFilter filter) {
    keyFilters.committed(version, checkpointId, filter);
  }

  /** Keys this store's filter may hold; 0: it keeps none (turned off, or a store no filter would serve). */
  long keyFilterMaxKeys() {
    return keyFilterMaxKeys;
  }

  /** A store at {@code version} on a leased worker, brought there by {@code loadCall}. */
  private LoadedStore open(long version, boolean readOnly, String action, KeyFilter keyFilter,
      BiFunction<WorkerControl, Integer, String> loadCall) {
    WorkerLease lease = WorkerPool.get().leaseFor(settings, currentHolder());
    Worker worker = lease.worker();
    try {
      int h = placeOn(worker, version);
      JsonNode loaded = Json.parse(loadCall.apply(worker.control(), h), action);
      long got = loaded.path("version").asLong(version);
      if (got != version) {
        throw new IllegalStateException(describe(version) + ": the worker loaded version " + got);
      }
      LoadedStore store = new LoadedStore(this, lease, h, version, readOnly, newCodec(), keyFilter);
      lease.track(store);
      return store;
    } catch (RuntimeException e) {
      if (!lease.isTaskScoped()) {
        lease.release();
      }
      throw failure(action, version, worker, e);
    }
  }

  private synchronized Worker currentHolder() {
    return holder;
  }

  /**
   * Makes sure {@code worker} can use the store, moving it from the worker that held it before unless
   * {@code worker} reaches it there (embedded workers share their stores; the holder stays the owner).
   */
  private int placeOn(Worker worker, long version) {
    Worker previous;
    int previousHandle;
    synchronized (this) {
      if (holder != null && handle >= 0 && holder.isAlive() && worker.reaches(holder)) {
        return handle;
      }
      previous = holder;
      previousHandle = handle;
      holder = null;
      handle = -1;
    }
    if (previous != null) {
      WorkerPool.get().storeLeft(previous);
    }
    if (previous != null && previous.isAlive()) {
      try {
        previous.control().release(previousHandle);
      } catch (RuntimeException e) {
        LOG.warn("sparkstate: cannot release {} on {} before moving it: {}", describe(version), previous, e.toString());
      }
    }
    int h = Json.parse(worker.control().open(specJson), "open").path("handle").asInt(-1);
    if (h < 0) {
      throw new IllegalStateException(describe(version) + ": the worker returned no handle from open");
    }
    WorkerPool.get().storeOpened(worker);
    synchronized (this) {
      holder = worker;
      handle = h;
    }
    return h;
  }

  /** After a commit: commit validation (trap: foreachBatch queries fail without it), snapshot-lag report. */
  void afterCommit(long newVersion) {
    SparkApi.afterCommit(storeConf, hadoopConf, id, queryRunId, newVersion);
  }

  void doSnapshotMaintenance() {
    maintenance("snapshot");
  }

  void doCleanupMaintenance() {
    maintenance("cleanup");
  }

  void doMaintenance() {
    maintenance("snapshot");
    maintenance("cleanup");
  }

  /**
   * Best effort, like the built-ins: a failure is logged, not thrown (a throw makes Spark evict the
   * provider). The store may be moving between workers meanwhile; the worker rejects a stale handle.
   */
  private void maintenance(String kind) {
    Worker worker;
    int h;
    synchronized (this) {
      worker = holder;
      h = handle;
    }
    if (worker == null || h < 0 || !worker.isAlive()) {
      return;
    }
    try {
      worker.control().maintenance(h, kind);
    } catch (RuntimeException e) {
      LOG.warn("sparkstate: {} maintenance of {} failed: {}", kind, describe(-1), e.getMessage());
    }
  }

  void close() {
    Worker worker;
    int h;
    synchronized (this) {
      worker = holder;
      h = handle;
      holder = null;
      handle = -1;
    }
    keyFilters.drop();
    if (worker != null && h >= 0) {
      WorkerPool.get().storeLeft(worker);
    }
    if (worker != null && h >= 0 && worker.isAlive()) {
      try {
        worker.control().close(h);
      } catch (RuntimeException e) {
        LOG.warn("sparkstate: cannot close {} on {}: {}", describe(-1), worker, e.getMessage());
      }
    }
  }

  /** Names the store in errors: operator, partition, store name, version and checkpoint path. */
  String describe(long version) {
    if (id == null) {
      return "sparkstate store (not initialized)";
    }
    return "sparkstate store [operator=" + id.operatorId() + ", partition=" + id.partitionId() + ", storeName="
        + id.storeName() + (version >= 0 ? ", version=" + version : "") + ", checkpoint="
        + id.storeCheckpointLocation() + "]";
  }

  /** The exception to throw for a failed worker call on this store at {@code version} ({@link StoreFailures}). */
  RuntimeException failure(String action, long version, Worker worker, RuntimeException e) {
    return StoreFailures.classify(describe(version), action, worker, e);
  }
}
