package io.sparkstate.channel;

/**
 * One decoded SCAN chunk. Keys and values stay in the single {@code data} array in order
 * (key_0 value_0 key_1 value_1 ...) so rows can point into it without per-row copies.
 */
public final class ScanChunk {
  public final int count;
  public final boolean done;
  public final int cursor;
  public final int[] keyLengths;
  public final int[] valueLengths;
  public final byte[] data;

  ScanChunk(int count, boolean done, int cursor, int[] keyLengths, int[] valueLengths, byte[] data) {
    this.count = count;
    this.done = done;
    this.cursor = cursor;
    this.keyLengths = keyLengths;
    this.valueLengths = valueLengths;
    this.data = data;
  }
}
