package io.sparkstate;

import static io.sparkstate.ShimTests.check;
import static io.sparkstate.ShimTests.equal;

public final class StoreFailureMessageTest {
  public static void testAnActionThatTakesTheStoreAsObjectLosesItsPrepositionAfterTheStoreName() {
    equal("read metrics", PythonStateStoreProvider.withoutObject("read metrics of"), "'of' at the end");
    equal("read the changes of versions 20..21",
        PythonStateStoreProvider.withoutObject("read the changes of versions 20..21 of"), "an inner 'of' stays");
    equal("commit", PythonStateStoreProvider.withoutObject("commit"), "a plain verb");
  }

  public static void testAControlCallThatLostItsConnectionIsATransportFailure() {
    // py4j's callback client reports a dropped connection as a plain Py4JException around the network error
    check(PythonStateStoreProvider.brokenControlConnection(new py4j.Py4JException("Error while sending a command.",
        new py4j.Py4JNetworkException("Error while sending a command: c\n..."))), "wrapped network error");
    check(PythonStateStoreProvider.brokenControlConnection(new py4j.Py4JNetworkException("x")), "bare network error");
    check(!PythonStateStoreProvider.brokenControlConnection(new py4j.Py4JException("An error occurred")),
        "an error raised in Python");
  }
}
