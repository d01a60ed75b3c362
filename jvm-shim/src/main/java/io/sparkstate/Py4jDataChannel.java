package io.sparkstate;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;

/**
 * The reference transport ({@code transport=py4j}): the same frames, one per {@code WorkerControl.data}
 * call. Slow for bulk data (py4j moves byte[] as base64, about 21 MB/s towards Python) but needs no
 * socket, which makes it the simple path to compare the socket transport against.
 */
final class Py4jDataChannel extends FramedDataChannel {
  private final WorkerControl control;
  private ByteBuffer frame;
  private boolean dirty;

  Py4jDataChannel(WorkerControl control, CallTracker tracker) {
    super(tracker);
    this.control = control;
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
      byte[] response = control.data(bytes);
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
