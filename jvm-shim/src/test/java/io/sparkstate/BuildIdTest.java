package io.sparkstate;

import static io.sparkstate.ShimTests.check;
import static io.sparkstate.ShimTests.equal;

/** A worker of another sparkstate build than the jar's is refused with what to set; unknown builds pass. */
final class BuildIdTest {
  public static void testTheJarCarriesTheBuildsId() {
    check(BuildId.OF_JAR != null && BuildId.OF_JAR.matches("[0-9a-f]{16}"), "jar build id: " + BuildId.OF_JAR);
  }

  public static void testTheSameBuildOrAJarWithoutAnIdPasses() {
    equal(null, BuildId.mismatch("a1", "a1", "python3", "/p"), "same build");
    equal(null, BuildId.mismatch(null, "a1", "python3", "/p"), "a jar without an id (Gradle)");
  }

  public static void testAWorkerWithoutAnIdIsAnotherBuild() {
    String why = BuildId.mismatch("a1", null, "/usr/bin/python3", null);
    check(why != null && why.contains("reports no build id") && why.contains(ShimSettings.PYTHON_EXEC), why);
  }

  public static void testAnotherBuildIsRefusedWithWhatToSet() {
    String why = BuildId.mismatch("a1", "b2", "/usr/bin/python3", "/usr/lib/python3/site-packages/sparkstate");
    check(why != null && why.contains("'/usr/bin/python3'") && why.contains("b2") && why.contains("a1")
        && why.contains("/usr/lib/python3/site-packages/sparkstate") && why.contains(ShimSettings.PYTHON_EXEC), why);
  }

  public static void testAHelloIsJudgedByItsBuildAndPackage() {
    equal(null, BuildId.mismatchOfHello("{\"pid\": 1, \"build\": \"" + BuildId.OF_JAR + "\"}", "python3"),
        "this jar's build");
    String why = BuildId.mismatchOfHello("{\"build\": \"b2\", \"package\": \"/elsewhere/sparkstate\"}", "py");
    check(why != null && why.contains("b2, at /elsewhere/sparkstate") && why.contains("'py'"), why);
    why = BuildId.mismatchOfHello("{\"pid\": 1}", "py");
    check(why != null && why.contains("reports no build id"), why);
  }
}
