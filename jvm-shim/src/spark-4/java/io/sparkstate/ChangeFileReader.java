package io.sparkstate;

import java.io.BufferedInputStream;
import java.io.DataInputStream;
import java.io.EOFException;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import org.apache.spark.sql.catalyst.expressions.UnsafeRow;
import org.apache.spark.sql.execution.streaming.state.RecordType$;
import org.apache.spark.util.NextIterator;
import scala.Enumeration;
import scala.Tuple4;

/**
 * Spark's change feed over the records a worker wrote to a local file (sparkstate/worker/change_file.py):
 * (PUT_RECORD or DELETE_RECORD, key row, value row or null, batch id = version - 1). Deletes the file when
 * closed; the rows are fresh copies, so Spark may keep them.
 */
final class ChangeFileReader extends NextIterator<Tuple4<Enumeration.Value, UnsafeRow, UnsafeRow, Object>> {
  private final Path path;
  private final KeyCodec codec;
  private final String store;
  private DataInputStream in;

  ChangeFileReader(String path, KeyCodec codec, String store) {
    this.path = Paths.get(path);
    this.codec = codec;
    this.store = store;
    try {
      this.in = new DataInputStream(new BufferedInputStream(Files.newInputStream(this.path), 1 << 20));
    } catch (IOException e) {
      deleteQuietly();
      throw new UncheckedIOException(store + ": cannot open the change feed file " + path, e);
    }
  }

  @Override
  public Tuple4<Enumeration.Value, UnsafeRow, UnsafeRow, Object> getNext() {
    try {
      long version;
      try {
        version = in.readLong();
      } catch (EOFException end) {
        finished_$eq(true);
        return null;
      }
      byte[] key = new byte[in.readInt()];
      in.readFully(key);
      int valueLength = in.readInt();
      if (valueLength < 0) {
        return new Tuple4<>(RecordType$.MODULE$.DELETE_RECORD(), codec.keyRow(key, 0, key.length), null,
            version - 1);
      }
      byte[] value = new byte[valueLength];
      in.readFully(value);
      return new Tuple4<>(RecordType$.MODULE$.PUT_RECORD(), codec.keyRow(key, 0, key.length),
          codec.valueRow(value, 0, valueLength), version - 1);
    } catch (IOException e) {
      throw new UncheckedIOException(store + ": the change feed file " + path + " is truncated", e);
    }
  }

  @Override
  public void close() {
    try {
      if (in != null) {
        in.close();
      }
    } catch (IOException ignored) {
      // the file is deleted next; nothing was lost
    } finally {
      in = null;
      deleteQuietly();
    }
  }

  private void deleteQuietly() {
    try {
      Files.deleteIfExists(path);
    } catch (IOException ignored) {
      // a leftover in the store's scratch directory, removed with the store's local files
    }
  }
}
