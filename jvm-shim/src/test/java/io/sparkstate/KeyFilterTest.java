package io.sparkstate;

import static io.sparkstate.ShimTests.check;
import static io.sparkstate.ShimTests.equal;

import java.nio.charset.StandardCharsets;
import java.util.Random;
import org.apache.hadoop.conf.Configuration;
import org.apache.spark.sql.execution.streaming.state.StateStoreConf;
import org.apache.spark.sql.execution.streaming.state.StateStoreId;
import org.apache.spark.sql.internal.SQLConf;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;

/** KeyFilter: never a false "absent", few false "present", growth, saturation and wear. */
public final class KeyFilterTest {
  private KeyFilterTest() {}

  private static byte[] key(int i) {
    return ("key-" + i).getBytes(StandardCharsets.UTF_8);
  }

  /** The filter a full scan of keys 0..n-1 builds. */
  private static KeyFilter scanned(int n, long maxKeys) {
    KeyFilter.Builder builder = new KeyFilter.Builder(maxKeys);
    for (int i = 0; i < n; i++) {
      builder.addHash(KeyFilter.hash(key(i)));
    }
    return builder.build();
  }

  public static void testEveryAddedKeyIsReportedPresentAcrossGrowth() {
    KeyFilter f = new KeyFilter(1_000_000);
    for (int i = 0; i < 200_000; i++) {
      f.add(key(i));
    }
    for (int i = 0; i < 200_000; i++) {
      check(f.mightContain(key(i)), "added key " + i + " reported absent");
    }
    check(f.sizeInBytes() > 200_000L * 12 / 8, "grew to hold 200k keys: " + f.sizeInBytes() + " bytes");
  }

  public static void testFewKeysNeverAddedAreReportedPresent() {
    KeyFilter f = new KeyFilter(1_000_000);
    for (int i = 0; i < 100_000; i++) {
      f.add(key(i));
    }
    int falsePositives = 0;
    for (int i = 100_000; i < 200_000; i++) {
      if (f.mightContain(key(i))) {
        falsePositives++;
      }
    }
    // 12 bits and 8 probes per key: about 0.3% per full segment; the chain has up to six.
    check(falsePositives < 2_000, falsePositives + " of 100000 absent keys reported present");
  }

  public static void testAddingASliceEqualsAddingTheKey() {
    KeyFilter f = new KeyFilter(1000);
    byte[] k = key(42);
    byte[] framed = new byte[k.length + 7];
    System.arraycopy(k, 0, framed, 3, k.length);
    f.addHash(KeyFilter.hash(framed, 3, k.length));
    check(f.mightContain(k), "a key added from a slice of a larger array");
    equal(KeyFilter.hash(k), KeyFilter.hash(framed, 3, k.length), "hash of the slice");
  }

  public static void testHashUsesEveryByte() {
    Random rnd = new Random(7);
    for (int len = 0; len < 40; len++) {
      byte[] a = new byte[len + 1];
      rnd.nextBytes(a);
      for (int i = 0; i < a.length; i++) {
        byte[] b = a.clone();
        b[i] ^= 1;
        check(KeyFilter.hash(a) != KeyFilter.hash(b), "flipping byte " + i + " of " + a.length + " kept the hash");
      }
    }
    check(KeyFilter.hash(new byte[3]) != KeyFilter.hash(new byte[4]), "zero keys of different lengths collide");
  }

  public static void testPastMaxKeysEveryKeyIsPresentAndTheBitsAreFreed() {
    KeyFilter f = new KeyFilter(10_000);
    for (int i = 0; i < 10_000; i++) {
      f.add(key(i));
    }
    check(!f.saturated(), "holds maxKeys keys");
    for (int i = 10_000; i < 30_000 && !f.saturated(); i++) {
      f.add(key(i));
    }
    check(f.saturated(), "saturated past maxKeys");
    check(f.mightContain(key(123_456_789)), "a saturated filter answers 'maybe' for everything");
    equal(0L, f.sizeInBytes(), "bytes of a saturated filter");
    check(!f.worn(), "a saturated filter is not rebuilt by every scan");
  }

  public static void testAFilterBuiltFromAScanHoldsItsKeysInOneSegmentSizedForTwiceThem() {
    KeyFilter f = scanned(50_000, 1_000_000);
    for (int i = 0; i < 50_000; i++) {
      check(f.mightContain(key(i)), "scanned key " + i + " reported absent");
    }
    equal(100_000L * 12 / 8, f.sizeInBytes(), "bytes: 12 bits for each of twice the scanned keys");
    check(!f.worn(), "fresh from a scan");
    for (int i = 0; i < 50_000; i++) {
      f.add(key(i)); // keys already in do not count
    }
    check(!f.worn(), "re-adding the scanned keys");
    for (int i = 50_000; i < 70_000; i++) {
      f.add(key(i));
    }
    check(!f.worn(), "70% full");
    for (int i = 70_000; i < 76_000; i++) {
      f.add(key(i));
    }
    check(f.worn(), "three-quarters full: the next scan rebuilds it");
    for (int i = 76_000; i < 100_000; i++) {
      f.add(key(i));
    }
    equal(100_000L * 12 / 8, f.sizeInBytes(), "as many new keys as scanned fit without growing");
    for (int i = 0; i < 100_000; i++) {
      check(f.mightContain(key(i)), "key " + i + " reported absent");
    }
  }

  public static void testABuilderPastMaxKeysBuildsASaturatedFilter() {
    KeyFilter f = scanned(101, 100);
    check(f.saturated() && f.mightContain(key(123_456)), "saturated: everything may be present");
  }

  private static ProviderCore provider(String storeName, StructType keySchema) {
    ProviderCore p = new ProviderCore();
    p.init(new StateStoreId("/tmp/sparkstate-key-filter-test", 0, 0, storeName), keySchema,
        new StructType().add("v", DataTypes.LongType), 0,
        new StateStoreConf(new SQLConf(), scala.collection.immutable.Map$.MODULE$.empty()), new Configuration(),
        false);
    return p;
  }

  public static void testAJoinsIndexedStoreKeepsNoFilter() {
    long configured = ShimSettings.declaration(ShimSettings.KEY_FILTER_MAX_KEYS).get("default").asLong();
    StructType counted = new StructType().add("k", DataTypes.IntegerType);
    StructType indexed = counted.add("index", DataTypes.LongType);
    equal(configured, provider("left-keyToNumValues", counted).keyFilterMaxKeys(), "keyToNumValues");
    equal(configured, provider("default", indexed).keyFilterMaxKeys(), "an aggregation keyed by (k, index)");
    // Its gets are of the (key, index) pairs keyToNumValues counts: all present, so a filter never answers.
    equal(0L, provider("left-keyWithIndexToValue", indexed).keyFilterMaxKeys(), "keyWithIndexToValue");
  }
}
