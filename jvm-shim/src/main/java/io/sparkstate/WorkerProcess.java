package io.sparkstate;

import com.fasterxml.jackson.databind.JsonNode;
import io.sparkstate.channel.DataChannel;
import io.sparkstate.channel.Py4jDataChannel;
import io.sparkstate.channel.ShmDataChannel;
import io.sparkstate.channel.SocketDataChannel;
import java.io.IOException;
import java.net.InetAddress;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.MappedByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardOpenOption;
import java.security.SecureRandom;
import java.util.HexFormat;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicReference;
import javax.net.SocketFactory;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import py4j.CallbackClient;
import py4j.GatewayServer;

/**
 * One {@code python -m sparkstate.worker} process and everything tied to its life: its private py4j gateway,
 * its private directory (stderr log, data socket, heartbeat file), its control proxy and its data channel.
 * Start-up follows docs/internals/workers.md, "Worker processes". A worker is marked dead when its process
 * exits, a transport call fails, or {@link WorkerWatchdog} finds it hung or stuck; it is never used again.
 *
 * <p>Heartbeat file ({@code <dir>/heartbeat}, little-endian, written by the worker's heartbeat thread,
 * read here): {@code i64 beats} at offset 0 (bumped every interval), {@code i64 progress} at offset 8
 * (the worker's progress counter, sparkstate/liveness.py).
 */
final class WorkerProcess extends Worker {
  private static final Logger LOG = LoggerFactory.getLogger(WorkerProcess.class);
  private static final int HEARTBEAT_BYTES = 64;

  private final Process process;
  /** Set before the watchdog's SIGKILL, so that kill is not read as the out-of-memory killer's. */
  private volatile boolean killedAsHung;
  /** The kernel's OOM-kill counts when the worker started, to tell a memory kill from another SIGKILL. */
  private final OomCounters oomAtStart;
  private final GatewayServer gateway;
  private final WorkerDir workerDir;
  private final Path dir;
  private final WorkerStderr stderr;
  private final WorkerControl control;
  private final String socketPath;
  private final long pid;
  private final MappedByteBuffer heartbeat;
  private final Liveness liveness;
  private final String shmDir;
  private final long stallTimeoutMs;
  /** The stderr tail taken when the worker died (its private directory is deleted right after). */
  private volatile String deathStderrTail;

  private WorkerProcess(String id, ShimSettings settings, Process process, GatewayServer gateway,
      WorkerDir workerDir, WorkerStderr stderr, WorkerHandshake.Registration reg, MappedByteBuffer heartbeat,
      OomCounters oomAtStart) {
    super(id, settings.pythonExec, settings.transport);
    this.process = process;
    this.gateway = gateway;
    this.workerDir = workerDir;
    this.dir = workerDir.path();
    this.stderr = stderr;
    this.control = reg.control;
    this.socketPath = reg.socketPath;
    this.pid = reg.pid;
    this.heartbeat = heartbeat;
    this.liveness = new Liveness(settings.heartbeatTimeoutMs, settings.stallTimeoutMs, System.nanoTime());
    this.shmDir = settings.shmDir;
    this.stallTimeoutMs = settings.stallTimeoutMs;
    this.oomAtStart = oomAtStart;
  }

  static WorkerProcess start(String id, ShimSettings settings) {
    String python = settings.pythonExec;
    WorkerDir workerDir;
    try {
      workerDir = WorkerDir.create();
    } catch (IOException | RuntimeException e) {
      throw new WorkerFailedException("cannot create a private directory for sparkstate worker " + id + ": " + e, e);
    }
    Path dir = workerDir.path();
    MappedByteBuffer heartbeat;
    try {
      heartbeat = createHeartbeatFile(dir.resolve("heartbeat"));
    } catch (IOException e) {
      workerDir.delete();
      throw new WorkerFailedException("cannot create the heartbeat file of sparkstate worker " + id + " in " + dir
          + ": " + e, e);
    }
    WorkerStderr stderr = new WorkerStderr(dir);
    String token = randomToken();
    WorkerHandshake handshake = new WorkerHandshake(id);
    GatewayServer gateway = startGateway(handshake, token);
    Process process = null;
    OomCounters oomAtStart = OomCounters.read();
    try {
      ProcessBuilder pb = new ProcessBuilder(python, "-m", "sparkstate.worker");
      pb.environment().put("SPARKSTATE_GATEWAY_PORT", Integer.toString(gateway.getListeningPort()));
      pb.environment().put("SPARKSTATE_GATEWAY_SECRET", token);
      pb.environment().put("SPARKSTATE_WORKER_ID", id);
      pb.environment().put("SPARKSTATE_SOCKET_DIR", dir.toString());
      pb.environment().put("SPARKSTATE_HEARTBEAT_INTERVAL_MS", Long.toString(heartbeatIntervalMs(settings)));
      pb.redirectInput(ProcessBuilder.Redirect.PIPE); // kept open: the worker exits on EOF
      pb.redirectErrorStream(true);
      pb.redirectOutput(ProcessBuilder.Redirect.appendTo(stderr.file().toFile()));
      try {
        process = pb.start();
      } catch (IOException e) {
        throw new WorkerFailedException("cannot start sparkstate worker with interpreter '" + python + "': "
            + e.getMessage() + ". Set " + ShimSettings.PYTHON_EXEC + " to a Python that has sparkstate installed.", e);
      }
      WorkerHandshake.Registration reg = awaitRegistration(handshake, process, python, stderr,
          settings.workerStartTimeoutMs);
      WorkerProcess worker = new WorkerProcess(id, settings, process, gateway, workerDir, stderr, reg, heartbeat,
          oomAtStart);
      process.onExit().thenRun(() -> worker.markDead("process exited with "
          + ExitStatus.describe(worker.process.exitValue())));
      worker.logHello();
      return worker;
    } catch (RuntimeException e) {
      if (process != null) {
        process.destroyForcibly();
      }
      gateway.shutdown();
      workerDir.delete(); // the exception already holds the stderr tail
      throw e;
    }
  }

