package io.sparkstate;

/** Where a store sends the storage keys it writes or scans: its trusted {@link KeyFilter} or a filter's builder. */
interface KeySink {
  /** Takes the {@code len} bytes of {@code data} at {@code off}. */
  void add(byte[] data, int off, int len);
}
