package io.sparkstate.channel;

import java.nio.ByteBuffer;

/**
 * Codes and layout of the binary data frames (docs/internals/bridge.md, "Data frames"), kept in one place so
 * the JVM and Python sides can be checked against a single table.
 *
 * <pre>
 * request : u8 op | i32 handle | i32 len | payload[len]            (little-endian)
 * BATCH   : i32 n | i32 klen[n] | i32 vlen[n] | (key_i value_i)...  vlen = -1 removes the key
 * chunk   : i32 n | u8 done | i32 cursor | i32 klen[n] | i32 vlen[n] | (key_i value_i)...
 * GET_MANY: i32 n | i32 klen[n] | key_i...  -> i32 n | i32 vlen[n] (-1: absent) | value_i...
 * error   : i32 -2 | i32 len | utf-8 message                      (instead of any sync response)
 * </pre>
 */
final class Frames {
  static final byte BATCH = 1;
  static final byte GET = 2;
  static final byte SCAN_OPEN = 3;
  static final byte SCAN_NEXT = 4;
  static final byte SCAN_CLOSE = 5;
  static final byte SYNC = 6;
  /** Socket only, the first frame (transport shm): payload = the segment's path; answered with i32 0. */
  static final byte SHM_ATTACH = 7;
  static final byte GET_MANY = 8;

  static final int HEADER_BYTES = 1 + 4 + 4;
  /** vlen of a BATCH record that removes its key. */
  static final int REMOVE = -1;
  /** GET response length of an absent key. */
  static final int ABSENT = -1;
  /** First int of an error response. */
  static final int ERROR = -2;
  /** Pending BATCH records are flushed once they reach this many bytes (docs/internals/bridge.md, "Data frames"). */
  static final int FLUSH_BYTES = 32 * 1024;

  private Frames() {}

  static void header(ByteBuffer out, byte op, int handle, int payloadBytes) {
    out.put(op).putInt(handle).putInt(payloadBytes);
  }

  static String opName(byte op) {
    switch (op) {
      case BATCH: return "BATCH";
      case GET: return "GET";
      case SCAN_OPEN: return "SCAN_OPEN";
      case SCAN_NEXT: return "SCAN_NEXT";
      case SCAN_CLOSE: return "SCAN_CLOSE";
      case SYNC: return "SYNC";
      case SHM_ATTACH: return "SHM_ATTACH";
      case GET_MANY: return "GET_MANY";
      default: return "op" + op;
    }
  }
}
