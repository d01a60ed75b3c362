package io.sparkstate;

import static io.sparkstate.ShimTests.check;
import static io.sparkstate.ShimTests.equal;

import java.nio.charset.StandardCharsets;
import java.util.List;

/** ReadAheadCache: answers as the worker would, follows the store's writes, stops a pass that misses. */
public final class ReadAheadCacheTest {
  private ReadAheadCacheTest() {}

  private static byte[] bytes(String s) {
    return s.getBytes(StandardCharsets.UTF_8);
  }

  public static void testFetchedValuesAnswerGetsAndFollowTheStoresWrites() {
    ReadAheadCache cache = new ReadAheadCache();
    equal(null, cache.get(bytes("k1")), "nothing fetched");
    check(cache.worthFetching(), "the first fetch");
    cache.fetched(List.of(bytes("k1"), bytes("k2"), bytes("k3")), new byte[][] {bytes("v1"), null, bytes("v3")});
    byte[] v1 = cache.get(bytes("k1"));
    equal(bytes("v1"), v1, "a fetched value");
    v1[0] = 'X';
    equal(bytes("v1"), cache.get(bytes("k1")), "a copy: the caller's row cannot change it");
    check(cache.get(bytes("k2")) == ReadAheadCache.ABSENT, "fetched as absent");
    equal(null, cache.get(bytes("k9")), "not fetched: ask the worker");
    cache.put(bytes("k2"), bytes("new"));
    cache.remove(bytes("k3"));
    cache.put(bytes("k9"), bytes("v9"));
    equal(bytes("new"), cache.get(bytes("k2")), "a put after the fetch");
    check(cache.get(bytes("k3")) == ReadAheadCache.ABSENT, "a remove after the fetch");
    equal(null, cache.get(bytes("k9")), "a put of a key not fetched adds nothing");
    equal(5L, cache.gets(), "gets answered");
    cache.drop();
    equal(null, cache.get(bytes("k1")), "dropped on commit or abort");
  }

  public static void testAFetchThatAnsweredNoGetStopsThePass() {
    ReadAheadCache cache = new ReadAheadCache();
    cache.fetched(List.of(bytes("k1")), new byte[][] {bytes("v1")});
    cache.get(bytes("k1"));
    check(cache.worthFetching(), "the last fetch answered a get");
    cache.fetched(List.of(bytes("k2")), new byte[][] {bytes("v2")});
    check(!cache.worthFetching(), "the last fetch answered none");
    equal(null, cache.get(bytes("k2")), "its values are dropped");
  }
}
