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
    OomCounters unknown = new OomCounters(-1, -1);
    String text = ExitStatus.advice(137, unknown, unknown);
    check(text.contains("killed (SIGKILL)") && text.contains("probably killed for memory")
        && text.contains("spark.executor.memoryOverhead"), text);
    check(text.contains("spark.executor.pyspark.memory") && text.contains("does not cover"), text);
    equal("", ExitStatus.advice(143, unknown, unknown), "no advice for SIGTERM");
    equal("", ExitStatus.advice(1, unknown, unknown), "no advice for an exit by itself");
  }

  public static void testTheKernelsCountsTellAMemoryKillFromAnother() {
    String container = ExitStatus.advice(137, new OomCounters(2, 5), new OomCounters(3, 6));
    check(container.contains("container's memory limit killed it") && container.contains("from 2 to 3"), container);
    String machine = ExitStatus.advice(137, new OomCounters(-1, 5), new OomCounters(-1, 6));
    check(machine.contains("most likely killed for memory") && machine.contains("from 5 to 6"), machine);
    String other = ExitStatus.advice(137, new OomCounters(0, 5), new OomCounters(0, 5));
    check(other.contains("counted no out-of-memory kill") && other.contains("spark.executor.memoryOverhead"), other);
  }

  public static void testOomCountsAreReadFromCgroupV1AndV2() throws Exception {
    java.nio.file.Path dir = java.nio.file.Files.createTempDirectory("cgroup");
    try {
      java.nio.file.Path v2 = java.nio.file.Files.createDirectories(dir.resolve("kubepods/pod1"));
      java.nio.file.Files.writeString(v2.resolve("memory.events"), "low 0\nhigh 0\nmax 4\noom 2\noom_kill 2\n");
      java.nio.file.Path procV2 = java.nio.file.Files.writeString(dir.resolve("cgroup-v2"), "0::/kubepods/pod1\n");
      equal(2L, OomCounters.containerCount(procV2, dir), "cgroup v2 memory.events");
      java.nio.file.Path v1 = java.nio.file.Files.createDirectories(dir.resolve("memory/yarn/container_1"));
      java.nio.file.Files.writeString(v1.resolve("memory.oom_control"),
          "oom_kill_disable 0\nunder_oom 0\noom_kill 7\n");
      java.nio.file.Path procV1 = java.nio.file.Files.writeString(dir.resolve("cgroup-v1"),
          "5:cpu,cpuacct:/yarn/container_1\n4:memory:/yarn/container_1\n0::/\n");
      equal(7L, OomCounters.containerCount(procV1, dir), "cgroup v1 memory.oom_control");
      equal(-1L, OomCounters.containerCount(dir.resolve("missing"), dir), "no /proc/self/cgroup");
      check(OomCounters.read().machine >= 0, "/proc/vmstat's oom_kill is readable on Linux");
    } finally {
      WorkerDir.deleteTree(dir);
    }
  }
}
