package io.sparkstate.channel;

import java.io.IOException;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.net.StandardProtocolFamily;
import java.net.UnixDomainSocketAddress;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.MappedByteBuffer;
import java.nio.channels.ClosedByInterruptException;
import java.nio.channels.FileChannel;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.concurrent.locks.LockSupport;
import java.util.function.BooleanSupplier;

/**
 * Transport {@code shm}: the socket's frames, exchanged through a segment both processes map, so a get costs
 * no syscall and, when the worker's thread takes turns with ours on one CPU, no sleep in the kernel
 * (docs/internals/bridge.md, "transport=shm"; the layout is documented once, in
 * {@code sparkstate/worker/shm_channel.py}).
 *
 * <p>Each publish copies the queued frames into the request area and bumps the request seq; the worker
 * answers every publish by setting the response seq. While we wait we yield the CPU (to the worker, when it
 * runs on the same CPU), then park in growing steps, checking that the worker process is alive and that
 * it has not closed the socket (its data thread ended). A worker that went to sleep is woken by a byte on
 * the socket, which otherwise only carried the attach handshake. The segment file is deleted as soon as
 * both sides have mapped it, so nothing is left behind.
 *
 * <p>An interrupted task thread does not abandon a request: it keeps waiting for the answer (a hung
 * worker is killed by the shim's watchdog, which ends the wait) and returns with its interrupt flag
 * set, so the channel stays clean and Spark's own checks end the task.
 */
public final class ShmDataChannel extends QueuedFrameChannel {
  static final int HEADER_BYTES = 4096;
  static final int CAPACITY = 1 << 20;
  private static final int REQ_SEQ = 0;
  private static final int REQ_LEN = 8;
  private static final int REQ_FLAGS = 12;
  private static final int RESP_SEQ = 64;
  private static final int RESP_LEN = 72;
  private static final int RESP_FLAGS = 76;
  private static final int WORKER_SLEEPING = 128;
  private static final int CLIENT_TID = 192;
  private static final int FLAG_MORE = 1;
  private static final int FLAG_CONTINUE = 2;
  private static final int FLAG_CLOSE = 4;

  /** How long a waiting task thread yields before it parks. A get takes a few microseconds. */
  private static final long SPIN_NANOS = 200_000;
  private static final long MAX_PARK_NANOS = 1_000_000;

  private static final VarHandle LONGS = MethodHandles.byteBufferViewVarHandle(long[].class, ByteOrder.LITTLE_ENDIAN);
  private static final VarHandle INTS = MethodHandles.byteBufferViewVarHandle(int[].class, ByteOrder.LITTLE_ENDIAN);
  private static final ThreadLocal<Long> NATIVE_TID = ThreadLocal.withInitial(ShmDataChannel::readNativeTid);

  private final String socketPath;
  private final SocketChannel socket;
  private final ByteBuffer eofProbe = ByteBuffer.allocate(64);
  private final MappedByteBuffer segment;
  private final BooleanSupplier workerAlive;
  private final ByteBuffer doorbell = ByteBuffer.allocateDirect(1);
  private final Response response = new Response();
  private long seq;
  /** The last publish is not answered yet: the request area is still the worker's. */
  private boolean awaiting;
  private Thread lastPublisher;
  private boolean dirty;

  private ShmDataChannel(String socketPath, SocketChannel socket, MappedByteBuffer segment,
      BooleanSupplier workerAlive, CallTracker tracker) {
    super(tracker);
    this.socketPath = socketPath;
    this.socket = socket;
    this.segment = segment;
    this.workerAlive = workerAlive;
    this.seq = (long) LONGS.getVolatile(segment, REQ_SEQ);
  }

  /** Linux on x86-64, whose ordered stores the worker's side relies on; elsewhere the socket is used. */
  public static boolean supported() {
    String os = System.getProperty("os.name", "").toLowerCase(java.util.Locale.ROOT);
    String arch = System.getProperty("os.arch", "").toLowerCase(java.util.Locale.ROOT);
    return os.startsWith("linux") && (arch.equals("amd64") || arch.equals("x86_64"));
  }

