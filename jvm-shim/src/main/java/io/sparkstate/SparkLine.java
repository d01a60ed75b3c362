package io.sparkstate;

import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;

/**
 * The Spark line this jar was compiled for (the resource {@code io/sparkstate/spark-line}, written by the
 * build) against the one the JVM runs. Each line's jar is compiled against that line's API, so a jar in
 * another line's JVM would fail later in a task with a missing method; the provider checks at once and
 * names both versions.
 */
final class SparkLine {
  private static final String RESOURCE = "spark-line";
  private static volatile String checked;

  private SparkLine() {}

  /** The line this jar serves, e.g. "4.3". */
  static String compiledFor() {
    try (InputStream in = SparkLine.class.getResourceAsStream(RESOURCE)) {
      if (in == null) {
        throw new IllegalStateException("the sparkstate jar has no io/sparkstate/" + RESOURCE + " resource: "
            + "it was not built by sparkstate's build (pip install .)");
      }
      return new String(in.readAllBytes(), StandardCharsets.UTF_8).trim();
    } catch (IOException e) {
      throw new IllegalStateException("cannot read io/sparkstate/" + RESOURCE + " from the sparkstate jar", e);
    }
  }

  /** The version of the Spark this JVM runs (Spark's own {@code SPARK_VERSION}). */
  static String running() {
    try {
      Class<?> pkg = Class.forName("org.apache.spark.package$"); // Scala's package object; `package` is a Java keyword
      Object module = pkg.getField("MODULE$").get(null);
      return (String) pkg.getMethod("SPARK_VERSION").invoke(module);
    } catch (ReflectiveOperationException e) {
      throw new IllegalStateException("cannot read the running Spark's version (org.apache.spark.SPARK_VERSION)", e);
    }
  }

  /** Throws, naming both versions and what to do, when this jar was built for another Spark line. */
  static void requireRunningLine() {
    String version = running();
    if (version.equals(checked)) {
      return;
    }
    String line = compiledFor();
    if (!lineOf(version).equals(line)) {
      throw new IllegalStateException(mismatch(line, version));
    }
    checked = version;
  }

  static String mismatch(String line, String version) {
    return "this sparkstate jar is built for Spark " + line + " but this JVM runs Spark " + version
        + ": put the jar of Spark " + lineOf(version) + " on spark.jars (`sparkstate jar --spark-version "
        + version + "`, or sparkstate.jar_path(\"" + version + "\"))";
  }

  /** "4.1.4" -> "4.1". */
  static String lineOf(String version) {
    String[] parts = version.split("\\.");
    return parts.length >= 2 ? parts[0] + "." + parts[1] : version;
  }
}
