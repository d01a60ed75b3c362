package io.sparkstate;

import static io.sparkstate.ShimTests.check;
import static io.sparkstate.ShimTests.equal;

/** StoreFailures: which exception a failed call becomes, and how its message names the store. */
public final class StoreFailuresTest {
  private StoreFailuresTest() {}

  private static final String STORE = "sparkstate store [operator=0, partition=1, storeName=default, version=3]";

  public static void testAFailureNamesTheStoreOnceAndKeepsTheErrorText() {
    PythonStoreException passed = new PythonStoreException("raised", null);
    check(StoreFailures.classify(STORE, "get", null, passed) == passed, "a store exception is thrown as it is");
    RuntimeException other = new IllegalStateException("a bug");
    check(StoreFailures.classify(STORE, "get", null, other) == other, "an unrelated exception is thrown as it is");
    RuntimeException pool = StoreFailures.classify(STORE, "read metrics of", null,
        new WorkerFailedException("no worker"));
    check(pool instanceof WorkerFailedException, "a worker failure stays one");
    equal(STORE + ": cannot read metrics: no worker", pool.getMessage(), "named by the store");
    check(StoreFailures.classify(STORE, "commit", null, pool) == pool, "named only once");
    RuntimeException python = StoreFailures.classify(STORE, "commit", null, new py4j.Py4JException(
        "An error occurred while calling o1.commit.\nTrace:\nReturn Message: Traceback ...\n"
            + "RuntimeError: ConfigError: invalid value"));
    check(python instanceof PythonStoreException, "an error raised in Python");
    equal(STORE + ": cannot commit: ConfigError: invalid value", python.getMessage(), "one line, no traceback");
  }

  public static void testAnActionThatTakesTheStoreAsObjectLosesItsPrepositionAfterTheStoreName() {
    equal("read metrics", StoreFailures.withoutObject("read metrics of"), "'of' at the end");
    equal("read the changes of versions 20..21",
        StoreFailures.withoutObject("read the changes of versions 20..21 of"), "an inner 'of' stays");
    equal("commit", StoreFailures.withoutObject("commit"), "a plain verb");
  }

  public static void testAControlCallThatLostItsConnectionIsATransportFailure() {
    // py4j's callback client reports a dropped connection as a plain Py4JException around the network error
    check(StoreFailures.brokenControlConnection(new py4j.Py4JException("Error while sending a command.",
        new py4j.Py4JNetworkException("Error while sending a command: c\n..."))), "wrapped network error");
    check(StoreFailures.brokenControlConnection(new py4j.Py4JNetworkException("x")), "bare network error");
    check(!StoreFailures.brokenControlConnection(new py4j.Py4JException("An error occurred")),
        "an error raised in Python");
  }
}
