package io.sparkstate;

/**
 * What a worker process's exit code says, for the message of the task it failed. Java reports a death by
 * signal N as exit code 128 + N. A SIGKILL that sparkstate did not send (its own kills of a hung worker
 * are reported as such before the process ends) is most often the kernel's out-of-memory killer, for the
 * machine or a container's memory limit: the message says what the kernel's counts tell
 * ({@link OomCounters}) and what to change.
 */
final class ExitStatus {
  private ExitStatus() {}

  private static final String[] SIGNALS = new String[32];

  static {
    SIGNALS[1] = "SIGHUP";
    SIGNALS[2] = "SIGINT";
    SIGNALS[3] = "SIGQUIT";
    SIGNALS[4] = "SIGILL";
    SIGNALS[6] = "SIGABRT";
    SIGNALS[7] = "SIGBUS";
    SIGNALS[8] = "SIGFPE";
    SIGNALS[9] = "SIGKILL";
    SIGNALS[11] = "SIGSEGV";
    SIGNALS[13] = "SIGPIPE";
    SIGNALS[15] = "SIGTERM";
  }

  /** "code 1", or "code 137 (killed by signal 9, SIGKILL)". */
  static String describe(int exitCode) {
    if (exitCode <= 128 || exitCode >= 128 + SIGNALS.length) {
      return "code " + exitCode;
    }
    int signal = exitCode - 128;
    return "code " + exitCode + " (killed by signal " + signal
        + (SIGNALS[signal] != null ? ", " + SIGNALS[signal] : "") + ")";
  }

  /**
   * What to do about a worker that ended with {@code exitCode}, given the kernel's OOM-kill counts at its
   * start and now: sentences, or "" when the code says nothing.
   */
  static String advice(int exitCode, OomCounters atStart, OomCounters now) {
    if (exitCode != 128 + 9) {
      return "";
    }
    return "The worker was killed (SIGKILL). " + atStart.verdict(now) + " Its memory counts in the executor's "
        + "container, not in the JVM heap: give it room with spark.executor.memoryOverhead (YARN, Kubernetes; "
        + "spark.executor.pyspark.memory is PySpark's own workers' budget and does not cover sparkstate's store "
        + "workers), or hold less state per worker (more state partitions; the rocksdb backend keeps its state "
        + "on disk).";
  }
}
