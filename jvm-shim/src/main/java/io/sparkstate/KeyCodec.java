package io.sparkstate;

import java.util.ArrayList;
import java.util.List;
import org.apache.spark.sql.catalyst.expressions.BoundReference;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.Literal;
import org.apache.spark.sql.catalyst.expressions.Pmod;
import org.apache.spark.sql.catalyst.expressions.UnsafeProjection;
import org.apache.spark.sql.catalyst.expressions.UnsafeRow;
import org.apache.spark.sql.catalyst.plans.physical.HashPartitioning;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.LongType;
import org.apache.spark.sql.types.NullType;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.unsafe.Platform;

/**
 * Turns key rows into storage keys and back (docs/internals/keys.md, "Keys and key groups"):
 * {@code kg (i32 big-endian) + body}, where {@code kg} is the hash Spark's own shuffle computes over the
 * store's partition-key columns and the body is the key row (NoPrefix) or
 * {@code u32be(len(prefixRow)) + prefixRow + keyRow} (PrefixKeyScan). Values are plain UnsafeRow bytes.
 *
 * <p>The hash is taken from {@code HashPartitioning(cols, n).partitionIdExpression} rather than
 * re-implemented, so it follows Spark's choice of hash (collation-aware Murmur3, seed 42) byte for byte.
 * Projections are not thread-safe: one codec per store, used by the thread that holds the store.
 */
final class KeyCodec {
  /** The name ending of a stream-stream join's (key, index) → value store. */
  static final String JOIN_INDEXED_STORE_SUFFIX = "keyWithIndexToValue";

  private final StructType keySchema;
  private final int keyFields;
  private final int valueFields;
  private final boolean prefixed;
  private final UnsafeProjection hash; // null: no partition-key column, kg = 0
  private final UnsafeProjection prefix; // null unless prefixed
  private final boolean checkRouting;
  private final int numPartitions;
  private final int partitionId;
  /** A join keyWithIndexToValue store: the key columns, then the value's index (a long). */
  private final boolean joinIndexed;
  private UnsafeProjection withIndex; // created on first use: key columns + a long to set per index

  KeyCodec(StructType keySchema, StructType valueSchema, int numColsPrefixKey, String storeName,
      int numPartitions, int partitionId) {
    this.keySchema = keySchema;
    this.keyFields = keySchema.length();
    this.valueFields = valueSchema.length();
    this.prefixed = numColsPrefixKey > 0;
    this.numPartitions = numPartitions;
    this.partitionId = partitionId;
    int partitionCols = partitionKeyColumns(keySchema, numColsPrefixKey, storeName);
    List<Expression> refs = boundReferences(keySchema, partitionCols);
    boolean anyTyped = false;
    for (int i = 0; i < partitionCols; i++) {
      anyTyped |= !(keySchema.fields()[i].dataType() instanceof NullType);
    }
    this.checkRouting = anyTyped;
    this.hash = refs.isEmpty() ? null : UnsafeProjection.create(ScalaCollections.seq(List.of(hashExpression(refs, numPartitions))));
    this.prefix = prefixed ? UnsafeProjection.create(ScalaCollections.seq(boundReferences(keySchema, numColsPrefixKey))) : null;
    this.joinIndexed = !prefixed && storeName != null && storeName.endsWith(JOIN_INDEXED_STORE_SUFFIX)
        && keyFields > 1 && keySchema.fields()[keyFields - 1].dataType() instanceof LongType;
  }

  /** All key columns, the prefix for PrefixKeyScan, all but the trailing index for join keyWithIndexToValue. */
  static int partitionKeyColumns(StructType keySchema, int numColsPrefixKey, String storeName) {
    if (numColsPrefixKey > 0) {
      return numColsPrefixKey;
    }
    if (storeName != null && storeName.endsWith(JOIN_INDEXED_STORE_SUFFIX)) {
      return Math.max(0, keySchema.length() - 1);
    }
    return keySchema.length();
  }

  private static List<Expression> boundReferences(StructType schema, int count) {
    List<Expression> refs = new ArrayList<>(count);
    for (int i = 0; i < count; i++) {
      StructField f = schema.fields()[i];
      refs.add(new BoundReference(i, f.dataType(), f.nullable()));
    }
    return refs;
  }

  private static Expression hashExpression(List<Expression> refs, int numPartitions) {
    Expression partitionId = new HashPartitioning(ScalaCollections.seq(refs), numPartitions).partitionIdExpression();
    if (!(partitionId instanceof Pmod)) {
      throw new IllegalStateException("sparkstate expects HashPartitioning.partitionIdExpression to be "
          + "Pmod(hash, n), got " + partitionId + "; this Spark version is not supported");
    }
    return ((Pmod) partitionId).left();
  }


  /** True when every stored key's group routes it to this partition (the write path checks it). */
  boolean keyGroupsRoute() {
    return checkRouting;
  }

  /** The key group of a full key row, or of a prefix row (the hash reads only the leading columns). */
  private int keyGroup(UnsafeRow row) {
    return hash == null ? 0 : hash.apply(row).getInt(0);
  }

