package io.sparkstate.channel;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

/**
 * The frame protocol shared by both transports: per-store BATCH buffers, request encoding and response
 * decoding. Subclasses only move bytes: {@link #beginFrame} hands out a little-endian buffer with room for
 * one frame, {@link #endAsyncFrame} sends (or queues) it, {@link #endSyncFrame} sends everything queued and
 * returns a {@link Reply} positioned at the response.
 *
 * <p>Puts are buffered per store handle (a join task writes four stores row by row, so one shared buffer
 * would degrade into tiny frames) and flushed, all handles at once, at {@link Frames#FLUSH_BYTES} and
 * before every sync frame except GET and a SCAN_OPEN whose prefix no buffered key of its store has. A get
 * of a key with a buffered write is answered from the buffer (the latest write wins), any other key by the
 * worker, which holds every earlier write of it; a scan of a prefix without buffered writes sees the same
 * rows flushed or not. Writes of different keys commute, so holding some back changes no answer.
 * Operators that alternate reads and writes row by row (dedup, joins, session windows) thus still send
 * their writes in large batches.
 */
abstract class FramedDataChannel implements DataChannel {

  /** Reads one response; {@link #finish} marks it fully consumed. */
  interface Reply {
    int readInt();

    byte readByte();

    void readFully(byte[] dst, int off, int len);

    void finish();
  }

  private static final class PendingBatch {
    final List<byte[]> keys = new ArrayList<>();
    final List<byte[]> values = new ArrayList<>(); // null entry = remove
    /** Each buffered key's latest write: its index in {@link #values}; sorted, for prefix checks. */
    final TreeMap<byte[], Integer> latest = new TreeMap<>(Arrays::compareUnsigned);
    int dataBytes;
  }

  /** A buffered write's value for a get: the bytes (copied), or {@link #REMOVED}. */
  private static final byte[] REMOVED = new byte[0];

  private final Map<Integer, PendingBatch> pending = new LinkedHashMap<>();
  private int pendingBytes;
  /** Told of every call that waits on the worker, so a hung one can be named. */
  private final CallTracker tracker;

  protected FramedDataChannel(CallTracker tracker) {
    this.tracker = tracker;
  }

  protected abstract ByteBuffer beginFrame(int frameBytes);

  protected abstract void endAsyncFrame();

  protected abstract Reply endSyncFrame();

  @Override
  public synchronized void put(int handle, byte[] key, byte[] value) {
    append(handle, key, value);
  }

  @Override
  public synchronized void remove(int handle, byte[] key) {
    append(handle, key, null);
  }

  private void append(int handle, byte[] key, byte[] value) {
    PendingBatch batch = pending.computeIfAbsent(handle, h -> new PendingBatch());
    batch.latest.put(key, batch.keys.size());
    batch.keys.add(key);
    batch.values.add(value);
    int bytes = key.length + (value == null ? 0 : value.length) + 8;
    batch.dataBytes += bytes;
    pendingBytes += bytes;
    if (pendingBytes >= Frames.FLUSH_BYTES) {
      tracker.beginCall("BATCH", handle);
      try {
        flushBatches();
      } finally {
        tracker.endCall();
      }
    }
  }

  private void flushBatches() {
    for (Iterator<Map.Entry<Integer, PendingBatch>> it = pending.entrySet().iterator(); it.hasNext(); ) {
      Map.Entry<Integer, PendingBatch> e = it.next();
      it.remove();
      writeBatch(e.getKey(), e.getValue());
    }
    pendingBytes = 0;
  }

  private void writeBatch(int handle, PendingBatch batch) {
    int n = batch.keys.size();
    int payload = 4 + batch.dataBytes; // dataBytes already counts 8 bytes of lengths per record
    ByteBuffer out = beginFrame(Frames.HEADER_BYTES + payload);
    Frames.header(out, Frames.BATCH, handle, payload);
    out.putInt(n);
    for (byte[] k : batch.keys) {
      out.putInt(k.length);
    }
    for (byte[] v : batch.values) {
      out.putInt(v == null ? Frames.REMOVE : v.length);
    }
    for (int i = 0; i < n; i++) {
      out.put(batch.keys.get(i));
      byte[] v = batch.values.get(i);
      if (v != null) {
        out.put(v);
      }
    }
    endAsyncFrame();
  }

