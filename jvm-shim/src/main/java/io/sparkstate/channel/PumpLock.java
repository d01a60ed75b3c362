package io.sparkstate.channel;

import java.util.concurrent.atomic.AtomicBoolean;

/**
 * Orders the task threads' data calls into the embedded interpreter before they reach the GIL.
 *
 * <p>Two task threads calling Python at once meet at the GIL, and a thread that waits for the GIL
 * sleeps on a futex. On an otherwise idle VM its vCPU then halts, and waking it costs 40-90 us
 * (docs/benchmarks/index.md, "Latency mode"): far more than the 5-10 us a data call holds the GIL. Waiting here
 * instead spins (then yields), so the waiter's vCPU never halts and the handover costs nanoseconds. Only
 * short data calls take this lock; control calls (commit, load) go to the GIL directly.
 */
final class PumpLock {
  /** Spins before yielding; a data call is a few microseconds, so this covers most waits. */
  private static final int SPINS_BEFORE_YIELD = 2000;
  static final PumpLock INSTANCE = new PumpLock();

  private final AtomicBoolean held = new AtomicBoolean();

  void lock() {
    int spins = 0;
    while (!held.compareAndSet(false, true)) {
      if (spins < SPINS_BEFORE_YIELD) {
        spins++;
        Thread.onSpinWait();
      } else {
        Thread.yield();
      }
    }
  }

  void unlock() {
    held.set(false);
  }
}