  /** A tenth of the heartbeat timeout, between 50 ms and 1 s: a few missed beats never look like a hang. */
  static long heartbeatIntervalMs(ShimSettings settings) {
    return Math.max(50, Math.min(1000, settings.heartbeatTimeoutMs / 10));
  }

  private static MappedByteBuffer createHeartbeatFile(Path file) throws IOException {
    try (FileChannel fc = FileChannel.open(file, StandardOpenOption.CREATE_NEW, StandardOpenOption.READ,
        StandardOpenOption.WRITE)) {
      fc.write(ByteBuffer.allocate(HEARTBEAT_BYTES), 0);
      MappedByteBuffer map = fc.map(FileChannel.MapMode.READ_ONLY, 0, HEARTBEAT_BYTES);
      map.order(ByteOrder.LITTLE_ENDIAN);
      return map;
    }
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
        .callbackClient(callbackClient(loopback, token))
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

  /**
   * py4j's default callback client schedules a cleaner of idle connections on a pool whose thread is not a
   * daemon, and that thread alone keeps a finished `spark-submit` JVM from exiting. With a minimum
   * connection time of 0 no cleaner is scheduled and no thread started; the connections it would close
   * are the worker's, bounded by the calls that ever ran at once, and go with the worker.
   */
  private static CallbackClient callbackClient(InetAddress loopback, String token) {
    return new CallbackClient(0, loopback, token, 0, TimeUnit.SECONDS, SocketFactory.getDefault(), true, 0);
  }

  private static WorkerHandshake.Registration awaitRegistration(WorkerHandshake handshake, Process process,
      String python, WorkerStderr stderr, long timeoutMs) {
    long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(timeoutMs);
    while (true) {
      try {
        return handshake.registration().get(100, TimeUnit.MILLISECONDS);
      } catch (TimeoutException e) {
        if (!process.isAlive()) {
          throw new WorkerFailedException("sparkstate worker exited before registering (interpreter '" + python
              + "', exit code " + process.exitValue() + "). Set " + ShimSettings.PYTHON_EXEC
              + " to a Python that has sparkstate installed. Worker stderr (" + stderr.file()
              + "):\n" + stderr.exceptionTail());
        }
        if (System.nanoTime() > deadline) {
          throw new WorkerFailedException("sparkstate worker did not register within " + timeoutMs
              + " ms (interpreter '" + python + "', see " + ShimSettings.START_TIMEOUT + "). Worker stderr:\n"
              + stderr.exceptionTail());
        }
      } catch (ExecutionException e) {
        throw new WorkerFailedException("sparkstate worker registration failed: " + e.getCause(), e.getCause());
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new WorkerFailedException("interrupted while waiting for a sparkstate worker to register", e);
      }
    }
  }

  /** Logs the worker's hello and refuses a worker of another sparkstate build than this jar's. */
  private void logHello() {
    String hello;
    try {
      hello = control.hello();
    } catch (RuntimeException e) {
      throw failure("say hello", e);
    }
    LOG.info("sparkstate worker {} started: pid {}, interpreter {}, transport {}, dir {}, hello {}",
        id, pid, pythonExec, transport, dir, hello);
    String refused = BuildId.mismatchOfHello(hello, pythonExec);
    if (refused != null) {
      throw new WorkerFailedException(refused);
    }
  }

  @Override
  protected WorkerControl controlObject() {
    return control;
  }

  @Override
  protected DataChannel openChannel() {
    if (transport.equals("py4j")) {
      return new Py4jDataChannel(control::data, this);
    }
    if (transport.equals(ShimSettings.SHM) && ShmDataChannel.supported()) {
      try {
        return ShmDataChannel.attach(socketPath, shmDir, this::isAlive, this);
      } catch (ShmDataChannel.SegmentUnavailable e) {
        LOG.warn("sparkstate {}: {}; using the Unix socket for this channel instead (slower). Give /dev/shm "
            + "more room, or set {}=socket to silence this.", this, e.getMessage(), ShimSettings.TRANSPORT);
      }
    }
    return SocketDataChannel.connect(socketPath, this);
  }

  @Override
  boolean isAlive() {
    return deathReason == null && process.isAlive();
  }

  void markDead(String reason) {
    synchronized (this) {
      if (deathReason != null) {
        return;
      }
      deathReason = reason;
    }
    if (WorkerPool.get().isShuttingDown()) {
      return;
    }
    deathStderrTail = stderr.exceptionTail();
    LOG.warn("sparkstate worker {} (pid {}) is dead: {}. Its stderr ({}):\n{}", id, pid, reason,
        stderr.file(), stderr.logTail());
    kill();
  }

  Liveness liveness() {
    return liveness;
  }

  /** The watchdog's check (see {@link Liveness}): null while the worker is live, else why it is not. */
  String checkLiveness(long nowNanos) {
    long beats = heartbeat.getLong(0);
    long progress = heartbeat.getLong(8);
    return liveness.check(nowNanos, beats, progress, callSinceNanos());
  }

  /**
   * Kills a worker the watchdog found hung or stuck. Its Python stacks are dumped to its stderr first
   * (SIGUSR1; the worker registers faulthandler for it) unless the process is stopped, so the error the
   * task fails with shows where it hung.
   */
  void declareHung(String verdict, long nowNanos) {
    String state = processState();
    String reason = verdict + "; " + describeCall(nowNanos) + ("T".equals(state) || "t".equals(state)
        ? "; the process is stopped (SIGSTOP or a debugger)" : "") + "; killed";
    synchronized (this) {
      if (deathReason != null) {
        return;
      }
      deathReason = reason;
    }
    if (!"T".equals(state) && !"t".equals(state)) {
      stderr.dumpStacks(pid, id);
    }
    deathStderrTail = stderr.exceptionTail();
    LOG.warn("sparkstate worker {} (pid {}) is {}. Its stderr, with the Python stack of every thread ({}):\n{}",
        id, pid, reason, stderr.file(), stderr.logTail());
    killedAsHung = true;
    process.destroyForcibly(); // SIGKILL also ends a stopped process
    kill();
  }

  /** One letter of /proc/<pid>/stat (R, S, D, T...), or "" when it cannot be read. */
  private String processState() {
    try {
      String stat = Files.readString(Paths.get("/proc", Long.toString(pid), "stat"));
      String[] fields = stat.substring(stat.lastIndexOf(')') + 2).split(" ");
      return fields[0];
    } catch (IOException | RuntimeException e) {
      return "";
    }
  }

  @Override
  void drainAbandonedConnections() {
    if (transport.equals("py4j")) {
      return; // py4j data calls are synchronous: none is ever abandoned
    }
    try {
      boolean drained = Json.parse(control().drainData(stallTimeoutMs), "drainData").path("drained").asBoolean(false);
      if (!drained) {
        markDead("an abandoned data connection was still busy after " + stallTimeoutMs + " ms");
      }
    } catch (RuntimeException e) {
      markDead("cannot drain abandoned data connections: " + e);
    }
  }

  /**
   * The exception for a failed call on this worker. A dead process or a broken transport makes the worker
   * dead for good; the message then carries the interpreter, exit code and stderr tail.
   */
  @Override
  WorkerFailedException failure(String action, Throwable cause) {
    if (cause != null && process.isAlive()) {
      // A broken connection is most often the process ending: a moment's wait lets the message say how.
      try {
        process.waitFor(2, TimeUnit.SECONDS);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
    }
    if (!process.isAlive()) {
      markDead("process exited with " + ExitStatus.describe(process.exitValue()));
    } else if (cause != null) {
      markDead("cannot " + action + ": " + cause);
    }
    String tail = deathStderrTail != null ? deathStderrTail : stderr.exceptionTail();
    String advice = process.isAlive() || killedAsHung ? "" : ExitStatus.advice(process.exitValue(), oomAtStart,
        OomCounters.read());
    return new WorkerFailedException("sparkstate worker " + id + " (pid " + pid + ", interpreter '" + pythonExec
        + "', exit code " + exitCodeText() + ") failed: cannot " + action + " (" + deathReason + ")"
        + (cause != null ? ": " + cause.getMessage() : "") + ". " + (advice.isEmpty() ? "" : advice + " ")
        + "Worker stderr (" + stderr.file() + "):\n" + tail, cause);
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
    // Once the worker is gone any error about it has copied the stderr tail into its message: nothing is lost.
    workerDir.delete();
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

  @Override
  public String toString() {
    return "worker " + id + " (pid " + pid + ")";
  }
}
