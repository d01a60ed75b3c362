package io.sparkstate;

import java.util.Locale;

/**
 * The watchdog's judgement of one worker process (docs/internals/workers.md, "Liveness"). The worker keeps
 * two counters in a shared file: its heartbeat, bumped by a thread of its own every interval, and its
 * progress, bumped by the store's work (frames handled, files moved, records restored). The worker is
 * <ul>
 *   <li><b>hung</b> when its heartbeat has not moved for the heartbeat timeout: the process is stopped,
 *   frozen, or a native call holds the interpreter lock;</li>
 *   <li><b>stuck</b> when a call has been in flight and the progress counter has not moved for the stall
 *   timeout: alive, but the call makes no headway (a deadlock in Python, say).</li>
 * </ul>
 * A busy worker is neither: a long restore or a throttled upload keeps both counters moving. Pure logic on
 * numbers passed in, so it is tested without processes.
 */
final class Liveness {
  private final long heartbeatTimeoutNanos;
  private final long stallTimeoutNanos;
  private long beats = Long.MIN_VALUE;
  private long beatSeenNanos;
  private long progress = Long.MIN_VALUE;
  private long progressSeenNanos;

  Liveness(long heartbeatTimeoutMs, long stallTimeoutMs, long nowNanos) {
    this.heartbeatTimeoutNanos = heartbeatTimeoutMs * 1_000_000L;
    this.stallTimeoutNanos = stallTimeoutMs * 1_000_000L;
    this.beatSeenNanos = nowNanos;
    this.progressSeenNanos = nowNanos;
  }

  /** The watchdog itself did not run for {@code pauseNanos} (a JVM pause): that silence is not the worker's. */
  synchronized void forgive(long pauseNanos) {
    beatSeenNanos += pauseNanos;
    progressSeenNanos += pauseNanos;
  }

  /**
   * Records the counters read at {@code nowNanos}; returns null while the worker is live, else why it is
   * not. {@code callSinceNanos} is when the call in flight started, 0 when none is.
   */
  synchronized String check(long nowNanos, long beats, long progress, long callSinceNanos) {
    if (beats != this.beats) {
      this.beats = beats;
      beatSeenNanos = nowNanos;
    }
    if (progress != this.progress) {
      this.progress = progress;
      progressSeenNanos = nowNanos;
    }
    long silent = nowNanos - beatSeenNanos;
    if (silent > heartbeatTimeoutNanos) {
      return "hung: its heartbeat stopped " + seconds(silent) + " ago (limit " + ShimSettings.HEARTBEAT_TIMEOUT
          + "=" + heartbeatTimeoutNanos / 1_000_000L + ")";
    }
    if (callSinceNanos != 0) {
      long still = nowNanos - Math.max(callSinceNanos, progressSeenNanos);
      if (still > stallTimeoutNanos) {
        return "stuck: it made no progress for " + seconds(still) + " (limit " + ShimSettings.STALL_TIMEOUT + "="
            + stallTimeoutNanos / 1_000_000L + ")";
      }
    }
    return null;
  }

  static String seconds(long nanos) {
    return String.format(Locale.ROOT, "%.1f s", nanos / 1e9);
  }
}