  /** The latest buffered write of `key` to `handle`: a copy of its value, {@link #REMOVED}, or null if none. */
  private byte[] buffered(int handle, byte[] key) {
    PendingBatch batch = pending.get(handle);
    if (batch == null) {
      return null;
    }
    Integer index = batch.latest.get(key);
    if (index == null) {
      return null;
    }
    byte[] value = batch.values.get(index);
    return value == null ? REMOVED : value.clone(); // the caller's row may be changed; the buffer must not be
  }

  @Override
  public synchronized byte[] get(int handle, byte[] key) {
    byte[] local = buffered(handle, key);
    if (local != null) {
      return local == REMOVED ? null : local;
    }
    tracker.beginCall("GET", handle);
    try {
      Reply reply = sendFrame(Frames.GET, handle, key);
      int len = reply.readInt();
      if (len == Frames.ABSENT) {
        reply.finish();
        return null;
      }
      checkNotError(len, reply);
      if (len < 0) {
        throw new DataChannelException("malformed GET response: length " + len, true, null);
      }
      byte[] value = new byte[len];
      reply.readFully(value, 0, len);
      reply.finish();
      return value;
    } finally {
      tracker.endCall();
    }
  }

  @Override
  public synchronized byte[][] getMany(int handle, List<byte[]> keys) {
    int n = keys.size();
    int payloadBytes = 4 + 4 * n;
    for (byte[] k : keys) {
      payloadBytes += k.length;
    }
    tracker.beginCall("GET_MANY", handle);
    try {
      flushBatches(); // the answers must reflect every buffered write
      ByteBuffer out = beginFrame(Frames.HEADER_BYTES + payloadBytes); // the keys go straight into the frame
      Frames.header(out, Frames.GET_MANY, handle, payloadBytes);
      out.putInt(n);
      for (byte[] k : keys) {
        out.putInt(k.length);
      }
      for (byte[] k : keys) {
        out.put(k);
      }
      Reply reply = endSyncFrame();
      int count = reply.readInt();
      checkNotError(count, reply);
      if (count != n) {
        throw new DataChannelException("malformed GET_MANY response: " + count + " values for " + n + " keys",
            true, null);
      }
      int[] lengths = new int[n];
      for (int i = 0; i < n; i++) {
        lengths[i] = reply.readInt();
        if (lengths[i] < Frames.ABSENT) {
          throw new DataChannelException("malformed GET_MANY response: length " + lengths[i], true, null);
        }
      }
      byte[][] values = new byte[n][];
      for (int i = 0; i < n; i++) {
        if (lengths[i] >= 0) {
          values[i] = new byte[lengths[i]];
          reply.readFully(values[i], 0, lengths[i]);
        }
      }
      reply.finish();
      return values;
    } finally {
      tracker.endCall();
    }
  }

  /** True if a buffered write of `handle` has a key starting with `prefix`. */
  private boolean buffersPrefix(int handle, byte[] prefix) {
    PendingBatch batch = pending.get(handle);
    if (batch == null) {
      return false;
    }
    byte[] first = batch.latest.ceilingKey(prefix);
    return first != null && first.length >= prefix.length
        && Arrays.equals(first, 0, prefix.length, prefix, 0, prefix.length);
  }

  @Override
  public synchronized ScanChunk scanOpen(int handle, byte[] prefix) {
    tracker.beginCall("SCAN_OPEN", handle);
    try {
      Reply reply = buffersPrefix(handle, prefix) ? request(Frames.SCAN_OPEN, handle, prefix)
          : sendFrame(Frames.SCAN_OPEN, handle, prefix);
      return readChunk(reply);
    } finally {
      tracker.endCall();
    }
  }

