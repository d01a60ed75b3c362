package io.sparkstate.channel;

import static io.sparkstate.ShimTests.check;
import static io.sparkstate.ShimTests.equal;
import static io.sparkstate.ShimTests.raises;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;

/**
 * Frame encoding and response decoding of FramedDataChannel (docs/internals/bridge.md, "Data frames"),
 * without a worker.
 */
public final class FramesTest {
  /** Records every frame it is handed and answers sync frames with a prepared response. */
  static final class Recording extends FramedDataChannel {
    final List<ByteBuffer> sent = new ArrayList<>();
    private ByteBuffer frame;
    ByteBuffer reply = le(0);

    Recording() {
      super(CallTracker.NONE);
    }

    @Override
    protected ByteBuffer beginFrame(int frameBytes) {
      frame = le(frameBytes);
      return frame;
    }

    @Override
    protected void endAsyncFrame() {
      sent.add(frame.flip());
    }

    @Override
    protected Reply endSyncFrame() {
      sent.add(frame.flip());
      return new BufferReply(reply.duplicate().order(ByteOrder.LITTLE_ENDIAN), "test");
    }

    @Override
    public boolean isDirty() {
      return false;
    }

    @Override
    public void close() {}
  }

  static ByteBuffer le(int bytes) {
    return ByteBuffer.allocate(bytes).order(ByteOrder.LITTLE_ENDIAN);
  }

  private static byte[] bytes(String s) {
    return s.getBytes(StandardCharsets.UTF_8);
  }

  public static void testPutsAreBatchedPerStoreAndFlushedBeforeASyncFrame() {
    Recording ch = new Recording();
    ch.put(1, bytes("kgk1"), bytes("v1"));
    ch.put(2, bytes("kgk2"), bytes("v22"));
    ch.remove(1, bytes("kgk3"));
    equal(0, ch.sent.size(), "puts are buffered");
    ch.reply = le(4).putInt(0).flip();
    ch.sync(1);
    equal(3, ch.sent.size(), "two BATCH frames (one per store), then the SYNC");
    ByteBuffer b = ch.sent.get(0);
    equal(Frames.BATCH, b.get(), "op");
    equal(1, b.getInt(), "handle");
    equal(b.remaining() - 4, b.getInt(), "payload length");
    equal(2, b.getInt(), "records of store 1");
    equal(4, b.getInt(), "klen 1");
    equal(4, b.getInt(), "klen 2");
    equal(2, b.getInt(), "vlen 1");
    equal(Frames.REMOVE, b.getInt(), "vlen 2: a remove");
    byte[] data = new byte[b.remaining()];
    b.get(data);
    equal("kgk1v1kgk3", new String(data, StandardCharsets.UTF_8), "keys and values in order");
    equal(Frames.SYNC, ch.sent.get(2).get(), "SYNC op");
  }

  public static void testAGetSeesBufferedWritesWithoutFlushingThem() {
    Recording ch = new Recording();
    ch.put(1, bytes("kgk1"), bytes("v1"));
    ch.put(1, bytes("kgk1"), bytes("v2"));
    ch.put(1, bytes("kgk3"), bytes("v3"));
    ch.remove(1, bytes("kgk3"));
    ch.put(2, bytes("kgk9"), bytes("other store"));
    byte[] got = ch.get(1, bytes("kgk1"));
    equal(bytes("v2"), got, "the latest buffered write of the key");
    got[0] = 'X';
    equal(bytes("v2"), ch.get(1, bytes("kgk1")), "a copy: the caller cannot change the buffer");
    equal(null, ch.get(1, bytes("kgk3")), "a buffered remove");
    equal(0, ch.sent.size(), "answered from the buffer: nothing sent");
    ch.reply = le(9).putInt(5).put(bytes("value")).flip();
    equal(bytes("value"), ch.get(1, bytes("kgk9")), "a key buffered for another store only: asked of the worker");
    equal(1, ch.sent.size(), "the GET alone: the buffered writes stay buffered");
    equal(Frames.GET, ch.sent.get(0).get(0), "GET op");
    ch.reply = le(4).putInt(0).flip();
    ch.sync(1);
    ByteBuffer b = ch.sent.get(1);
    b.position(Frames.HEADER_BYTES);
    equal(4, b.getInt(), "all four writes of store 1 reach the worker, in order");
  }

  public static void testAScanFlushesOnlyWhenAWriteIsBufferedUnderItsPrefix() {
    Recording ch = new Recording();
    ch.put(1, bytes("kgA1"), bytes("v"));
    ch.put(1, bytes("kgB"), bytes("v"));
    ch.reply = le(9).putInt(0).put((byte) 1).putInt(7).flip();
    ch.scanOpen(1, bytes("kgC"));
    ch.scanOpen(1, bytes("kgAZ"));
    ch.scanOpen(2, bytes("kgA"));
    equal(3, ch.sent.size(), "three SCAN_OPENs, nothing buffered under their prefixes (store 2 has none)");
    ch.scanOpen(1, bytes("kgA"));
    equal(5, ch.sent.size(), "the BATCH, then the SCAN_OPEN: kgA1 is buffered under kgA");
    equal(Frames.BATCH, ch.sent.get(3).get(0), "BATCH first");
    ch.put(1, bytes("kgB"), bytes("w"));
    ch.scanOpen(1, new byte[0]);
    equal(Frames.BATCH, ch.sent.get(5).get(0), "a whole-store scan flushes any buffered write");
  }

