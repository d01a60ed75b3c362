package io.sparkstate;

import java.io.IOException;
import java.net.InetAddress;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.attribute.PosixFilePermissions;
import java.security.SecureRandom;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicReference;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import py4j.GatewayServer;

/**
 * One {@code python -m sparkstate.worker} process and everything tied to its life: its private py4j
 * gateway, its private directory (stderr log, data socket), its control proxy and its data channel.
 * Start-up follows docs/architecture.md §2. A worker is marked dead when its process exits or a transport
 * call fails, and is never used again.
 */
final class WorkerProcess extends Worker {
  private static final Logger LOG = LoggerFactory.getLogger(WorkerProcess.class);
  private static final int STDERR_TAIL_LINES = 40;
  /** Unix socket paths are limited to 108 bytes; leave room for "/data.sock". */
  private static final int MAX_SOCKET_DIR_CHARS = 90;

  private final Process process;
  private final GatewayServer gateway;
  private final Path dir;
  private final WorkerControl control;
  private final String socketPath;
  private final long pid;

  private WorkerProcess(String id, String pythonExec, String transport, Process process, GatewayServer gateway,
      Path dir, WorkerHandshake.Registration reg) {
    super(id, pythonExec, transport);
    this.process = process;
    this.gateway = gateway;
    this.dir = dir;
    this.control = reg.control;
    this.socketPath = reg.socketPath;
    this.pid = reg.pid;
  }

  static WorkerProcess start(String id, ShimSettings settings) {
    String python = settings.pythonExec;
    Path dir;
    try {
      dir = createPrivateDir();
    } catch (IOException e) {
      throw new WorkerFailedException("cannot create a private directory for sparkstate worker " + id + ": " + e, e);
    }
    String token = randomToken();
    WorkerHandshake handshake = new WorkerHandshake(id);
    GatewayServer gateway = startGateway(handshake, token);
    Process process = null;
    try {
      ProcessBuilder pb = new ProcessBuilder(python, "-m", "sparkstate.worker");
      pb.environment().put("SPARKSTATE_GATEWAY_PORT", Integer.toString(gateway.getListeningPort()));
      pb.environment().put("SPARKSTATE_GATEWAY_SECRET", token);
      pb.environment().put("SPARKSTATE_WORKER_ID", id);
      pb.environment().put("SPARKSTATE_SOCKET_DIR", dir.toString());
      pb.redirectInput(ProcessBuilder.Redirect.PIPE); // kept open: the worker exits on EOF
      pb.redirectErrorStream(true);
      pb.redirectOutput(ProcessBuilder.Redirect.appendTo(dir.resolve("stderr.log").toFile()));
      try {
        process = pb.start();
      } catch (IOException e) {
        throw new WorkerFailedException("cannot start sparkstate worker with interpreter '" + python + "': "
            + e.getMessage() + ". Set " + ShimSettings.PYTHON_EXEC + " to a Python that has sparkstate installed.", e);
      }
      WorkerHandshake.Registration reg = awaitRegistration(handshake, process, python, dir,
          settings.workerStartTimeoutMs);
      WorkerProcess worker = new WorkerProcess(id, python, settings.transport, process, gateway, dir, reg);
      process.onExit().thenRun(() -> worker.markDead("process exited with code " + worker.exitCodeText()));
      worker.logHello();
      return worker;
    } catch (RuntimeException e) {
      if (process != null) {
        process.destroyForcibly();
      }
      gateway.shutdown();
      deletePrivateDir(dir); // the exception already holds the stderr tail
      throw e;
    }
  }

