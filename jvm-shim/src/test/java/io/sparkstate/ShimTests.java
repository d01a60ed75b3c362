package io.sparkstate;

import io.sparkstate.channel.FramesTest;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.lang.reflect.Modifier;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.List;

/**
 * The shim's unit tests and their runner: every {@code public static void test*()} method of the classes
 * listed in {@link #SUITES}, each reported on its own line; exit code 1 if any failed. A plain runner
 * because no test framework can be fetched here; run by {@code _build/backend.py run_java_tests} (which
 * tests/test_jvm_shim.py calls, so CI runs them) and by {@code gradle javaTests}.
 */
public final class ShimTests {
  static final List<Class<?>> SUITES = List.of(KeyCodecTest.class, FramesTest.class, WorkerPoolTest.class,
      LivenessTest.class, ShimSettingsTest.class, PythonStoreExceptionTest.class, KeyFilterTest.class,
      StoreKeyFilterTest.class, KeyFilterHandoverTest.class, ReadAheadCacheTest.class, StoreFailuresTest.class,
      ExitStatusTest.class, WorkerStderrTest.class, BuildIdTest.class, SparkLineTest.class, WorkerDirTest.class,
      MetricsTest.class);

  public static void main(String[] args) {
    int passed = 0;
    List<String> failed = new ArrayList<>();
    for (Class<?> suite : SUITES) {
      Method[] methods = suite.getDeclaredMethods();
      Arrays.sort(methods, Comparator.comparing(Method::getName));
      for (Method m : methods) {
        if (!m.getName().startsWith("test") || !Modifier.isStatic(m.getModifiers()) || m.getParameterCount() != 0) {
          continue;
        }
        String name = suite.getSimpleName() + "." + m.getName();
        try {
          m.invoke(null);
          passed++;
          System.out.println("PASS " + name);
        } catch (InvocationTargetException e) {
          failed.add(name);
          System.out.println("FAIL " + name + ": " + e.getCause());
          e.getCause().printStackTrace(System.out);
        } catch (IllegalAccessException e) {
          failed.add(name);
          System.out.println("FAIL " + name + ": " + e);
        }
      }
    }
    System.out.println(passed + " passed, " + failed.size() + " failed" + (failed.isEmpty() ? "" : ": " + failed));
    System.exit(failed.isEmpty() && passed > 0 ? 0 : 1);
  }

  // ---- assertions -------------------------------------------------------------------------------------

  public static void check(boolean condition, String what) {
    if (!condition) {
      throw new AssertionError(what);
    }
  }

  public static void equal(Object expected, Object actual, String what) {
    if (!java.util.Objects.deepEquals(expected, actual)) {
      throw new AssertionError(what + ": expected " + show(expected) + ", got " + show(actual));
    }
  }

  public static <T extends Throwable> T raises(Class<T> type, Runnable body, String what) {
    try {
      body.run();
    } catch (Throwable e) {
      if (type.isInstance(e)) {
        return type.cast(e);
      }
      throw new AssertionError(what + ": expected " + type.getSimpleName() + ", got " + e, e);
    }
    throw new AssertionError(what + ": expected " + type.getSimpleName() + ", nothing was thrown");
  }

  private static String show(Object o) {
    if (o instanceof byte[]) {
      return Arrays.toString((byte[]) o);
    }
    if (o instanceof int[]) {
      return Arrays.toString((int[]) o);
    }
    return String.valueOf(o);
  }

  private ShimTests() {}
}
