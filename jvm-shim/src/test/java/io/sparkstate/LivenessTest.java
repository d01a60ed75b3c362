package io.sparkstate;

import static io.sparkstate.ShimTests.check;

/** The watchdog's judgement: hung, stuck, busy, and a pause of its own forgiven. */
final class LivenessTest {
  private static final long MS = 1_000_000L;

  public static void testABeatingWorkerWithoutACallIsLive() {
    Liveness l = new Liveness(1000, 5000, 0);
    for (long t = 0; t < 20_000; t += 100) {
      check(l.check(t * MS, t / 100, 0, 0) == null, "beating worker judged at " + t + " ms");
    }
  }

  public static void testNoBeatForTheTimeoutIsHung() {
    Liveness l = new Liveness(1000, 600_000, 0);
    check(l.check(500 * MS, 7, 0, 0) == null, "live at 500 ms");
    check(l.check(1400 * MS, 7, 0, 0) == null, "0.9 s of silence is within the 1 s timeout");
    String verdict = l.check(1600 * MS, 7, 0, 0);
    check(verdict != null && verdict.startsWith("hung: its heartbeat stopped 1.1 s ago"), "verdict " + verdict);
    check(verdict.contains(ShimSettings.HEARTBEAT_TIMEOUT + "=1000"), "names the setting: " + verdict);
  }

  public static void testACallWithoutProgressIsStuckButProgressKeepsItBusy() {
    Liveness l = new Liveness(1000, 3000, 0);
    long callStart = 100 * MS;
    long beats = 0;
    long progress = 0;
    for (long t = 200; t <= 10_000; t += 200) {  // a long upload: beats and progress both move
      check(l.check(t * MS, ++beats, ++progress, callStart) == null, "busy call judged at " + t + " ms");
    }
    for (long t = 10_200; t <= 13_000; t += 200) {  // beats go on, progress stops
      check(l.check(t * MS, ++beats, progress, callStart) == null, "within the stall timeout at " + t);
    }
    String verdict = l.check(13_200 * MS, ++beats, progress, callStart);
    check(verdict != null && verdict.startsWith("stuck: it made no progress for 3.2 s"), "verdict " + verdict);
  }

  public static void testStallIsMeasuredFromTheStartOfTheCall() {
    Liveness l = new Liveness(1000, 3000, 0);
    check(l.check(10_000 * MS, 1, 5, 0) == null, "idle");
    // progress stopped long ago, but the call began just now
    check(l.check(11_000 * MS, 2, 5, 10_500 * MS) == null, "a new call is not stuck at once");
    check(l.check(13_600 * MS, 3, 5, 10_500 * MS) != null, "stuck 3.1 s after the call began");
  }

  public static void testAPauseOfTheWatchdogIsForgiven() {
    Liveness l = new Liveness(1000, 600_000, 0);
    check(l.check(100 * MS, 1, 0, 0) == null, "live");
    l.forgive(5000 * MS);  // the watchdog itself did not run for 5 s
    check(l.check(5200 * MS, 1, 0, 0) == null, "the silence during the pause is not the worker's");
    check(l.check(6300 * MS, 1, 0, 0) != null, "silence after the pause counts");
  }
}
