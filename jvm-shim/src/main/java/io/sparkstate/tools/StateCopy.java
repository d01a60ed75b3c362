package io.sparkstate.tools;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.DataOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.util.ArrayList;
import java.util.List;
import java.util.zip.CRC32;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.spark.SparkEnv;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.io.CompressionCodec;
import org.apache.spark.io.CompressionCodec$;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.expressions.UnsafeProjection;
import org.apache.spark.sql.catalyst.expressions.UnsafeRow;
import org.apache.spark.sql.execution.streaming.state.ReadStateStore;
import org.apache.spark.sql.execution.streaming.state.StateStore;
import org.apache.spark.sql.execution.streaming.state.StateStoreConf;
import org.apache.spark.sql.execution.streaming.state.StateStoreId;
import org.apache.spark.sql.execution.streaming.state.StateStoreProvider;
import org.apache.spark.sql.internal.SQLConf;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.StructType;

/**
 * Copies every store of a stopped query from one state store provider to another through Spark's own
 * provider API: a Spark job with one task per state partition; each task opens the source provider's
 * version read-only, puts every pair into the target provider's store started empty at the base version,
 * commits (the target's base version + 1), then reads that version back through the target provider and
 * compares key count and checksum with the source. Nothing here knows a file format except one: Spark's
 * HDFS provider cannot start empty at a version, so it is given the empty snapshot file of the base version
 * it would have written itself.
 *
 * <p>One class for every Spark line: the provider calls whose signatures differ between lines (opening a
 * provider, read and write stores, scans, puts, ending a store, checkpoint ids) go through {@link
 * ProviderCalls}, of which each line's source folder has its own.
 *
 * <p>Driven by {@code sparkstate migrate} (Python), which plans the copy and switches the checkpoint's
 * metadata once every store verified. The plan (JSON): stateRoot, sourceClass, targetClass,
 * sourceVersion, targetBaseVersion, partitions, conf (the SQL conf both sides run with), sourceConf and
 * targetConf (overrides per side), hadoopConf, stores [{operatorId, storeName, keySchema, valueSchema,
 * numColsPrefixKey, singlePartition, sourceIds}], checkpointIds. Under checkpoint format v2
 * ({@code checkpointIds}, Spark 4 only) the source is read at the attempt {@code sourceIds[partition]}
 * names, and the target's commit reports its attempt id. The result: one JSON object per store and
 * partition with rows, checksums, the target's committed version and, under format v2, its
 * {@code checkpointId}.
 */
public final class StateCopy {
  static final String HDFS_PROVIDER =
      "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider";
  private static final String PROVIDER_CLASS_KEY = "spark.sql.streaming.stateStore.providerClass";
  private static final ObjectMapper MAPPER = new ObjectMapper();

  private StateCopy() {}

  /** Runs the copy job; returns a JSON array of per-store results (see the class doc). */
  public static String run(SparkSession spark, String planJson) throws IOException {
    JsonNode plan = MAPPER.readTree(planJson);
    int partitions = plan.get("partitions").asInt();
    List<Integer> parts = new ArrayList<>();
    for (int p = 0; p < partitions; p++) {
      parts.add(p);
    }
    JavaSparkContext jsc = JavaSparkContext.fromSparkContext(spark.sparkContext());
    List<String> answers = jsc.parallelize(parts, Math.max(1, partitions))
        .map(p -> copyPartition(planJson, p))
        .collect();
    ArrayNode all = MAPPER.createArrayNode();
    for (String answer : answers) {
      for (JsonNode node : MAPPER.readTree(answer)) {
        all.add(node);
      }
    }
    return MAPPER.writeValueAsString(all);
  }

  /** Executor side: every store of one partition. */
  static String copyPartition(String planJson, int partition) throws IOException {
    JsonNode plan = MAPPER.readTree(planJson);
    Configuration hadoop = new Configuration();
    plan.path("hadoopConf").fields().forEachRemaining(e -> hadoop.set(e.getKey(), e.getValue().asText()));
    ArrayNode results = MAPPER.createArrayNode();
    for (JsonNode store : plan.get("stores")) {
      if (store.path("singlePartition").asBoolean(false) && partition != 0) {
        continue;
      }
      results.add(copyStore(plan, store, partition, hadoop));
    }
    return MAPPER.writeValueAsString(results);
  }

