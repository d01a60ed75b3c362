package io.sparkstate;

import static io.sparkstate.ShimTests.check;
import static io.sparkstate.ShimTests.equal;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;

/** WorkerStderr: the excerpt an exception carries is short, and after a stack dump shows where it hung. */
public final class WorkerStderrTest {
  private WorkerStderrTest() {}

  private static WorkerStderr logOf(String text) {
    try {
      Path dir = Files.createTempDirectory("sparkstate-stderr-test-");
      Files.writeString(dir.resolve("stderr.log"), text);
      dir.toFile().deleteOnExit();
      dir.resolve("stderr.log").toFile().deleteOnExit();
      return new WorkerStderr(dir);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  public static void testAnExceptionCarriesTheLastLinesClipped() {
    StringBuilder text = new StringBuilder();
    for (int i = 0; i < 100; i++) {
      text.append("line ").append(i).append(i == 99 ? "x".repeat(500) : "").append('\n');
    }
    WorkerStderr log = logOf(text.toString());
    String tail = log.exceptionTail();
    check(tail.startsWith("line 85\n"), "the last 15 lines: " + tail);
    check(tail.contains("line 99" + "x".repeat(153) + "...\n"), "a long line clipped to 160 characters");
    check(tail.endsWith("\n(the executor log has the whole stderr tail)"), "points at the executor log");
    check(log.logTail().startsWith("line 20\n"), "the executor log gets 80 lines");
  }

  public static void testAfterAStackDumpTheThreadsDoingStoreWorkAreCarried() {
    String dump = "Thread 0x00007f1 (most recent call first):\n"
        + "  File \"/venv/sparkstate/worker/heartbeat.py\", line 40 in run\n\n"
        + "Current thread 0x00007f2 (most recent call first):\n"
        + "  File \"/venv/sparkstate/engine/store.py\", line 120 in commit\n"
        + "  File \"/venv/sparkstate/worker/control.py\", line 80 in commit\n";
    equal("Current thread 0x00007f2 (most recent call first):\n"
        + "  File \"/venv/sparkstate/engine/store.py\", line 120 in commit\n"
        + "  File \"/venv/sparkstate/worker/control.py\", line 80 in commit",
        WorkerStderr.busyThreadStacks(dump), "only the thread in store work");
    equal(null, WorkerStderr.busyThreadStacks("Traceback (most recent call last):\n  ...\nValueError: x"),
        "no dump");
    check(logOf("starting\n" + dump).exceptionTail().startsWith("Current thread 0x00007f2"), "the excerpt");
  }

  public static void testAMissingLogIsSaidSo() {
    WorkerStderr log = new WorkerStderr(Path.of("/nonexistent/sparkstate-worker"));
    check(log.logTail().startsWith("(cannot read /nonexistent/sparkstate-worker/stderr.log"), log.logTail());
  }
}
