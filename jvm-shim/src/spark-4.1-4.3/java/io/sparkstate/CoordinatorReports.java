package io.sparkstate;

import java.util.UUID;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import org.apache.hadoop.conf.Configuration;
import org.apache.spark.sql.execution.streaming.state.StateStore;
import org.apache.spark.sql.execution.streaming.state.StateStoreConf;
import org.apache.spark.sql.execution.streaming.state.StateStoreCoordinatorRef;
import org.apache.spark.sql.execution.streaming.state.StateStoreId;
import org.apache.spark.sql.execution.streaming.state.StateStoreProvider$;
import org.apache.spark.sql.execution.streaming.state.StateStoreProviderId;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import scala.Option;

/**
 * What a commit tells Spark's state store coordinator (Spark 4.1 on): commit validation (trap: foreachBatch
 * queries fail without it) and the snapshot-lag report, sent off the task thread: it is a blocking RPC
 * ({@code askSync}), best effort, and only feeds Spark's snapshot-lag detection. Every sparkstate commit
 * is a full durable version, so each commit counts as an uploaded snapshot.
 */
final class CoordinatorReports {
  private static final Logger LOG = LoggerFactory.getLogger(CoordinatorReports.class);
  private static final ExecutorService EXECUTOR = Executors.newSingleThreadExecutor(r -> {
    Thread t = new Thread(r, "sparkstate-coordinator-report");
    t.setDaemon(true);
    return t;
  });

  private CoordinatorReports() {}

  static void afterCommit(StateStoreConf conf, Configuration hadoopConf, StateStoreId id, String runId, long version) {
    if (conf.commitValidationEnabled()) {
      StateStore.reportCommitToCoordinator(version, id, hadoopConf);
    }
    if (runId != null) {
      snapshotUploaded(new StateStoreProviderId(id, UUID.fromString(runId)), version);
    }
  }

  private static void snapshotUploaded(StateStoreProviderId providerId, long version) {
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
