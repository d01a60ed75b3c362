package io.sparkstate;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.locks.ReentrantReadWriteLock;
import java.util.function.BiFunction;
import org.apache.hadoop.conf.Configuration;
import org.apache.spark.sql.catalyst.expressions.UnsafeRow;
import org.apache.spark.sql.execution.streaming.state.KeyStateEncoderSpec;
import org.apache.spark.sql.execution.streaming.state.NoPrefixKeyStateEncoderSpec;
import org.apache.spark.sql.execution.streaming.state.PrefixKeyScanStateEncoderSpec;
import org.apache.spark.sql.execution.streaming.state.ReadStateStore;
import org.apache.spark.sql.execution.streaming.state.StateSchemaProvider;
import org.apache.spark.sql.execution.streaming.state.StateStore;
import org.apache.spark.sql.execution.streaming.state.StateStoreConf;
import org.apache.spark.sql.execution.streaming.state.StateStoreCoordinatorRef;
import org.apache.spark.sql.execution.streaming.state.StateStoreCustomMetric;
import org.apache.spark.sql.execution.streaming.state.StateStoreId;
import org.apache.spark.sql.execution.streaming.state.StateStoreProvider$;
import org.apache.spark.sql.execution.streaming.state.StateStoreProvider;
import org.apache.spark.sql.execution.streaming.state.StateStoreProviderId;
import org.apache.spark.sql.execution.streaming.state.SupportsFineGrainedReplay;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.util.NextIterator;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import scala.Enumeration;
import scala.Option;
import scala.Tuple4;

/**
 * Spark's entry point: one instance per (checkpoint, operator, partition, store name, query run) per
 * executor. It holds no state itself; the store lives in a Python worker ({@link WorkerPool}). The
 * provider remembers which worker currently has the store open and moves it (release there, open here)
 * when the task's leased worker is a different one.
 *
 * <p>Thread model: one task at a time calls getStore and uses the store; Spark's maintenance threads call
 * doSnapshotMaintenance/doCleanupMaintenance concurrently (and never hold up a task: we take no lock of
 * theirs). The placement fields are guarded by {@code this}.
 */
public final class PythonStateStoreProvider implements StateStoreProvider, SupportsFineGrainedReplay {
  private static final Logger LOG = LoggerFactory.getLogger(PythonStateStoreProvider.class);
  static final String INTERNAL_PARTITIONS_KEY = "spark.sql.streaming.internal.stateStore.partitions";
  static final String SHUFFLE_PARTITIONS_KEY = "spark.sql.shuffle.partitions";
  private static final AtomicBoolean PARTITION_SOURCE_LOGGED = new AtomicBoolean();

  // Scala trait fields of StateStoreProvider, set by $init$.
  private volatile boolean unloaded;
  private ReentrantReadWriteLock maintenanceLock;

  private StateStoreId id;
  private StructType keySchema;
  private StructType valueSchema;
  private int numColsPrefixKey;
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

  /** Cheap on purpose: the driver creates throw-away instances just to read supportedCustomMetrics. */
  public PythonStateStoreProvider() {
    StateStoreProvider.$init$(this);
  }

  @Override
  public boolean unloaded() {
    return unloaded;
  }

  @Override
  public void unloaded_$eq(boolean value) {
    unloaded = value;
  }

  @Override
  public ReentrantReadWriteLock maintenanceLock() {
    return maintenanceLock;
  }

  @Override
  public void org$apache$spark$sql$execution$streaming$state$StateStoreProvider$_setter_$maintenanceLock_$eq(
      ReentrantReadWriteLock lock) {
    maintenanceLock = lock;
  }