  @Override
  public synchronized ScanChunk scanNext(int handle, int cursor) {
    tracker.beginCall("SCAN_NEXT", handle);
    try {
      return readChunk(request(Frames.SCAN_NEXT, handle, intPayload(cursor)));
    } finally {
      tracker.endCall();
    }
  }

  @Override
  public synchronized void scanClose(int handle, int cursor) {
    tracker.beginCall("SCAN_CLOSE", handle);
    try {
      ByteBuffer out = beginFrame(Frames.HEADER_BYTES + 4);
      Frames.header(out, Frames.SCAN_CLOSE, handle, 4);
      out.putInt(cursor);
      endAsyncFrame();
    } finally {
      tracker.endCall();
    }
  }

  @Override
  public synchronized void sync(int handle) {
    tracker.beginCall("SYNC", handle);
    try {
      Reply reply = request(Frames.SYNC, handle, new byte[0]);
      int status = reply.readInt();
      checkNotError(status, reply);
      reply.finish();
      if (status != 0) {
        throw new DataChannelException("unexpected SYNC response " + status, true, null);
      }
    } finally {
      tracker.endCall();
    }
  }

  @Override
  public synchronized void discard(int handle) {
    PendingBatch batch = pending.remove(handle);
    if (batch != null) {
      pendingBytes -= batch.dataBytes;
    }
  }

  /** Drops every buffered record, e.g. when the connection is reset between leases. */
  protected synchronized void discardAll() {
    pending.clear();
    pendingBytes = 0;
  }

  /** A sync frame after every buffered write: what the worker answers reflects all of them. */
  private Reply request(byte op, int handle, byte[] payload) {
    flushBatches();
    return sendFrame(op, handle, payload);
  }

  /** A sync frame; buffered writes stay buffered (GET: see {@link #buffered}). */
  private Reply sendFrame(byte op, int handle, byte[] payload) {
    ByteBuffer out = beginFrame(Frames.HEADER_BYTES + payload.length);
    Frames.header(out, op, handle, payload.length);
    out.put(payload);
    return endSyncFrame();
  }

  private static byte[] intPayload(int value) {
    return ByteBuffer.allocate(4).order(java.nio.ByteOrder.LITTLE_ENDIAN).putInt(value).array();
  }

  private ScanChunk readChunk(Reply reply) {
    int n = reply.readInt();
    checkNotError(n, reply);
    if (n < 0) {
      throw new DataChannelException("malformed scan chunk: n=" + n, true, null);
    }
    boolean done = reply.readByte() != 0;
    int cursor = reply.readInt();
    int[] keyLengths = new int[n];
    int[] valueLengths = new int[n];
    long total = 0;
    for (int i = 0; i < n; i++) {
      keyLengths[i] = reply.readInt();
      total += keyLengths[i];
    }
    for (int i = 0; i < n; i++) {
      valueLengths[i] = reply.readInt();
      total += valueLengths[i];
    }
    for (int i = 0; i < n; i++) {
      if (keyLengths[i] < 0 || valueLengths[i] < 0) {
        throw new DataChannelException("malformed scan chunk: row " + i + " has a negative length", true, null);
      }
    }
    if (total > Integer.MAX_VALUE - 16) {
      throw new DataChannelException("scan chunk too large: " + total + " bytes", true, null);
    }
    byte[] data = new byte[(int) total];
    reply.readFully(data, 0, data.length);
    reply.finish();
    return new ScanChunk(n, done, cursor, keyLengths, valueLengths, data);
  }

  private static final int MAX_ERROR_BYTES = 16 << 20;

  private static void checkNotError(int first, Reply reply) {
    if (first != Frames.ERROR) {
      return;
    }
    int len = reply.readInt();
    if (len < 0 || len > MAX_ERROR_BYTES) {
      throw new DataChannelException("malformed error response: message length " + len, true, null);
    }
    byte[] msg = new byte[len];
    reply.readFully(msg, 0, len);
    reply.finish();
    throw new DataChannelException(new String(msg, StandardCharsets.UTF_8), false, null);
  }
}
