package io.sparkstate;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;

/**
 * The kernel's counts of out-of-memory kills, read when a worker starts and again when it dies by a SIGKILL
 * sparkstate did not send, so the task's error can say whether memory killed it:
 *
 * <ul>
 *   <li>{@code container}: {@code oom_kill} of this JVM's memory cgroup (its workers share it): cgroup v2's
 *       {@code memory.events}, cgroup v1's {@code memory.oom_control}. It rises when the container's memory
 *       limit kills a process in it (Kubernetes, YARN with cgroups, Docker).
 *   <li>{@code machine}: {@code oom_kill} of {@code /proc/vmstat}, every OOM kill on the machine.
 * </ul>
 *
 * A count that cannot be read is -1.
 */
final class OomCounters {
  final long container;
  final long machine;

  OomCounters(long container, long machine) {
    this.container = container;
    this.machine = machine;
  }

  static OomCounters read() {
    return new OomCounters(containerCount(Paths.get("/proc/self/cgroup"), Paths.get("/sys/fs/cgroup")),
        counter(Paths.get("/proc/vmstat"), "oom_kill"));
  }

  /**
   * Why a worker ended by a SIGKILL sparkstate did not send, given the counts at its start ({@code this})
   * and now: a sentence that says whether memory killed it.
   */
  String verdict(OomCounters now) {
    if (container >= 0 && now.container > container) {
      return "Its container's memory limit killed it (the cgroup's oom_kill count rose from " + container + " to "
          + now.container + " while it ran).";
    }
    if (machine >= 0 && now.machine > machine) {
      return "It was most likely killed for memory: the kernel's out-of-memory killer acted while it ran "
          + "(oom_kill in /proc/vmstat rose from " + machine + " to " + now.machine + ").";
    }
    if (machine >= 0 && now.machine == machine) {
      return "The kernel counted no out-of-memory kill while it ran, so another process sent the SIGKILL: a "
          + "memory monitor (YARN's NodeManager, a container runtime) does so for memory, anything else by hand.";
    }
    return "It was probably killed for memory: sparkstate sends SIGKILL only to a worker it reports as hung, "
        + "so this one most likely came from the kernel's out-of-memory killer (`dmesg` or the container's "
        + "events show it).";
  }

  /** oom_kill of the memory cgroup named in {@code procCgroup}, under the cgroup mount {@code mount}. */
  static long containerCount(Path procCgroup, Path mount) {
    String lines;
    try {
      lines = Files.readString(procCgroup);
    } catch (IOException | RuntimeException e) {
      return -1;
    }
    for (String line : lines.split("\n")) {
      String[] parts = line.split(":", 3);
      if (parts.length != 3) {
        continue;
      }
      String relative = parts[2].startsWith("/") ? parts[2].substring(1) : parts[2];
      if (parts[0].equals("0") && parts[1].isEmpty()) {
        long v2 = counter(mount.resolve(relative).resolve("memory.events"), "oom_kill");
        if (v2 >= 0) {
          return v2;
        }
      } else if (java.util.Arrays.asList(parts[1].split(",")).contains("memory")) {
        long v1 = counter(mount.resolve("memory").resolve(relative).resolve("memory.oom_control"), "oom_kill");
        if (v1 >= 0) {
          return v1;
        }
      }
    }
    return -1;
  }

  /** The value of the line {@code "<name> <value>"} of a counter file, or -1. */
  static long counter(Path file, String name) {
    try {
      for (String line : Files.readAllLines(file)) {
        String[] kv = line.trim().split("\\s+");
        if (kv.length == 2 && kv[0].equals(name)) {
          return Long.parseLong(kv[1]);
        }
      }
    } catch (IOException | RuntimeException e) {
      return -1;
    }
    return -1;
  }
}