  @Override
  public void init(StateStoreId stateStoreId, StructType keySchema, StructType valueSchema,
      KeyStateEncoderSpec keyStateEncoderSpec, boolean useColumnFamilies, StateStoreConf storeConf,
      Configuration hadoopConf, boolean useMultipleValuesPerKey, Option<StateSchemaProvider> stateSchemaProvider) {
    if (useColumnFamilies) {
      throw new UnsupportedOperationException("sparkstate does not support column families (used by "
          + "transformWithState and join state formats 3/4); use RocksDBStateStoreProvider for those queries");
    }
    if (useMultipleValuesPerKey) {
      throw new UnsupportedOperationException("sparkstate does not support multiple values per key");
    }
    if (keyStateEncoderSpec instanceof PrefixKeyScanStateEncoderSpec) {
      this.numColsPrefixKey = ((PrefixKeyScanStateEncoderSpec) keyStateEncoderSpec).numColsPrefixKey();
      if (numColsPrefixKey <= 0 || numColsPrefixKey >= keySchema.length()) {
        throw new IllegalArgumentException("invalid numColsPrefixKey " + numColsPrefixKey + " for a key of "
            + keySchema.length() + " columns");
      }
    } else if (!(keyStateEncoderSpec instanceof NoPrefixKeyStateEncoderSpec)) {
      throw new UnsupportedOperationException("sparkstate supports NoPrefix and PrefixKeyScan key encoder "
          + "specs, not " + keyStateEncoderSpec);
    }
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
      return StateStoreProvider$.MODULE$.getRunId(conf);
    } catch (Throwable e) { // getRunId asserts the key is present; tests and tools may not set it
      return null;
    }
  }

  /** The state partition count Spark routes with; see docs/architecture.md §3. */
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
    spec.put("checkpointIds", storeConf.enableStateStoreCheckpointIds());
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

  @Override
  public StateStoreId stateStoreId() {
    return id;
  }

  StructType keySchema() {
    return keySchema;
  }

  StructType valueSchema() {
    return valueSchema;
  }

  @Override
  public StateStore getStore(long version, Option<String> stateStoreCkptId, boolean forceSnapshotOnCommit,
      boolean loadEmpty) {
    // Every commit is a full durable version, so forceSnapshotOnCommit needs no action.
    return open(version, stateStoreCkptId, loadEmpty, false);
  }

  @Override
  public ReadStateStore getReadStore(long version, Option<String> stateStoreCkptId) {
    return open(version, stateStoreCkptId, false, true);
  }

  @Override
  public StateStore upgradeReadStoreToWriteStore(ReadStateStore readStore, long version,
      Option<String> stateStoreCkptId, boolean forceSnapshotOnCommit) {
    if (readStore instanceof PythonStateStore) {
      PythonStateStore store = (PythonStateStore) readStore;
      if (store.belongsTo(this) && store.version() == version && store.upgradeToWrite()) {
        return store;
      }
    }
    readStore.release();
    return getStore(version, stateStoreCkptId, forceSnapshotOnCommit, false);
  }

  /**
   * Spark's snapshot replay ({@code snapshotStartBatchId} of the statestore source): {@code endVersion}
   * rebuilt from the snapshot of {@code snapshotVersion} and the change logs after it, not from its own files.
   */
  @Override
  public StateStore replayStateFromSnapshot(long snapshotVersion, long endVersion, boolean readOnly,
      Option<String> snapshotVersionCkptId, Option<String> endVersionCkptId) {
    if (snapshotVersion < 1 || endVersion < snapshotVersion) {
      throw new IllegalArgumentException("cannot replay versions " + snapshotVersion + ".." + endVersion + " of "
          + describe(endVersion) + ": the snapshot version must be at least 1 and at most the end version");
    }
    return open(endVersion, readOnly, "replay", null,
        (control, h) -> control.replay(h, snapshotVersion, endVersion, idOf(snapshotVersionCkptId),
            idOf(endVersionCkptId)));
  }

  /** Spark's change feed ({@code readChangeFeed} of the statestore source) of versions start..end. */
  @Override
  public NextIterator<Tuple4<Enumeration.Value, UnsafeRow, UnsafeRow, Object>> getStateStoreChangeDataReader(
      long startVersion, long endVersion, Option<String> colFamilyNameOpt, Option<String> endVersionCkptId) {
    requireInit();
    if (colFamilyNameOpt != null && colFamilyNameOpt.isDefined()) {
      throw new UnsupportedOperationException("sparkstate stores have no column families (asked for "
          + colFamilyNameOpt.get() + ")");
    }
    WorkerLease lease = WorkerPool.get().leaseFor(settings, currentHolder());
    Worker worker = lease.worker();
    String path;
    try {
      int h = placeOn(worker, endVersion);
      path = Json.parse(worker.control().changes(h, startVersion, endVersion, idOf(endVersionCkptId)), "changes")
          .path("path").asText();
    } catch (RuntimeException e) {
      throw failure("read the changes of versions " + startVersion + ".." + endVersion + " of", endVersion,
          worker, e);
    } finally {
      if (!lease.isTaskScoped()) {
        lease.release();
      }
    }
    return new ChangeFileReader(path,
        new KeyCodec(keySchema, valueSchema, numColsPrefixKey, id.storeName(), numPartitions, id.partitionId()),
        describe(endVersion));
  }

  private void requireInit() {
    if (id == null) {
      throw new IllegalStateException("sparkstate provider used before init");
    }
  }

  /** A checkpoint id for the worker: the attempt Spark recorded (format v2), or "" for none. */
  private static String idOf(Option<String> ckptId) {
    return ckptId != null && ckptId.isDefined() ? ckptId.get() : "";
  }

  private PythonStateStore open(long version, Option<String> ckptId, boolean loadEmpty, boolean readOnly) {
    requireInit();
    if (version < 0) {
      throw new IllegalArgumentException("version cannot be negative: " + version + " (" + describe(version) + ")");
    }
    if (loadEmpty && readOnly) {
      throw new IllegalArgumentException("loadEmpty asks for a store to write: " + describe(version));
    }
    String checkpointId = idOf(ckptId);
    // Version 0 is the empty state before a query's first batch.
    KeyFilter keyFilter = keyFilters.forLoad(version, checkpointId, loadEmpty || version == 0, keyFilterMaxKeys);
    return open(version, readOnly, "load", keyFilter,
        (control, h) -> loadEmpty ? control.loadEmpty(h, version) : control.load(h, version, checkpointId));
  }

  /** A store committed {@code version} with {@code filter} (null: it had none it could trust). */
  void keyFilterCommitted(long version, Option<String> checkpointId, KeyFilter filter) {
    keyFilters.committed(version, idOf(checkpointId), filter);
  }

  /** Keys this store's filter may hold; 0: it keeps none (turned off, or a store no filter would serve). */
  long keyFilterMaxKeys() {
    return keyFilterMaxKeys;
  }

  /** A store at {@code version} on a leased worker, brought there by {@code loadCall}. */
  private PythonStateStore open(long version, boolean readOnly, String action, KeyFilter keyFilter,
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
      PythonStateStore store = new PythonStateStore(this, lease, h, version, readOnly,
          new KeyCodec(keySchema, valueSchema, numColsPrefixKey, id.storeName(), numPartitions, id.partitionId()),
          keyFilter);
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
    if (storeConf.commitValidationEnabled()) {
      StateStore.reportCommitToCoordinator(newVersion, id, hadoopConf);
    }
    if (queryRunId != null) {
      CoordinatorReports.snapshotUploaded(new StateStoreProviderId(id, UUID.fromString(queryRunId)), newVersion);
    }
  }

  @Override
  public void doSnapshotMaintenance() {
    maintenance("snapshot");
  }

  @Override
  public void doCleanupMaintenance() {
    maintenance("cleanup");
  }

  @Override
  public void doMaintenance() {
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

  @Override
  public scala.collection.immutable.Seq<StateStoreCustomMetric> supportedCustomMetrics() {
    return Metrics.supported();
  }

  @Override
  public void close() {
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

  /**
   * Sends {@code snapshotUploaded} to the coordinator off the task thread: it is a blocking RPC
   * ({@code askSync}), best effort, and only feeds Spark's snapshot-lag detection. Every sparkstate commit
   * is a full durable version, so each commit counts as an uploaded snapshot.
   */
  private static final class CoordinatorReports {
    private static final ExecutorService EXECUTOR = Executors.newSingleThreadExecutor(r -> {
      Thread t = new Thread(r, "sparkstate-coordinator-report");
      t.setDaemon(true);
      return t;
    });

    static void snapshotUploaded(StateStoreProviderId providerId, long version) {
      long timestamp = System.currentTimeMillis();
      EXECUTOR.execute(() -> {
        try {
          Option<StateStoreCoordinatorRef> ref = StateStoreProvider$.MODULE$.coordinatorRef();
          if (ref.isDefined()) {
            ref.get().snapshotUploaded(providerId, version, timestamp);
          }
        } catch (Throwable e) {
          LOG.debug("sparkstate: snapshotUploaded report for {} failed", providerId, e);
        }
      });
    }
  }
}
