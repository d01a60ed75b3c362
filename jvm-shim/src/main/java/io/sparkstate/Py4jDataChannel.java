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

  Py4jDataChannel(WorkerControl control) {
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
    return new Reply() {
      @Override
      public int readInt() {
        check(4);
        return buf.getInt();
      }

      @Override
      public byte readByte() {
        check(1);
        return buf.get();
      }

      @Override
      public void readFully(byte[] dst, int off, int len) {
        check(len);
        buf.get(dst, off, len);
      }

      @Override
      public void finish() {}

      private void check(int n) {
        if (buf.remaining() < n) {
          throw new DataChannelException("truncated response from worker data(): needed " + n
              + " more bytes, have " + buf.remaining(), true, null);
        }
      }
    };
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
