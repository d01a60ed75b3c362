package io.sparkstate;

/**
 * One decoded SCAN chunk. Keys and values stay in the single {@code data} array in order
 * (key_0 value_0 key_1 value_1 ...) so rows can point into it without per-row copies.
 */
final class ScanChunk {
  final int count;
  final boolean done;
  final int cursor;
  final int[] keyLengths;
  final int[] valueLengths;
  final byte[] data;

  ScanChunk(int count, boolean done, int cursor, int[] keyLengths, int[] valueLengths, byte[] data) {
    this.count = count;
    this.done = done;
    this.cursor = cursor;
    this.keyLengths = keyLengths;
    this.valueLengths = valueLengths;
    this.data = data;
  }
}