  /** The storage key of a full key row; with {@code checkRoute}, fails if the key belongs to another partition. */
  byte[] storageKey(UnsafeRow key, boolean checkRoute) {
    int kg = keyGroup(key);
    if (checkRoute && checkRouting) {
      int expected = Math.floorMod(kg, numPartitions);
      if (expected != partitionId) {
        throw new IllegalStateException("sparkstate: a key of partition " + expected + " (key group " + kg
            + ", " + numPartitions + " partitions) was written to the store of partition " + partitionId
            + ". The partition count seen by the shim does not match the one Spark routes with, or the "
            + "store's partition-key columns are not the operator's shuffle keys.");
      }
    }
    int size = key.getSizeInBytes();
    if (!prefixed) {
      byte[] out = new byte[4 + size];
      putIntBE(out, 0, kg);
      copyRow(key, out, 4);
      return out;
    }
    UnsafeRow p = prefix.apply(key);
    int plen = p.getSizeInBytes();
    byte[] out = new byte[8 + plen + size];
    putIntBE(out, 0, kg);
    putIntBE(out, 4, plen);
    copyRow(p, out, 8);
    copyRow(key, out, 8 + plen);
    return out;
  }

  /** True for a join's keyWithIndexToValue store, whose keys {@link #indexedStorageKey} can build. */
  boolean isJoinIndexed() {
    return joinIndexed;
  }

  /** True for a join's keyWithIndexToValue store whose key columns before the index are {@code keys}'s. */
  boolean indexesKeysOf(StructType keys) {
    if (!joinIndexed || keys.length() != keyFields - 1) {
      return false;
    }
    for (int i = 0; i < keys.length(); i++) {
      if (!keys.fields()[i].dataType().equals(keySchema.fields()[i].dataType())) {
        return false;
      }
    }
    return true;
  }

  /**
   * The storage key of (the columns of {@code key}, {@code index}) in a join's keyWithIndexToValue store:
   * the row Spark's join state manager builds for that value, by the same kind of projection.
   */
  byte[] indexedStorageKey(UnsafeRow key, long index) {
    if (!joinIndexed) {
      throw new IllegalStateException("indexedStorageKey needs a join keyWithIndexToValue store");
    }
    if (withIndex == null) {
      List<Expression> columns = boundReferences(keySchema, keyFields - 1);
      columns.add(new Literal(0L, DataTypes.LongType));
      withIndex = UnsafeProjection.create(ScalaCollections.seq(columns));
    }
    UnsafeRow row = withIndex.apply(key);
    row.setLong(keyFields - 1, index);
    return storageKey(row, false);
  }

  /** The byte prefix shared by all storage keys whose leading columns equal {@code prefixKey}. */
  byte[] scanPrefix(UnsafeRow prefixKey) {
    if (!prefixed) {
      throw new UnsupportedOperationException("prefixScan needs a PrefixKeyScanStateEncoderSpec store");
    }
    int kg = keyGroup(prefixKey);
    UnsafeRow p = prefix.apply(prefixKey); // canonical bytes, the same as projected from a full key
    int plen = p.getSizeInBytes();
    byte[] out = new byte[8 + plen];
    putIntBE(out, 0, kg);
    putIntBE(out, 4, plen);
    copyRow(p, out, 8);
    return out;
  }

  /**
   * How many leading bytes of the storage key at {@code off} are the scan prefix of its leading columns
   * (what {@link #scanPrefix} gives for them); 0 for a store without prefix scans.
   */
  int scanPrefixLength(byte[] data, int off) {
    return prefixed ? 8 + getIntBE(data, off + 4) : 0;
  }

  /** A key row pointing into {@code data} (no copy): the storage key without its kg and prefix parts. */
  UnsafeRow keyRow(byte[] data, int off, int len) {
    int body = 4;
    if (prefixed) {
      body = 8 + getIntBE(data, off + 4);
    }
    UnsafeRow row = new UnsafeRow(keyFields);
    row.pointTo(data, Platform.BYTE_ARRAY_OFFSET + off + body, len - body);
    return row;
  }

  UnsafeRow valueRow(byte[] data, int off, int len) {
    UnsafeRow row = new UnsafeRow(valueFields);
    row.pointTo(data, Platform.BYTE_ARRAY_OFFSET + off, len);
    return row;
  }

  /** A private copy of a value row's bytes (callers reuse their row buffers). */
  static byte[] valueBytes(UnsafeRow value) {
    byte[] out = new byte[value.getSizeInBytes()];
    copyRow(value, out, 0);
    return out;
  }

  private static void copyRow(UnsafeRow row, byte[] dst, int dstOff) {
    Platform.copyMemory(row.getBaseObject(), row.getBaseOffset(), dst, Platform.BYTE_ARRAY_OFFSET + dstOff,
        row.getSizeInBytes());
  }

  private static void putIntBE(byte[] b, int off, int v) {
    b[off] = (byte) (v >>> 24);
    b[off + 1] = (byte) (v >>> 16);
    b[off + 2] = (byte) (v >>> 8);
    b[off + 3] = (byte) v;
  }

  private static int getIntBE(byte[] b, int off) {
    return ((b[off] & 0xff) << 24) | ((b[off + 1] & 0xff) << 16) | ((b[off + 2] & 0xff) << 8) | (b[off + 3] & 0xff);
  }
}
