package io.sparkstate.channel;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;

/**
 * transport=embedded: frames are written into a direct buffer that Python reads in place, and one call
 * ({@code pump}) hands them over. The buffer's first int is the byte count of the frames behind it, so the
 * call needs no arguments (argument conversion costs more than the call). A sync response comes back in
 * a second direct buffer; one too large for it is fetched as a byte array.
 */
public final class EmbeddedDataChannel extends FramedDataChannel {
  /**
   * The embedded interpreter as a channel calls it: functions of {@code sparkstate.worker.embedded}, known
   * in every thread's interpreter as {@link #ENTRY_MODULE}.
   */
  public interface Interpreter {
    /** The global name of sparkstate.worker.embedded, imported into every thread's interpreter. */
    String ENTRY_MODULE = "sparkstate_embedded";

    /** Calls the module-level function {@code name} ("module.function") on this thread's interpreter. */
    Object invoke(String name, Object... args);

    /** A callable evaluated from {@code expression}, bound to this thread's interpreter. */
    Object callable(String expression);

    /** Calls a callable from {@link #callable} on the thread that made it. */
    Object call(Object callable, Object... args);
  }

  private static final String MODULE = Interpreter.ENTRY_MODULE + ".";
  private static final int LENGTH_BYTES = 4;
  private static final int RESPONSE_BYTES = 64 * 1024;

  private final Interpreter python;
  private final int channelId;
  /** The pump callable of each thread that used this channel (Jep binds callables to their thread). */
  private final ThreadLocal<Object> pump;
  private ByteBuffer out;
  private final ByteBuffer in;
  private boolean dirty;

  private EmbeddedDataChannel(Interpreter python, int channelId, ByteBuffer out, ByteBuffer in) {
    super(CallTracker.NONE); // no process to watch: a call into the embedded interpreter runs on this thread
    this.python = python;
    this.channelId = channelId;
    this.pump = ThreadLocal.withInitial(() -> python.callable(MODULE + "channels[" + channelId + "].pump"));
    this.out = out.position(LENGTH_BYTES);
    this.in = in;
  }

  public static EmbeddedDataChannel open(Interpreter python, String workerId) {
    ByteBuffer out = direct(LENGTH_BYTES + 2 * Frames.FLUSH_BYTES);
    ByteBuffer in = direct(RESPONSE_BYTES);
    try {
      int id = ((Number) python.invoke(MODULE + "open_channel", workerId, out, in)).intValue();
      return new EmbeddedDataChannel(python, id, out, in);
    } catch (RuntimeException e) {
      throw new DataChannelException("cannot open the embedded data channel of worker " + workerId + ": "
          + e.getMessage(), true, e);
    }
  }

  private static ByteBuffer direct(int bytes) {
    return ByteBuffer.allocateDirect(bytes).order(ByteOrder.LITTLE_ENDIAN);
  }

  @Override
  protected ByteBuffer beginFrame(int frameBytes) {
    if (out.remaining() < frameBytes) {
      send();
      if (out.capacity() - LENGTH_BYTES < frameBytes) {
        ByteBuffer bigger = direct(LENGTH_BYTES + frameBytes);
        python.invoke(MODULE + "rebind", channelId, bigger, in);
        out = bigger.position(LENGTH_BYTES);
      }
    }
    return out;
  }

  @Override
  protected void endAsyncFrame() {
    if (out.position() >= Frames.FLUSH_BYTES) {
      send();
    }
  }

  @Override
  protected Reply endSyncFrame() {
    int size = send();
    ByteBuffer reply = size >= 0
        ? in.duplicate().order(ByteOrder.LITTLE_ENDIAN).limit(size)
        : ByteBuffer.wrap((byte[]) invokeTransport("take_oversized")).order(ByteOrder.LITTLE_ENDIAN);
    return new BufferReply(reply, "embedded data channel " + channelId);
  }

  /** Hands the queued frames to Python; returns the size of the sync response (negative: oversized). */
  private int send() {
    int frames = out.position() - LENGTH_BYTES;
    if (frames == 0) {
      return 0;
    }
    out.putInt(0, frames);
    Object callable = pump.get();
    PumpLock.INSTANCE.lock();
    try {
      dirty = true;
      int size = ((Number) python.call(callable)).intValue();
      dirty = false;
      return size;
    } catch (RuntimeException e) {
      throw new DataChannelException("embedded data channel " + channelId + " failed: " + e.getMessage(), true, e);
    } finally {
      PumpLock.INSTANCE.unlock();
      out.clear().position(LENGTH_BYTES);
    }
  }

  private Object invokeTransport(String function) {
    try {
      return python.invoke(MODULE + function, channelId);
    } catch (RuntimeException e) {
      dirty = true;
      throw new DataChannelException("embedded data channel " + channelId + ": " + function + " failed: "
          + e.getMessage(), true, e);
    }
  }

  @Override
  public synchronized boolean isDirty() {
    return dirty;
  }

  @Override
  public synchronized void close() {
    discardAll();
    try {
      python.invoke(MODULE + "close_channel", channelId);
    } catch (RuntimeException ignored) {
      // the worker is going away; its channels go with it
    }
  }
}
