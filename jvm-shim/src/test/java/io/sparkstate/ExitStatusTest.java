package io.sparkstate;

import static io.sparkstate.ShimTests.check;
import static io.sparkstate.ShimTests.equal;

/** A worker's exit code in words: signals by name, and a SIGKILL nobody in sparkstate sent read as memory. */
final class ExitStatusTest {
  public static void testAnExitByItselfIsItsCode() {
    equal("code 1", ExitStatus.describe(1), "exit 1");
    equal("code 0", ExitStatus.describe(0), "exit 0");
  }

  public static void testASignalIsNamed() {
    equal("code 143 (killed by signal 15, SIGTERM)", ExitStatus.describe(143), "SIGTERM");
    equal("code 135 (killed by signal 7, SIGBUS)", ExitStatus.describe(135), "SIGBUS");
    equal("code 158 (killed by signal 30)", ExitStatus.describe(158), "an unnamed signal");
  }

  public static void testASigkillPointsAtMemory() {
    equal("code 137 (killed by signal 9, SIGKILL)", ExitStatus.describe(137), "SIGKILL");
    String text = ExitStatus.advice(137);
    check(text.contains("out-of-memory killer") && text.contains("spark.executor.memoryOverhead"), text);
    equal("", ExitStatus.advice(143), "no advice for SIGTERM");
    equal("", ExitStatus.advice(1), "no advice for an exit by itself");
  }
}
