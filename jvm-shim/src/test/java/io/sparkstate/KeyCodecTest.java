package io.sparkstate;

import static io.sparkstate.ShimTests.check;
import static io.sparkstate.ShimTests.equal;
import static io.sparkstate.ShimTests.raises;

import java.util.Arrays;
import java.util.List;
import org.apache.spark.sql.catalyst.expressions.BoundReference;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.catalyst.expressions.Murmur3Hash;
import org.apache.spark.sql.catalyst.expressions.UnsafeProjection;
import org.apache.spark.sql.catalyst.expressions.UnsafeRow;
import org.apache.spark.sql.catalyst.plans.physical.HashPartitioning;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.unsafe.types.UTF8String;
import scala.jdk.javaapi.CollectionConverters;

/** Storage keys: the key group is Spark's own shuffle hash, routing is checked, rows round-trip. */
final class KeyCodecTest {
  private static final StructType KEY = new StructType().add("k", DataTypes.StringType).add("w", DataTypes.IntegerType);
  private static final StructType VALUE = new StructType().add("n", DataTypes.LongType);
  private static final UnsafeProjection TO_UNSAFE = UnsafeProjection.create(KEY);

  private static UnsafeRow key(String k, int w) {
    return TO_UNSAFE.apply(new GenericInternalRow(new Object[] {UTF8String.fromString(k), w})).copy();
  }

  private static List<Expression> refs() {
    return List.of(new BoundReference(0, DataTypes.StringType, true), new BoundReference(1, DataTypes.IntegerType, true));
  }

  private static int kg(byte[] storageKey) {
    return ((storageKey[0] & 0xff) << 24) | ((storageKey[1] & 0xff) << 16) | ((storageKey[2] & 0xff) << 8)
        | (storageKey[3] & 0xff);
  }

  public static void testTheKeyGroupIsSparksMurmur3AndRoutesLikeItsShuffle() {
    int n = 5;
    KeyCodec codec = new KeyCodec(KEY, VALUE, 0, "default", n, 0);
    Murmur3Hash murmur = new Murmur3Hash(CollectionConverters.asScala(refs()).toSeq(), 42);
    Expression partitionId = new HashPartitioning(CollectionConverters.asScala(refs()).toSeq(), n).partitionIdExpression();
    for (int i = 0; i < 200; i++) {
      UnsafeRow row = key("key-" + i, i * 7);
      int group = kg(codec.storageKey(row, false));
      equal(murmur.eval(row), group, "kg of row " + i);
      equal(partitionId.eval(row), Math.floorMod(group, n), "partition of row " + i);
    }
  }

  public static void testAKeyOfAnotherPartitionIsRefused() {
    int n = 4;
    UnsafeRow row = key("somewhere", 1);
    int home = Math.floorMod(kg(new KeyCodec(KEY, VALUE, 0, "default", n, 0).storageKey(row, false)), n);
    new KeyCodec(KEY, VALUE, 0, "default", n, home).storageKey(row, true);
    IllegalStateException e = raises(IllegalStateException.class,
        () -> new KeyCodec(KEY, VALUE, 0, "default", n, (home + 1) % n).storageKey(row, true), "wrong partition");
    check(e.getMessage().contains("partition " + home), e.getMessage());
  }

  public static void testKeyRowsRoundTripWithoutTheirKeyGroup() {
    KeyCodec codec = new KeyCodec(KEY, VALUE, 0, "default", 3, 0);
    UnsafeRow row = key("round-trip", 42);
    byte[] storage = codec.storageKey(row, false);
    UnsafeRow back = codec.keyRow(storage, 0, storage.length);
    equal(row.getBytes(), back.getBytes(), "key row bytes");
    equal("round-trip", back.getUTF8String(0).toString(), "column k");
  }

  public static void testAScanPrefixIsABytePrefixOfEveryKeyItCovers() {
    KeyCodec codec = new KeyCodec(KEY, VALUE, 1, "default", 3, 0);
    UnsafeProjection prefixOnly = UnsafeProjection.create(new StructType().add("k", DataTypes.StringType));
    byte[] prefix = codec.scanPrefix(prefixOnly.apply(new GenericInternalRow(new Object[] {UTF8String.fromString("s1")})));
    for (int w = 0; w < 5; w++) {
      byte[] full = codec.storageKey(key("s1", w), false);
      check(full.length > prefix.length && Arrays.equals(prefix, Arrays.copyOf(full, prefix.length)),
          "prefix of key s1/" + w);
      UnsafeRow back = codec.keyRow(full, 0, full.length);
      equal(w, back.getInt(1), "column w of s1/" + w);
      byte[] framed = new byte[full.length + 5];
      System.arraycopy(full, 0, framed, 5, full.length);
      equal(prefix.length, codec.scanPrefixLength(framed, 5), "scan prefix length of s1/" + w);
    }
    equal(0, new KeyCodec(KEY, VALUE, 0, "default", 3, 0).scanPrefixLength(prefix, 0), "without prefix scans");
    byte[] other = codec.storageKey(key("s2", 0), false);
    check(!Arrays.equals(prefix, Arrays.copyOf(other, prefix.length)), "another session is not covered");
  }

  public static void testAJoinIndexStoreRoutesByTheKeyWithoutItsIndex() {
    equal(1, KeyCodec.partitionKeyColumns(KEY, 0, "left-keyWithIndexToValue"), "keyWithIndexToValue");
    equal(2, KeyCodec.partitionKeyColumns(KEY, 0, "left-keyToNumValues"), "keyToNumValues");
    equal(1, KeyCodec.partitionKeyColumns(KEY, 1, "default"), "prefix scan");
  }

  public static void testAJoinIndexKeyIsTheRowSparksJoinStateManagerBuilds() {
    StructType joinKey = new StructType().add("id", DataTypes.StringType).add("t", DataTypes.IntegerType);
    StructType withIndex = joinKey.add("index", DataTypes.LongType);
    KeyCodec counts = new KeyCodec(joinKey, VALUE, 0, "left-keyToNumValues", 4, 0);
    KeyCodec values = new KeyCodec(withIndex, VALUE, 0, "left-keyWithIndexToValue", 4, 0);
    check(values.isJoinIndexed(), "keyWithIndexToValue with a trailing long is indexed");
    check(!counts.isJoinIndexed(), "keyToNumValues is not");
    check(values.indexesKeysOf(joinKey), "its key columns before the index are the join key's");
    check(!values.indexesKeysOf(new StructType().add("id", DataTypes.StringType)), "fewer columns");
    check(!values.indexesKeysOf(new StructType().add("id", DataTypes.StringType).add("t", DataTypes.LongType)),
        "another type");
    // Spark's KeyWithIndexToValueStore: the key's attributes and a long literal, the index set per value.
    List<Expression> exprs = new java.util.ArrayList<>(refs());
    exprs.add(new org.apache.spark.sql.catalyst.expressions.Literal(1L, DataTypes.LongType));
    UnsafeProjection spark = UnsafeProjection.create(CollectionConverters.asScala(exprs).toSeq());
    UnsafeRow key = key("a key of some length", 9);
    for (long index : new long[] {0, 1, 7, 1L << 40}) {
      UnsafeRow expected = spark.apply(key);
      expected.setLong(2, index);
      equal(Arrays.toString(values.storageKey(expected, false)), Arrays.toString(values.indexedStorageKey(key, index)),
          "storage key of index " + index);
    }
    raises(IllegalStateException.class, () -> counts.indexedStorageKey(key, 0), "not an indexed store");
  }
}
