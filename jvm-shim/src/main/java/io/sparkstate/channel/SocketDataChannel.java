package io.sparkstate.channel;

import java.io.IOException;
import java.net.StandardProtocolFamily;
import java.net.UnixDomainSocketAddress;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.ClosedByInterruptException;
import java.nio.channels.SocketChannel;

/**
 * Transport {@code socket} (and the fallback of {@code shm}): frames over the worker's Unix domain socket
 * ({@code <socketDir>/data.sock}), through direct buffers, so a get after a few puts is a single write
 * plus a single read.
 *
 * <p>NIO closes a socket under a thread interrupted while it blocks on it: the exchange is then abandoned
 * (the channel is dirty, the error says interrupted, not worker failure) and the lease drains the worker
 * before anyone else uses it ({@code Worker#resetChannelIfDirty}).
 */
public final class SocketDataChannel extends QueuedFrameChannel {
  private static final int READ_BUFFER_BYTES = 64 * 1024;

  private final String socketPath;
  private final SocketChannel channel;
  private final Response response = new Response();
  /** A sync frame was sent and its response is not fully read, or a write failed halfway. */
  private boolean dirty;

  private SocketDataChannel(String socketPath, SocketChannel channel, CallTracker tracker) {
    super(tracker);
    this.socketPath = socketPath;
    this.channel = channel;
  }

  public static SocketDataChannel connect(String socketPath, CallTracker tracker) {
    try {
      SocketChannel ch = SocketChannel.open(StandardProtocolFamily.UNIX);
      ch.connect(UnixDomainSocketAddress.of(socketPath));
      return new SocketDataChannel(socketPath, ch, tracker);
    } catch (IOException | RuntimeException e) {
      throw new DataChannelException("cannot connect to worker data socket " + socketPath + ": " + e, true, e);
    }
  }

  @Override
  protected void send(ByteBuffer queued) {
    try {
      dirty = true;
      while (queued.hasRemaining()) {
        channel.write(queued);
      }
      dirty = false;
    } catch (IOException e) {
      throw failure("write", e);
    }
  }

  @Override
  protected Reply awaitReply() {
    dirty = true;
    response.in.clear().limit(0);
    return response;
  }

  private DataChannelException failure(String what, IOException e) {
    dirty = true;
    if (e instanceof ClosedByInterruptException) {
      return DataChannelException.interrupted("interrupted while waiting to " + what + " worker data socket "
          + socketPath + " (the channel is reset; the worker is fine)", e);
    }
    return new DataChannelException("cannot " + what + " worker data socket " + socketPath + ": " + e, true, e);
  }

  /** The response of the last sync frame, read from the socket as the reader asks for it. */
  private final class Response extends StreamReply {
    Response() {
      super(ByteBuffer.allocateDirect(READ_BUFFER_BYTES).order(ByteOrder.LITTLE_ENDIAN));
    }

    @Override
    protected void fill(int atLeast) {
      try {
        while (in.remaining() < atLeast) {
          in.compact();
          int n = channel.read(in);
          in.flip();
          if (n < 0) {
            throw new IOException("end of stream (worker closed the connection)");
          }
        }
      } catch (IOException e) {
        throw failure("read", e);
      }
    }

    @Override
    public void finish() {
      dirty = false;
    }
  }

  @Override
  public synchronized boolean isDirty() {
    return dirty || !channel.isOpen();
  }

  @Override
  public synchronized void close() {
    discardAll();
    try {
      channel.close();
    } catch (IOException ignored) {
      // closing a socket we are abandoning; nothing to recover
    }
  }
}
