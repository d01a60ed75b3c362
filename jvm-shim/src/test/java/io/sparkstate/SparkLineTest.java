package io.sparkstate;

import static io.sparkstate.ShimTests.check;
import static io.sparkstate.ShimTests.equal;

/** The jar's Spark line against the JVM's: the line of a version, and the refusal naming both. */
final class SparkLineTest {
  public static void testALineIsMajorAndMinor() {
    equal("4.1", SparkLine.lineOf("4.1.4"), "a release");
    equal("3.5", SparkLine.lineOf("3.5.9"), "3.5");
    equal("4.3", SparkLine.lineOf("4.3.0-SNAPSHOT"), "a snapshot");
  }

  public static void testTheJarUnderTestServesTheRunningLine() {
    equal(SparkLine.lineOf(SparkLine.running()), SparkLine.compiledFor(), "the build's spark-line resource");
    SparkLine.requireRunningLine();
  }

  public static void testAMismatchNamesBothVersionsAndTheJarToUse() {
    String text = SparkLine.mismatch("4.3", "3.5.9");
    check(text.contains("built for Spark 4.3") && text.contains("runs Spark 3.5.9")
        && text.contains("sparkstate jar --spark-version 3.5.9"), text);
  }
}
