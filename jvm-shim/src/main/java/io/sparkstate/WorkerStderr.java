package io.sparkstate;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A worker process's stderr log ({@code <dir>/stderr.log}, its stdout too), the only place the cause of a
 * worker's failure is written: the short excerpt an exception carries, the longer tail the executor log
 * gets, and the Python stacks a hung worker is asked to write into it before it is killed.
 */
final class WorkerStderr {
  private static final Logger LOG = LoggerFactory.getLogger(WorkerStderr.class);
  /**
   * Lines of the worker's stderr carried in an exception. Kept short on purpose: Spark matches a
   * foreachBatch failure's whole message against a regular expression that recurses once per character
   * (StreamExecution.PROXY_ERROR), and a message of a few thousand characters overflows the stream thread's
   * stack and leaves the query hanging. The whole tail goes to the executor log instead.
   */
  private static final int EXCEPTION_TAIL_LINES = 15;
  private static final int EXCEPTION_TAIL_LINE_CHARS = 160;
  private static final int LOG_TAIL_LINES = 80;
  /** How long a hung worker gets to write its Python stacks to stderr (SIGUSR1, faulthandler) before SIGKILL. */
  private static final long STACK_DUMP_WAIT_MS = 500;
  /** Frames of a faulthandler dump that show store work, as opposed to a worker's idle threads. */
  private static final java.util.regex.Pattern STORE_WORK =
      java.util.regex.Pattern.compile("sparkstate/(engine|checkpoint|storage|rescaling)/|worker/(control|dispatcher)\\.py");

  private final Path log;

  /** The log in the worker's private directory {@code dir}. */
  WorkerStderr(Path dir) {
    this.log = dir.resolve("stderr.log");
  }

  /** The log file, where the worker's output is appended. */
  Path file() {
    return log;
  }

  /**
   * The short stderr excerpt an exception carries (see {@link #EXCEPTION_TAIL_LINES}): after a stack dump,
   * the stacks of the threads that were doing store work (where the worker hung), else the last lines.
   */
  String exceptionTail() {
    String tail = tail(LOG_TAIL_LINES, Integer.MAX_VALUE);
    String busy = busyThreadStacks(tail);
    String excerpt = busy != null ? busy : lastLines(tail, EXCEPTION_TAIL_LINES);
    return clip(excerpt) + "\n(the executor log has the whole stderr tail)";
  }

  /** The tail the executor log gets when the worker dies. */
  String logTail() {
    return tail(LOG_TAIL_LINES, Integer.MAX_VALUE);
  }

  /**
   * Asks the worker process {@code pid} for the Python stack of every thread (SIGUSR1; the worker registers
   * faulthandler for it) and waits, briefly, until the dump is in the log.
   */
  void dumpStacks(long pid, String workerId) {
    long before = log.toFile().length();
    try {
      new ProcessBuilder("kill", "-USR1", Long.toString(pid)).redirectErrorStream(true)
          .redirectOutput(ProcessBuilder.Redirect.DISCARD).start().waitFor(1, TimeUnit.SECONDS);
      long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(STACK_DUMP_WAIT_MS);
      long size = before;
      while (System.nanoTime() < deadline) { // the dump is written at once; wait until it stops growing
        Thread.sleep(50);
        long now = log.toFile().length();
        if (now > before && now == size) {
          break;
        }
        size = now;
      }
    } catch (IOException | RuntimeException e) {
      LOG.debug("sparkstate worker {}: cannot ask for a stack dump", workerId, e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  /** The thread blocks of a stack dump in {@code tail} that show store work (innermost frames), or null. */
  static String busyThreadStacks(String tail) {
    StringBuilder out = new StringBuilder();
    for (String block : tail.split("\n\n")) {
      String b = block.strip();
      if ((b.startsWith("Thread 0x") || b.startsWith("Current thread 0x")) && STORE_WORK.matcher(b).find()) {
        out.append(b.lines().limit(EXCEPTION_TAIL_LINES).collect(java.util.stream.Collectors.joining("\n")))
            .append("\n");
      }
    }
    return out.length() == 0 ? null : out.toString().stripTrailing();
  }

  private static String lastLines(String text, int n) {
    List<String> lines = text.lines().collect(java.util.stream.Collectors.toList());
    return String.join("\n", lines.subList(Math.max(0, lines.size() - n), lines.size()));
  }

  private static String clip(String text) {
    StringBuilder out = new StringBuilder();
    text.lines().limit(2L * EXCEPTION_TAIL_LINES).forEach(line -> out.append(line.length() <= EXCEPTION_TAIL_LINE_CHARS
        ? line : line.substring(0, EXCEPTION_TAIL_LINE_CHARS) + "...").append('\n'));
    return out.toString().stripTrailing();
  }

  private String tail(int maxLines, int maxLineChars) {
    try (java.io.RandomAccessFile f = new java.io.RandomAccessFile(log.toFile(), "r")) {
      long start = Math.max(0, f.length() - 64 * 1024); // enough for 40 lines of a traceback
      byte[] bytes = new byte[(int) (f.length() - start)];
      f.seek(start);
      f.readFully(bytes);
      String[] lines = new String(bytes, StandardCharsets.UTF_8).split("\n", -1);
      int end = lines.length > 0 && lines[lines.length - 1].isEmpty() ? lines.length - 1 : lines.length;
      List<String> tail = new ArrayList<>();
      for (int i = Math.max(0, end - maxLines); i < end; i++) {
        tail.add(lines[i].length() <= maxLineChars ? lines[i] : lines[i].substring(0, maxLineChars) + "...");
      }
      return tail.isEmpty() ? "(empty)" : String.join("\n", tail);
    } catch (IOException | RuntimeException e) {
      return "(cannot read " + log + ": " + e + ")";
    }
  }
}