  /** The segment could not be created (no room in /dev/shm, say): the caller uses the socket instead. */
  public static final class SegmentUnavailable extends Exception {
    SegmentUnavailable(String message, Throwable cause) {
      super(message, cause);
    }
  }

  /** Connects to the worker's data socket and moves the connection to a new shared-memory segment. */
  public static ShmDataChannel attach(String socketPath, String shmDir, BooleanSupplier workerAlive,
      CallTracker tracker) throws SegmentUnavailable {
    Path dir = null;
    Path file = null;
    SocketChannel socket = null;
    Path base = segmentBase(shmDir);
    try {
      MappedByteBuffer segment;
      try {
        dir = Files.createTempDirectory(base, "sparkstate-shm-",
            PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rwx------")));
        file = dir.resolve("segment");
        segment = createSegment(file);
      } catch (IOException | RuntimeException e) {
        throw new SegmentUnavailable("cannot create a " + (HEADER_BYTES + 2L * CAPACITY) + "-byte shared-memory "
            + "segment in " + base + ": " + e, e);
      }
      socket = SocketChannel.open(StandardProtocolFamily.UNIX);
      socket.connect(UnixDomainSocketAddress.of(socketPath));
      handshake(socket, file.toString());
      socket.configureBlocking(false); // from now on it carries only doorbells out and EOF in
      return new ShmDataChannel(socketPath, socket, segment, workerAlive, tracker);
    } catch (IOException | RuntimeException e) {
      if (socket != null) {
        try {
          socket.close();
        } catch (IOException ignored) {
          // abandoning the connection
        }
      }
      if (e instanceof DataChannelException) {
        throw (DataChannelException) e;
      }
      throw new DataChannelException("cannot set up the shared-memory data channel of worker socket " + socketPath
          + ": " + e, true, e);
    } finally {
      deleteQuietly(file);
      deleteQuietly(dir);
    }
  }

  /**
   * Writes the whole file before mapping it: tmpfs allocates pages on first write, and a full tmpfs would
   * otherwise surface later as SIGBUS on a store into the mapping instead of as an IOException here.
   */
  private static MappedByteBuffer createSegment(Path file) throws IOException {
    long size = HEADER_BYTES + 2L * CAPACITY;
    try (FileChannel fc = FileChannel.open(file, StandardOpenOption.CREATE_NEW, StandardOpenOption.READ,
        StandardOpenOption.WRITE)) {
      ByteBuffer zeros = ByteBuffer.allocateDirect(64 * 1024);
      for (long pos = 0; pos < size; ) {
        zeros.clear().limit((int) Math.min(zeros.capacity(), size - pos));
        pos += fc.write(zeros, pos);
      }
      MappedByteBuffer segment = fc.map(FileChannel.MapMode.READ_WRITE, 0, size);
      segment.order(ByteOrder.LITTLE_ENDIAN);
      return segment;
    }
  }

  /**
   * The configured directory ({@code shmDir}); else tmpfs when the machine has it (the segment never
   * touches a disk), else the JVM's temp directory.
   */
  private static Path segmentBase(String configured) {
    if (configured != null) {
      return Paths.get(configured);
    }
    Path shm = Paths.get("/dev/shm");
    return Files.isDirectory(shm) && Files.isWritable(shm) ? shm : Paths.get(System.getProperty("java.io.tmpdir"));
  }

  private static void handshake(SocketChannel socket, String segmentPath) throws IOException {
    byte[] path = segmentPath.getBytes(StandardCharsets.UTF_8);
    ByteBuffer frame = ByteBuffer.allocate(Frames.HEADER_BYTES + path.length).order(ByteOrder.LITTLE_ENDIAN);
    Frames.header(frame, Frames.SHM_ATTACH, 0, path.length);
    frame.put(path).flip();
    while (frame.hasRemaining()) {
      socket.write(frame);
    }
    ByteBuffer status = readExactly(socket, 4);
    int code = status.getInt();
    if (code == Frames.ERROR) {
      int len = readExactly(socket, 4).getInt();
      String msg = StandardCharsets.UTF_8.decode(readExactly(socket, len)).toString();
      throw new DataChannelException("worker refused the shared-memory segment: " + msg, true, null);
    }
    if (code != 0) {
      throw new DataChannelException("unexpected answer " + code + " to the shared-memory attach", true, null);
    }
  }

  private static ByteBuffer readExactly(SocketChannel socket, int n) throws IOException {
    ByteBuffer buf = ByteBuffer.allocate(n).order(ByteOrder.LITTLE_ENDIAN);
    while (buf.hasRemaining()) {
      if (socket.read(buf) < 0) {
        throw new IOException("end of stream (worker closed the connection)");
      }
    }
    return buf.flip();
  }

  private static void deleteQuietly(Path path) {
    if (path != null) {
      try {
        Files.deleteIfExists(path);
      } catch (IOException ignored) {
        // a leftover empty temp entry is harmless
      }
    }
  }

  /** The Linux thread id of the calling thread (the worker follows it to its CPU); 0 if unknown. */
  private static Long readNativeTid() {
    try {
      String link = Files.readSymbolicLink(Paths.get("/proc/thread-self")).toString(); // "<pid>/task/<tid>"
      return Long.parseLong(link.substring(link.lastIndexOf('/') + 1));
    } catch (IOException | RuntimeException e) {
      return 0L;
    }
  }

  // -- FramedDataChannel: moving bytes ------------------------------------------------------------------

  /** Copies the queued frames into the request area, in pieces of at most CAPACITY bytes. */
  @Override
  protected void send(ByteBuffer queued) {
    dirty = true;
    while (queued.hasRemaining()) {
      awaitAnswer();
      int n = Math.min(queued.remaining(), CAPACITY);
      segment.put(HEADER_BYTES, queued, queued.position(), n);
      queued.position(queued.position() + n);
      publish(n, queued.hasRemaining() ? FLAG_MORE : 0);
    }
    dirty = false;
  }

  @Override
  protected Reply awaitReply() {
    dirty = true;
    awaitAnswer();
    response.in.clear().limit(0);
    response.takePiece();
    return response;
  }

  private void publish(int length, int flags) {
    Thread current = Thread.currentThread();
    if (current != lastPublisher) {
      LONGS.setOpaque(segment, CLIENT_TID, (long) NATIVE_TID.get());
      lastPublisher = current;
    }
    INTS.set(segment, REQ_LEN, length);
    INTS.set(segment, REQ_FLAGS, flags);
    seq++;
    LONGS.setRelease(segment, REQ_SEQ, seq);
    awaiting = true;
    VarHandle.fullFence(); // our seq store before the sleeping-flag load (the worker mirrors this)
    if ((long) LONGS.getVolatile(segment, WORKER_SLEEPING) != 0) {
      ringDoorbell();
    }
  }

  private void ringDoorbell() {
    boolean interrupted = Thread.interrupted(); // an NIO write with the flag set would close the socket
    try {
      doorbell.clear();
      socket.write(doorbell); // non-blocking: a full buffer means the worker is awake anyway
    } catch (ClosedByInterruptException e) {
      interrupted = true;
      throw interruptedFailure(e);
    } catch (IOException e) {
      throw failure("wake the worker through", e);
    } finally {
      if (interrupted) {
        Thread.currentThread().interrupt();
      }
    }
  }

  /**
   * Waits until the worker has answered the last publish. Interrupts are remembered, not obeyed (see the
   * class comment); the wait ends when the answer arrives or the worker is gone.
   */
  private void awaitAnswer() {
    if (!awaiting) {
      return;
    }
    long start = System.nanoTime();
    long park = 10_000;
    int spins = 0;
    boolean interrupted = false;
    try {
      while ((long) LONGS.getAcquire(segment, RESP_SEQ) != seq) {
        interrupted |= Thread.interrupted(); // cleared, or parkNanos would return at once
        if (++spins < 64 || System.nanoTime() - start < SPIN_NANOS) {
          Thread.yield();
        } else {
          if (!workerAlive.getAsBoolean() || !socket.isOpen()) {
            throw failure("wait for", new IOException("the worker process is gone"));
          }
          if (peerClosed()) {
            throw failure("wait for", new IOException("the worker closed the connection without answering "
                + "(its data thread ended; see its stderr)"));
          }
          LockSupport.parkNanos(park);
          park = Math.min(2 * park, MAX_PARK_NANOS);
        }
      }
    } finally {
      if (interrupted) {
        Thread.currentThread().interrupt();
      }
    }
    awaiting = false;
  }

  /** Whether the worker closed its end of the socket (never written to after the attach, so EOF is all). */
  private boolean peerClosed() {
    boolean interrupted = Thread.interrupted();
    try {
      eofProbe.clear();
      return socket.read(eofProbe) < 0;
    } catch (ClosedByInterruptException e) {
      interrupted = true;
      throw interruptedFailure(e);
    } catch (IOException e) {
      return true;
    } finally {
      if (interrupted) {
        Thread.currentThread().interrupt();
      }
    }
  }

  private DataChannelException failure(String what, IOException e) {
    dirty = true;
    return new DataChannelException("cannot " + what + " worker shared-memory channel (" + socketPath + "): "
        + e.getMessage(), true, e);
  }

  private DataChannelException interruptedFailure(IOException e) {
    dirty = true;
    return DataChannelException.interrupted("interrupted while using the shared-memory channel of worker socket "
        + socketPath + " (the channel is reset; the worker is fine)", e);
  }

  /** The response of the last sync frame: the piece in the segment, then the pieces asked for with CONTINUE. */
  private final class Response extends StreamReply {
    /** The response continues in the worker (fetched with CONTINUE). */
    private boolean continues;

    Response() {
      super(ByteBuffer.allocate(64 * 1024).order(ByteOrder.LITTLE_ENDIAN));
    }

    /** Appends the piece the worker just wrote to {@link #in}. */
    void takePiece() {
      int len = (int) INTS.getAcquire(segment, RESP_LEN);
      int flags = (int) INTS.get(segment, RESP_FLAGS);
      if (len < 0 || len > CAPACITY) {
        throw failure("read", new IOException("malformed response length " + len));
      }
      in.compact();
      if (in.remaining() < len) {
        ByteBuffer bigger = ByteBuffer.allocate(in.position() + len).order(ByteOrder.LITTLE_ENDIAN);
        in.flip();
        bigger.put(in);
        in = bigger;
      }
      in.put(in.position(), segment, HEADER_BYTES + CAPACITY, len);
      in.position(in.position() + len);
      in.flip();
      continues = (flags & FLAG_MORE) != 0;
    }

    @Override
    protected void fill(int atLeast) {
      while (in.remaining() < atLeast) {
        if (!continues) {
          throw failure("read", new IOException("response ended after " + in.remaining() + " bytes, needed "
              + atLeast));
        }
        publish(0, FLAG_CONTINUE);
        awaitAnswer();
        takePiece();
      }
    }

    @Override
    public void finish() {
      if (!continues) {
        dirty = false;
      }
    }
  }

  @Override
  public synchronized boolean isDirty() {
    return dirty || !socket.isOpen();
  }

  /** Tells the worker we are done (it ends its session), then drops the socket. */
  @Override
  public synchronized void close() {
    discardAll();
    try {
      if (!awaiting) { // else the worker may still be reading the request area; the socket EOF ends it
        publish(0, FLAG_CLOSE);
      }
    } catch (RuntimeException ignored) {
      // the worker is gone already
    }
    try {
      socket.close();
    } catch (IOException ignored) {
      // closing a socket we are abandoning; nothing to recover
    }
  }
}
