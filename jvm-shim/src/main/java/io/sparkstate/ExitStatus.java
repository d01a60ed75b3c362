package io.sparkstate;

/**
 * What a worker process's exit code says, for the message of the task it failed. Java reports a death by
 * signal N as exit code 128 + N. A SIGKILL that sparkstate did not send (its own kills of a hung worker
 * are reported as such before the process ends) is, on a machine or container with a memory limit, the
 * kernel's out-of-memory killer: the message says so and what to change.
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

  /** What to do about a worker that ended with {@code exitCode}: a sentence, or "" when the code says nothing. */
  static String advice(int exitCode) {
    if (exitCode != 128 + 9) {
      return "";
    }
    return "sparkstate sends SIGKILL only to a worker it reports as hung, so this one most likely came from the "
        + "kernel's out-of-memory killer (`dmesg` or the container's events show it). The worker's memory counts "
        + "in the executor's container: give it room (spark.executor.memoryOverhead on YARN and Kubernetes), or "
        + "hold less state per worker (more state partitions; the rocksdb backend keeps its state on disk).";
  }
}
