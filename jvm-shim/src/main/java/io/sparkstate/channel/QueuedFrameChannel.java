package io.sparkstate.channel;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;

/**
 * A channel whose frames are queued in one direct buffer and handed to the transport in bulk (socket and
 * shm): async frames wait until {@link Frames#FLUSH_BYTES} are queued or a sync frame follows, so a get
 * after a few puts is one hand-over.
 */
abstract class QueuedFrameChannel extends FramedDataChannel {
  protected QueuedFrameChannel(CallTracker tracker) {
    super(tracker);
  }

  private ByteBuffer out = ByteBuffer.allocateDirect(2 * Frames.FLUSH_BYTES).order(ByteOrder.LITTLE_ENDIAN);

  /** Hands the queued frames (position to limit of {@code queued}) to the worker. */
  protected abstract void send(ByteBuffer queued);

  /** The response of the sync frame just sent. */
  protected abstract Reply awaitReply();

  @Override
  protected ByteBuffer beginFrame(int frameBytes) {
    if (out.remaining() < frameBytes) {
      sendQueued();
      if (out.capacity() < frameBytes) {
        out = ByteBuffer.allocateDirect(frameBytes).order(ByteOrder.LITTLE_ENDIAN);
      }
    }
    return out;
  }

  @Override
  protected void endAsyncFrame() {
    if (out.position() >= Frames.FLUSH_BYTES) {
      sendQueued();
    }
  }

  @Override
  protected Reply endSyncFrame() {
    sendQueued();
    return awaitReply();
  }

  private void sendQueued() {
    out.flip();
    try {
      send(out);
    } finally {
      out.clear();
    }
  }
}
