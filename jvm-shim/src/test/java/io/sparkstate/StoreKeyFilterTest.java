package io.sparkstate;

import static io.sparkstate.ShimTests.check;
import static io.sparkstate.ShimTests.equal;

import java.nio.charset.StandardCharsets;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;

/** StoreKeyFilter: when a store trusts its filter, and how puts and full scans keep it current. */
public final class StoreKeyFilterTest {
  private StoreKeyFilterTest() {}

  private static final StructType KEY = new StructType().add("k", DataTypes.StringType);
  private static final StructType VALUE = new StructType().add("n", DataTypes.LongType);

  private static KeyCodec codec() {
    return new KeyCodec(KEY, VALUE, 0, "default", 1, 0);
  }

  private static byte[] key(int i) {
    return ("key-" + i).getBytes(StandardCharsets.UTF_8);
  }

  /** How many of keys from..to-1 the filter answers "absent" for. */
  private static int absent(StoreKeyFilter keys, int from, int to) {
    int n = 0;
    for (int i = from; i < to; i++) {
      n += keys.mayHold(key(i)) ? 0 : 1;
    }
    return n;
  }

  public static void testWithoutATrustedFilterEveryGetAsksTheWorker() {
    StoreKeyFilter keys = new StoreKeyFilter(null, 1000, codec());
    keys.put(key(1));
    equal(0, absent(keys, 0, 100), "absent answers without a trusted filter");
    equal(0L, keys.filteredGets(), "filtered gets");
    equal(0L, keys.sizeInBytes(), "no filter, no bytes");
  }

  public static void testAFullScanThatEndsBuildsTheTrustedFilterWithThePutsMadeMeanwhile() {
    StoreKeyFilter keys = new StoreKeyFilter(null, 1000, codec());
    KeyFilter.Builder feed = keys.fullScanStarts();
    check(feed != null, "a store without a filter builds one from its next full scan");
    check(keys.fullScanStarts() == feed, "a second full scan meanwhile feeds the same builder");
    for (int i = 0; i < 50; i++) {
      keys.scanned(feed, key(i), 0, key(i).length);
    }
    keys.put(key(50));
    equal(0, absent(keys, 0, 1000), "not trusted before the scan ended");
    keys.fullScanEnded(feed);
    check(keys.trusted() != null, "trusted once the scan ended");
    equal(0, absent(keys, 0, 51), "every scanned and put key may be present");
    int filtered = absent(keys, 51, 1000);
    check(filtered > 900, "most keys never seen are absent: " + filtered);
    equal((long) filtered, keys.filteredGets(), "each absent answer is counted");
    check(keys.fullScanStarts() == null, "a fresh trusted filter needs no rebuild");
  }

  public static void testEndingAScanTwiceBuildsOneFilter() {
    StoreKeyFilter keys = new StoreKeyFilter(null, 1000, codec());
    KeyFilter.Builder first = keys.fullScanStarts();
    keys.fullScanEnded(first);
    KeyFilter trusted = keys.trusted();
    keys.fullScanEnded(first);
    check(keys.trusted() == trusted, "ending the same scan twice builds nothing new");
  }

  public static void testAStoreWithoutFiltersBuildsNone() {
    StoreKeyFilter keys = new StoreKeyFilter(null, 0, codec());
    check(keys.fullScanStarts() == null, "maxKeys 0: no builder");
    keys.fullScanEnded(null);
    check(keys.trusted() == null, "nothing trusted");
  }
}
