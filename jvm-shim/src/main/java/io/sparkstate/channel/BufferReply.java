package io.sparkstate.channel;

import java.nio.ByteBuffer;

/** A response that is already whole in memory (py4j and embedded transports): reads check the bounds. */
final class BufferReply implements FramedDataChannel.Reply {
  private final ByteBuffer buf;
  private final String source;

  /** {@code buf} is little-endian and positioned at the response; {@code source} names it in errors. */
  BufferReply(ByteBuffer buf, String source) {
    this.buf = buf;
    this.source = source;
  }

  @Override
  public int readInt() {
    need(4);
    return buf.getInt();
  }

  @Override
  public byte readByte() {
    need(1);
    return buf.get();
  }

  @Override
  public void readFully(byte[] dst, int off, int len) {
    need(len);
    buf.get(dst, off, len);
  }

  @Override
  public void finish() {}

  private void need(int n) {
    if (buf.remaining() < n) {
      throw new DataChannelException("truncated response from " + source + ": needed " + n + " more bytes, have "
          + buf.remaining(), true, null);
    }
  }
}
