package io.sparkstate.channel;

import java.nio.ByteBuffer;

/**
 * A response read through a buffer that its transport tops up while the reader needs more bytes (socket
 * and shm transports; py4j and embedded responses arrive whole, see {@link BufferReply}).
 */
abstract class StreamReply implements FramedDataChannel.Reply {
  /** Little-endian, in read mode: the unread part of the response received so far. */
  protected ByteBuffer in;

  StreamReply(ByteBuffer in) {
    this.in = in;
  }

  /** Makes at least {@code n} unread bytes available in {@link #in}, or throws a transport failure. */
  protected abstract void fill(int n);

  @Override
  public int readInt() {
    fill(4);
    return in.getInt();
  }

  @Override
  public byte readByte() {
    fill(1);
    return in.get();
  }

  @Override
  public void readFully(byte[] dst, int off, int len) {
    while (len > 0) {
      if (!in.hasRemaining()) {
        fill(1);
      }
      int k = Math.min(len, in.remaining());
      in.get(dst, off, k);
      off += k;
      len -= k;
    }
  }
}
