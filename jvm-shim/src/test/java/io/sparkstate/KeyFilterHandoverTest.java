package io.sparkstate;

import static io.sparkstate.ShimTests.check;

/** KeyFilterHandover: a committed filter goes only to a store that loads exactly what that commit made. */
public final class KeyFilterHandoverTest {
  private KeyFilterHandoverTest() {}

  public static void testAnEmptyStoreGetsANewFilterUnlessFiltersAreOff() {
    KeyFilterHandover handover = new KeyFilterHandover();
    check(handover.forLoad(0, "", true, 1000) != null, "an empty store: a new filter");
    check(handover.forLoad(0, "", true, 0) == null, "maxKeys 0: none");
    check(handover.forLoad(3, "", false, 1000) == null, "nothing committed: none");
  }

  public static void testTheCommittedFilterGoesToTheVersionAndAttemptItMade() {
    KeyFilterHandover handover = new KeyFilterHandover();
    KeyFilter filter = new KeyFilter(1000);
    handover.committed(5, "attempt-a", filter);
    check(handover.forLoad(5, "attempt-a", false, 1000) == filter, "the version and attempt committed");
    check(handover.forLoad(5, "", false, 1000) == filter, "the version, no attempt asked for (format 1)");
    check(handover.forLoad(5, "attempt-b", false, 1000) == null, "another attempt of the version");
    check(handover.forLoad(4, "attempt-a", false, 1000) == null, "another version");
    check(handover.forLoad(5, "attempt-a", false, 0) == null, "filters turned off");
    handover.committed(6, "", null);
    check(handover.forLoad(6, "", false, 1000) == null, "a commit without a trusted filter leaves none");
    handover.committed(7, "", filter);
    handover.drop();
    check(handover.forLoad(7, "", false, 1000) == null, "dropped when the provider closes");
  }
}
