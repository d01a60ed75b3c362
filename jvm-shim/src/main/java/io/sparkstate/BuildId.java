package io.sparkstate;

import com.fasterxml.jackson.databind.JsonNode;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;

/**
 * Which build of sparkstate this jar is: a digest of the shim's and the Python package's sources, written
 * into the jar and beside it in the Python package by the build. A worker reports its package's id in its
 * hello (a worker process when it registers, an embedded one when it starts); a worker interpreter with
 * another install of sparkstate (another version, or an older build of the same) would speak a protocol
 * the shim may not, so it is refused with what to set.
 */
final class BuildId {
  private BuildId() {}

  /** The jar's build id, or null for a jar built without one (Gradle). */
  static final String OF_JAR = read();

  private static String read() {
    try (InputStream in = BuildId.class.getResourceAsStream("build-id")) {
      if (in == null) {
        return null;
      }
      String id = new String(in.readAllBytes(), StandardCharsets.UTF_8).trim();
      return id.isEmpty() ? null : id;
    } catch (IOException e) {
      return null;
    }
  }

  /** {@link #mismatch} for a worker's hello (its JSON: {@code build}, {@code package}). */
  static String mismatchOfHello(String hello, String python) {
    JsonNode h = Json.parse(hello, "the worker's hello");
    return mismatch(OF_JAR, h.path("build").isTextual() ? h.get("build").asText() : null, python,
        h.path("package").isTextual() ? h.get("package").asText() : null);
  }

  /**
   * Null when the worker's build is the jar's, or the jar has no id; else why the worker is refused. A
   * worker without an id ({@code workerBuild} null) is an install older than build ids, or a source tree
   * whose jar was never built: not the build of this jar either. {@code python} is the worker's
   * interpreter, {@code workerPackage} where its sparkstate package lies (null if it did not say).
   */
  static String mismatch(String jarBuild, String workerBuild, String python, String workerPackage) {
    if (jarBuild == null || jarBuild.equals(workerBuild)) {
      return null;
    }
    String theirs = workerBuild != null ? workerBuild + ", at " + workerPackage
        : "one that reports no build id: an older install, or a source tree never built"
            + (workerPackage != null ? ", at " + workerPackage : "");
    return "the sparkstate worker interpreter '" + python + "' runs another build of sparkstate (" + theirs
        + ") than this executor's sparkstate jar (" + jarBuild + "). Set "
        + ShimSettings.PYTHON_EXEC + " to the Python whose sparkstate package holds the jar on spark.jars "
        + "(sparkstate.configure() sets it to the driver's), or install the same sparkstate in both";
  }
}