  private static Path createPrivateDir() throws IOException {
    Path base = Paths.get(System.getProperty("java.io.tmpdir"));
    if (base.toAbsolutePath().toString().length() > MAX_SOCKET_DIR_CHARS - 30) {
      base = Paths.get("/tmp");
    }
    return Files.createTempDirectory(base, "sparkstate-worker-",
        PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rwx------")));
  }

  private static String randomToken() {
    byte[] bytes = new byte[32];
    new SecureRandom().nextBytes(bytes);
    return HexFormat.of().formatHex(bytes);
  }

  /**
   * Starts the gateway from a daemon thread: py4j's accept thread inherits the daemon flag of the thread
   * that starts it, and a non-daemon accept thread would keep the JVM alive.
   */
  private static GatewayServer startGateway(WorkerHandshake handshake, String token) {
    InetAddress loopback = InetAddress.getLoopbackAddress();
    GatewayServer gateway = new GatewayServer.GatewayServerBuilder(handshake)
        .javaPort(0)
        .javaAddress(loopback)
        .authToken(token)
        .callbackClient(0, loopback, token)
        .build();
    AtomicReference<RuntimeException> failure = new AtomicReference<>();
    Thread starter = new Thread(() -> {
      try {
        gateway.start(true);
      } catch (RuntimeException e) {
        failure.set(e);
      }
    }, "sparkstate-gateway-start");
    starter.setDaemon(true);
    starter.start();
    try {
      starter.join();
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      gateway.shutdown();
      throw new WorkerFailedException("interrupted while starting a py4j gateway for a sparkstate worker", e);
    }
    if (failure.get() != null) {
      throw new WorkerFailedException("cannot start a py4j gateway for a sparkstate worker: " + failure.get(),
          failure.get());
    }
    return gateway;
  }

  private static WorkerHandshake.Registration awaitRegistration(WorkerHandshake handshake, Process process,
      String python, Path dir, long timeoutMs) {
    long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(timeoutMs);
    while (true) {
      try {
        return handshake.registration().get(100, TimeUnit.MILLISECONDS);
      } catch (TimeoutException e) {
        if (!process.isAlive()) {
          throw new WorkerFailedException("sparkstate worker exited before registering (interpreter '" + python
              + "', exit code " + process.exitValue() + "). Set " + ShimSettings.PYTHON_EXEC
              + " to a Python that has sparkstate installed. Worker stderr (" + dir.resolve("stderr.log")
              + "):\n" + stderrTail(dir));
        }
        if (System.nanoTime() > deadline) {
          throw new WorkerFailedException("sparkstate worker did not register within " + timeoutMs
              + " ms (interpreter '" + python + "', see " + ShimSettings.START_TIMEOUT + "). Worker stderr:\n"
              + stderrTail(dir));
        }
      } catch (ExecutionException e) {
        throw new WorkerFailedException("sparkstate worker registration failed: " + e.getCause(), e.getCause());
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new WorkerFailedException("interrupted while waiting for a sparkstate worker to register", e);
      }
    }
  }

  private void logHello() {
    try {
      LOG.info("sparkstate worker {} started: pid {}, interpreter {}, transport {}, dir {}, hello {}",
          id, pid, pythonExec, transport, dir, control.hello());
    } catch (RuntimeException e) {
      throw failure("say hello", e);
    }
  }

  @Override
  protected WorkerControl controlObject() {
    return control;
  }

  @Override
  protected DataChannel openChannel() {
    if (transport.equals("py4j")) {
      return new Py4jDataChannel(control);
    }
    if (transport.equals(ShimSettings.SHM) && ShmDataChannel.supported()) {
      try {
        return ShmDataChannel.attach(socketPath, this::isAlive);
      } catch (ShmDataChannel.SegmentUnavailable e) {
        LOG.warn("sparkstate {}: {}; using the Unix socket for this channel instead (slower). Give /dev/shm "
            + "more room, or set {}=socket to silence this.", this, e.getMessage(), ShimSettings.TRANSPORT);
      }
    }
    return SocketDataChannel.connect(socketPath);
  }

  @Override
  boolean isAlive() {
    return deathReason == null && process.isAlive();
  }

  void markDead(String reason) {
    if (deathReason == null) {
      deathReason = reason;
      if (WorkerPool.get().isShuttingDown()) {
        return;
      }
      LOG.warn("sparkstate worker {} (pid {}) is dead: {}", id, pid, reason);
      kill();
    }
  }

  /**
   * The exception for a failed call on this worker. A dead process or a broken transport makes the worker
   * dead for good; the message then carries the interpreter, exit code and stderr tail.
   */
  @Override
  WorkerFailedException failure(String action, Throwable cause) {
    if (cause != null && deathReason == null) {
      markDead("cannot " + action + ": " + cause);
    }
    if (!process.isAlive()) {
      try {
        process.waitFor(2, TimeUnit.SECONDS);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
    }
    return new WorkerFailedException("sparkstate worker " + id + " (pid " + pid + ", interpreter '" + pythonExec
        + "', exit code " + exitCodeText() + ") failed: cannot " + action + " (" + deathReason + ")"
        + (cause != null ? ": " + cause.getMessage() : "") + ". Worker stderr (" + dir.resolve("stderr.log")
        + "):\n" + stderrTail(dir), cause);
  }

  private String exitCodeText() {
    return process.isAlive() ? "none, still running" : Integer.toString(process.exitValue());
  }

  /** Ends the process: closes its stdin (it exits on EOF), then kills it, and stops the gateway. */
  @Override
  void kill() {
    closeChannel();
    closeStdin();
    try {
      process.waitFor(500, TimeUnit.MILLISECONDS); // a worker exits by itself on stdin EOF
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
    process.destroy();
    gateway.shutdown();
    deletePrivateDir(dir);
  }

  /**
   * Removes the worker's private directory (socket, stderr log). Called once the worker is gone and any
   * error about it has already copied the stderr tail into its message, so nothing is lost.
   */
  static void deletePrivateDir(Path dir) {
    if (dir == null) {
      return;
    }
    try (java.util.stream.Stream<Path> paths = Files.walk(dir)) {
      paths.sorted(java.util.Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
    } catch (IOException | RuntimeException ignored) {
      // best effort: a leftover temp directory is harmless
    }
  }

  /** Closing stdin is the polite stop: the worker exits on EOF. */
  @Override
  void closeStdin() {
    try {
      process.getOutputStream().close();
    } catch (IOException ignored) {
      // the pipe is already broken: the process is gone or going
    }
  }

  static String stderrTail(Path dir) {
    Path log = dir.resolve("stderr.log");
    try (java.io.RandomAccessFile f = new java.io.RandomAccessFile(log.toFile(), "r")) {
      long start = Math.max(0, f.length() - 64 * 1024); // enough for 40 lines of a traceback
      byte[] bytes = new byte[(int) (f.length() - start)];
      f.seek(start);
      f.readFully(bytes);
      String[] lines = new String(bytes, StandardCharsets.UTF_8).split("\n", -1);
      int end = lines.length > 0 && lines[lines.length - 1].isEmpty() ? lines.length - 1 : lines.length;
      List<String> tail = new ArrayList<>();
      for (int i = Math.max(0, end - STDERR_TAIL_LINES); i < end; i++) {
        tail.add(lines[i]);
      }
      return tail.isEmpty() ? "(empty)" : String.join("\n", tail);
    } catch (IOException | RuntimeException e) {
      return "(cannot read " + log + ": " + e + ")";
    }
  }

  @Override
  public String toString() {
    return "worker " + id + " (pid " + pid + ")";
  }
}
