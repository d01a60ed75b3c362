package io.sparkstate;

import static io.sparkstate.ShimTests.equal;

import java.util.List;
import java.util.Map;

/** Which worker a task leases (WorkerPool.choose): the order the class comment promises. */
final class WorkerPoolTest {
  private static String choose(String preferred, List<String> idle, Map<String, Integer> held, long matching,
      int maxWorkers) {
    return WorkerPool.choose(preferred, idle, w -> w.startsWith("embedded"), w -> held.getOrDefault(w, 0),
        matching, maxWorkers);
  }

  public static void testThePreferredIdleWorkerWins() {
    equal("b", choose("b", List.of("a", "b"), Map.of("a", 0, "b", 3), 2, 4), "preferred");
  }

  public static void testAnIdleWorkerWithoutStoresComesNext() {
    equal("c", choose(null, List.of("a", "c"), Map.of("a", 2, "c", 0), 2, 4), "an empty worker");
  }

  public static void testTheExecutorGrowsBeforeMovingAStore() {
    equal(null, choose(null, List.of("a", "b"), Map.of("a", 2, "b", 1), 2, 4), "start a new worker");
  }

  public static void testAtMaxWorkersTheWorkerHoldingFewestStoresIsTaken() {
    equal("b", choose(null, List.of("a", "b"), Map.of("a", 2, "b", 1), 4, 4), "fewest stores");
  }

  public static void testWithNoIdleWorkerANewOneStartsEvenBeyondMaxWorkers() {
    equal(null, choose(null, List.of(), Map.of(), 9, 4), "never wait for a worker");
  }

  public static void testEmbeddedWorkersShareTheirStoresSoAnyIdleOneServes() {
    equal("embedded-2", choose(null, List.of("embedded-2", "embedded-1"), Map.of("embedded-2", 5), 2, 1),
        "the first idle embedded worker");
  }
}