  public static void testAGetReturnsTheValueOrAWorkerError() {
    Recording ch = new Recording();
    ch.reply = le(9).putInt(5).put(bytes("value")).flip();
    equal(bytes("value"), ch.get(1, bytes("kgk1")), "value");
    byte[] msg = bytes("KeyError: nope");
    ch.reply = le(8 + msg.length).putInt(Frames.ERROR).putInt(msg.length).put(msg).flip();
    DataChannelException e = raises(DataChannelException.class, () -> ch.get(1, bytes("kgk1")), "error frame");
    check(!e.isTransportFailure() && e.getMessage().equals("KeyError: nope"), e.getMessage());
  }

  public static void testAScanChunkIsDecodedAndAMalformedOneIsATransportFailure() {
    Recording ch = new Recording();
    ch.reply = le(9 + 16 + 11).putInt(2).put((byte) 1).putInt(7).putInt(4).putInt(5).putInt(1).putInt(1)
        .put(bytes("kgk1kgk22ab")).flip();
    ScanChunk chunk = ch.scanOpen(3, new byte[0]);
    equal(2, chunk.count, "rows");
    check(chunk.done, "done");
    equal(7, chunk.cursor, "cursor");
    equal(new int[] {4, 5}, chunk.keyLengths, "key lengths");
    equal(new int[] {1, 1}, chunk.valueLengths, "value lengths");
    ch.reply = le(9 + 8).putInt(1).put((byte) 0).putInt(7).putInt(-3).putInt(1).flip();
    DataChannelException e = raises(DataChannelException.class, () -> ch.scanNext(3, 7), "negative length");
    check(e.isTransportFailure(), "a malformed response is a transport failure");
  }

  public static void testBuffersAreFlushedOnceTheyReachTheFlushSize() {
    Recording ch = new Recording();
    byte[] value = new byte[1000];
    long buffered = 0;
    long before = 0;
    int puts = 0;
    while (ch.sent.isEmpty()) {
      byte[] key = bytes("kg" + (puts++));
      before = buffered;
      buffered += key.length + value.length + 8;
      ch.put(1, key, value);
    }
    check(before < Frames.FLUSH_BYTES && buffered >= Frames.FLUSH_BYTES,
        "flushed by the put that crossed the flush size (" + buffered + " bytes buffered)");
    equal(Frames.BATCH, ch.sent.get(0).get(0), "an asynchronous BATCH frame");
  }

  public static void testAnAbortDropsTheStoresUnsentRecordsOnly() {
    Recording ch = new Recording();
    ch.put(1, bytes("kgk1"), bytes("v"));
    ch.put(2, bytes("kgk2"), bytes("v"));
    ch.discard(1);
    ch.reply = le(4).putInt(0).flip();
    ch.sync(2);
    equal(2, ch.sent.size(), "the BATCH of store 2 and the SYNC");
    ByteBuffer b = ch.sent.get(0);
    b.get();
    equal(2, b.getInt(), "store 2's batch survived");
  }

  public static void testGetManyFlushesTheBatchesThenSendsEveryKeyAndDecodesEveryValue() {
    Recording ch = new Recording();
    ch.put(1, bytes("kgk1"), bytes("v1"));
    ch.reply = le(4 + 8 + 3).putInt(2).putInt(3).putInt(Frames.ABSENT).put(bytes("abc")).flip();
    byte[][] values = ch.getMany(1, List.of(bytes("kgk1"), bytes("kgk22")));
    equal(2, ch.sent.size(), "the buffered BATCH, then GET_MANY");
    equal(Frames.BATCH, ch.sent.get(0).get(), "first the BATCH");
    ByteBuffer f = ch.sent.get(1);
    equal(Frames.GET_MANY, f.get(), "op");
    equal(1, f.getInt(), "handle");
    equal(4 + 8 + 9, f.getInt(), "payload length");
    equal(2, f.getInt(), "keys");
    equal(4, f.getInt(), "klen 1");
    equal(5, f.getInt(), "klen 2");
    byte[] data = new byte[f.remaining()];
    f.get(data);
    equal("kgk1kgk22", new String(data, StandardCharsets.UTF_8), "keys in order");
    equal("abc", new String(values[0], StandardCharsets.UTF_8), "value 1");
    check(values[1] == null, "value 2 is absent");
  }

  public static void testAGetManyResponseThatDoesNotMatchItsKeysIsRefused() {
    Recording ch = new Recording();
    ch.reply = le(8).putInt(1).putInt(0).flip();
    DataChannelException e = raises(DataChannelException.class,
        () -> ch.getMany(1, List.of(bytes("kgk1"), bytes("kgk2"))), "one value for two keys");
    check(e.getMessage().contains("1 values for 2 keys"), e.getMessage());
    byte[] msg = bytes("KeyError: boom");
    ch.reply = le(8 + msg.length).putInt(Frames.ERROR).putInt(msg.length).put(msg).flip();
    e = raises(DataChannelException.class, () -> ch.getMany(1, List.of(bytes("kgk1"))), "an error frame");
    check(e.getMessage().contains("KeyError: boom"), e.getMessage());
  }
}
