package io.sparkstate.channel;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;

/**
 * The reference transport ({@code transport=py4j}): the same frames, one per {@code WorkerControl.data}
 * call. Slow for bulk data (py4j moves byte[] as base64, about 21 MB/s towards Python) but needs no
 * socket, which makes it the simple path to compare the socket transport against.
 */
public final class Py4jDataChannel extends FramedDataChannel {
  /** The worker's {@code data} call: one request frame in, its response bytes out (empty for async frames). */
  public interface Endpoint {
    byte[] data(byte[] frame);
  }

  private final Endpoint endpoint;
  private ByteBuffer frame;
  private boolean dirty;

  public Py4jDataChannel(Endpoint endpoint, CallTracker tracker) {
    super(tracker);
    this.endpoint = endpoint;
  }

  @Override
  protected ByteBuffer beginFrame(int frameBytes) {
    frame = ByteBuffer.allocate(frameBytes).order(ByteOrder.LITTLE_ENDIAN);
    return frame;
  }

  @Override
  protected void endAsyncFrame() {
    send();
  }

  @Override
  protected Reply endSyncFrame() {
    byte[] response = send();
    ByteBuffer buf = ByteBuffer.wrap(response == null ? new byte[0] : response).order(ByteOrder.LITTLE_ENDIAN);
    return new BufferReply(buf, "worker data()");
  }

  private byte[] send() {
    byte[] bytes = frame.array();
    frame = null;
    try {
      byte[] response = endpoint.data(bytes);
      dirty = false;
      return response;
    } catch (py4j.Py4JNetworkException e) {
      dirty = true;
      throw new DataChannelException("worker data() call failed: " + e.getMessage(), true, e);
    } catch (py4j.Py4JException e) {
      // data() itself raised in Python: the error of this frame, the connection is fine
      throw new DataChannelException(e.getMessage(), false, e);
    }
  }

  @Override
  public synchronized boolean isDirty() {
    return dirty;
  }

  @Override
  public synchronized void close() {
    discardAll();
  }
}