  private static ObjectNode copyStore(JsonNode plan, JsonNode store, int partition, Configuration hadoop)
      throws IOException {
    String stateRoot = plan.get("stateRoot").asText();
    int operatorId = store.get("operatorId").asInt();
    String storeName = store.get("storeName").asText();
    StructType keySchema = (StructType) DataType.fromJson(store.get("keySchema").asText());
    StructType valueSchema = (StructType) DataType.fromJson(store.get("valueSchema").asText());
    int prefixColumns = store.path("numColsPrefixKey").asInt(0);
    StateStoreId id = new StateStoreId(stateRoot, operatorId, partition, storeName);
    long sourceVersion = plan.get("sourceVersion").asLong();
    long base = plan.get("targetBaseVersion").asLong();
    boolean checkpointIds = plan.path("checkpointIds").asBoolean(false);
    JsonNode sourceIds = store.path("sourceIds");
    String sourceId = partition < sourceIds.size() ? sourceIds.get(partition).asText() : null;
    if (checkpointIds && sourceId == null) {
      throw new IOException("operator " + operatorId + " store " + storeName + " partition " + partition
          + ": the plan names no recorded attempt of version " + sourceVersion + " (checkpoint format v2)");
    }
    String targetId = null;
    String targetClass = plan.get("targetClass").asText();
    Checksum source = new Checksum(keySchema, valueSchema);
    Checksum target = new Checksum(keySchema, valueSchema);
    String where = "operator " + operatorId + " store " + storeName + " partition " + partition;

    StateStoreProvider from = ProviderCalls.open(id, keySchema, valueSchema, prefixColumns,
        storeConf(plan, "sourceConf", plan.get("sourceClass").asText()), hadoop);
    StateStoreProvider to = ProviderCalls.open(id, keySchema, valueSchema, prefixColumns,
        storeConf(plan, "targetConf", targetClass), hadoop);
    long committed;
    try {
      ReadStateStore reader = ProviderCalls.readStore(from, sourceVersion, sourceId);
      StateStore writer = null;
      try {
        if (HDFS_PROVIDER.equals(targetClass)) {
          writeEmptyHdfsSnapshot(id, base, storeConf(plan, "targetConf", targetClass), hadoop);
          writer = ProviderCalls.writeStore(to, base, false);
        } else {
          writer = ProviderCalls.writeStore(to, base, true);
        }
        StateStore into = writer;
        ProviderCalls.forEachRow(reader, (key, value) -> {
          source.add(key, value);
          ProviderCalls.put(into, key.copy(), value.copy());
        });
        committed = writer.commit();
        if (checkpointIds) { // format v2: the attempt the migration batch's commit log entry records
          targetId = ProviderCalls.committedCheckpointId(writer);
        }
        writer = null;
      } catch (RuntimeException | IOException e) {
        if (writer != null) {
          writer.abort();
        }
        throw new IOException(where + ": " + e, e);
      } finally {
        ProviderCalls.release(reader);
      }
      ReadStateStore check = ProviderCalls.readStore(to, committed, targetId);
      try {
        ProviderCalls.forEachRow(check, target::add);
      } finally {
        ProviderCalls.release(check);
      }
    } finally {
      from.close();
      to.close();
    }
    ObjectNode result = MAPPER.createObjectNode();
    result.put("operatorId", operatorId);
    result.put("storeName", storeName);
    result.put("partition", partition);
    result.put("version", committed);
    if (targetId != null) {
      result.put("checkpointId", targetId);
    }
    result.put("sourceRows", source.rows);
    result.put("sourceChecksum", Long.toHexString(source.sum) + "-" + Long.toHexString(source.xor));
    result.put("targetRows", target.rows);
    result.put("targetChecksum", Long.toHexString(target.sum) + "-" + Long.toHexString(target.xor));
    result.put("bytes", source.bytes);
    return result;
  }

  private static StateStoreConf storeConf(JsonNode plan, String side, String providerClass) {
    SQLConf sql = new SQLConf();
    plan.path("conf").fields().forEachRemaining(e -> sql.setConfString(e.getKey(), e.getValue().asText()));
    plan.path(side).fields().forEachRemaining(e -> sql.setConfString(e.getKey(), e.getValue().asText()));
    sql.setConfString(PROVIDER_CLASS_KEY, providerClass);
    return new StateStoreConf(sql, scala.collection.immutable.Map$.MODULE$.empty());
  }

  /**
   * The snapshot file of an empty state at {@code version}, as Spark's HDFS provider writes one: its
   * compressed stream (the store's codec) holding only the end marker -1. Loading that version then
   * starts from nothing, which is what {@code loadEmpty} means elsewhere.
   */
  private static void writeEmptyHdfsSnapshot(StateStoreId id, long version, StateStoreConf conf,
      Configuration hadoop) throws IOException {
    Path path = new Path(id.storeCheckpointLocation(), version + ".snapshot");
    FileSystem fs = path.getFileSystem(hadoop);
    CompressionCodec codec = CompressionCodec$.MODULE$.createCodec(SparkEnv.get().conf(), conf.compressionCodec());
    try (OutputStream raw = fs.create(path, true);
         DataOutputStream out = new DataOutputStream(codec.compressedOutputStream(raw))) {
      out.writeInt(-1);
    }
  }

  /**
   * Key count and an order-free checksum (sum and xor of a CRC-32 per pair) of the rows, each projected
   * to its schema's canonical UnsafeRow bytes first, so two providers that encode a row differently but
   * hold the same values agree.
   */
  static final class Checksum {
    private final UnsafeProjection keys;
    private final UnsafeProjection values;
    long rows;
    long bytes;
    long sum;
    long xor;

    Checksum(StructType keySchema, StructType valueSchema) {
      this.keys = UnsafeProjection.create(keySchema);
      this.values = UnsafeProjection.create(valueSchema);
    }

    void add(UnsafeRow key, UnsafeRow value) {
      byte[] k = keys.apply(key).getBytes();
      byte[] v = value == null ? new byte[0] : values.apply(value).getBytes();
      CRC32 crc = new CRC32();
      crc.update(k);
      crc.update(new byte[] {(byte) (k.length >>> 24), (byte) (k.length >>> 16), (byte) (k.length >>> 8),
          (byte) k.length});
      crc.update(v);
      long h = crc.getValue() * 0x9E3779B97F4A7C15L + k.length * 31L + v.length;
      rows++;
      bytes += k.length + v.length;
      sum += h;
      xor ^= h;
    }
  }
}
