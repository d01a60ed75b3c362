package io.sparkstate;

import static io.sparkstate.ShimTests.equal;

public final class StoreFailureMessageTest {
  public static void testAnActionThatTakesTheStoreAsObjectLosesItsPrepositionAfterTheStoreName() {
    equal("read metrics", PythonStateStoreProvider.withoutObject("read metrics of"), "'of' at the end");
    equal("read the changes of versions 20..21",
        PythonStateStoreProvider.withoutObject("read the changes of versions 20..21 of"), "an inner 'of' stays");
    equal("commit", PythonStateStoreProvider.withoutObject("commit"), "a plain verb");
  }
}
