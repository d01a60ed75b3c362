package io.sparkstate;

import com.fasterxml.jackson.databind.JsonNode;
import io.sparkstate.channel.EmbeddedDataChannel;
import java.io.ByteArrayOutputStream;
import java.io.File;
import java.io.IOException;
import java.io.InputStream;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.net.URL;
import java.net.URLClassLoader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * CPython inside this JVM, through Jep (transport=embedded). Jep is found through the configured
 * interpreter ({@code import jep} there), loaded in its own class loader and driven by reflection, so the
 * shim needs Jep neither to compile nor on Spark's classpath.
 *
 * <p>Jep binds an interpreter to the thread that made it, and a process has one CPython: every thread that
 * calls Python gets its own {@code SharedInterpreter}, all sharing one set of modules, so a store opened
 * from one task thread is reachable from the next. Calls take the GIL for their duration only.
 */
final class EmbeddedPython implements EmbeddedDataChannel.Interpreter {
  private static final Logger LOG = LoggerFactory.getLogger(EmbeddedPython.class);
  private static EmbeddedPython instance; // guarded by EmbeddedPython.class

  /** Asks the interpreter where Jep lives and what its sys.path is; prints one JSON line. */
  private static final String PROBE = String.join("\n",
      "import json, sys, importlib.util as u",
      "s = u.find_spec('jep')",
      "print(json.dumps({'jep': list(s.submodule_search_locations)[0] if s else None,",
      "                  'path': [p for p in sys.path if p],",
      "                  'version': '%d.%d' % sys.version_info[:2],",
      "                  'executable': sys.executable}))");

  final String pythonExec;
  private final Method invoke;
  private final Method exec;
  private final Method getValue;
  private final Method call;
  private final Class<?> pyCallableClass;
  private final Class<?> interpreterClass;
  private final ThreadLocal<Object> interpreter = ThreadLocal.withInitial(this::newInterpreter);

  private EmbeddedPython(String pythonExec, ClassLoader jepLoader) throws ReflectiveOperationException {
    this.pythonExec = pythonExec;
    this.interpreterClass = Class.forName("jep.SharedInterpreter", true, jepLoader);
    Class<?> iface = Class.forName("jep.Interpreter", true, jepLoader);
    this.invoke = iface.getMethod("invoke", String.class, Object[].class);
    this.exec = iface.getMethod("exec", String.class);
    this.getValue = iface.getMethod("getValue", String.class, Class.class);
    this.pyCallableClass = Class.forName("jep.python.PyCallable", true, jepLoader);
    this.call = pyCallableClass.getMethod("call", Object[].class);
  }

  /** The JVM's embedded interpreter, started on first use from {@code pythonExec}'s Jep installation. */
  static synchronized EmbeddedPython get(String pythonExec, long timeoutMs) {
    if (instance != null) {
      if (!instance.pythonExec.equals(pythonExec)) {
        throw new WorkerFailedException("sparkstate transport=embedded: this JVM already embeds the Python of '"
            + instance.pythonExec + "'; one process holds one CPython, so '" + pythonExec
            + "' cannot be embedded as well. Use the same " + ShimSettings.PYTHON_EXEC + " everywhere.");
      }
      return instance;
    }
    JsonNode probe = probe(pythonExec, timeoutMs);
    String jepDir = probe.path("jep").isTextual() ? probe.get("jep").asText() : null;
    if (jepDir == null) {
      throw new WorkerFailedException("sparkstate transport=embedded needs Jep in the interpreter '" + pythonExec
          + "' (Python " + probe.path("version").asText() + "): install it with `" + pythonExec
          + " -m pip install jep` (it compiles against JAVA_HOME), or set " + ShimSettings.TRANSPORT
          + "=shm.");
    }
    File jar = findJar(new File(jepDir));
    File lib = new File(jepDir, "libjep.so");
    if (jar == null || !lib.isFile()) {
      throw new WorkerFailedException("sparkstate transport=embedded: the Jep installation in " + jepDir
          + " has no jep-*.jar or libjep.so; reinstall it with `" + pythonExec + " -m pip install --force-reinstall jep`");
    }
    try {
      URLClassLoader loader = new URLClassLoader(new URL[] {jar.toURI().toURL()}, EmbeddedPython.class.getClassLoader());
      Class<?> main = Class.forName("jep.MainInterpreter", true, loader);
      main.getMethod("setJepLibraryPath", String.class).invoke(null, lib.getAbsolutePath());
      Class<?> configClass = Class.forName("jep.JepConfig", true, loader);
      Object config = configClass.getConstructor().newInstance();
      List<String> paths = new ArrayList<>();
      probe.path("path").forEach(p -> paths.add(p.asText()));
      configClass.getMethod("addIncludePaths", String[].class).invoke(config, (Object) paths.toArray(new String[0]));
      configClass.getMethod("setClassLoader", ClassLoader.class).invoke(config, loader);
      configClass.getMethod("redirectStdErr", java.io.OutputStream.class).invoke(config, System.err);
      Class.forName("jep.SharedInterpreter", true, loader).getMethod("setConfig", configClass).invoke(null, config);
      instance = new EmbeddedPython(pythonExec, loader);
      LOG.info("sparkstate: embedding Python {} ({}) through Jep from {}", probe.path("version").asText(),
          probe.path("executable").asText(), jepDir);
      return instance;
    } catch (IOException | ReflectiveOperationException | LinkageError e) {
      Throwable cause = e instanceof InvocationTargetException ? e.getCause() : e;
      throw new WorkerFailedException("sparkstate transport=embedded: cannot load Jep from " + jepDir + ": " + cause
          + ". Set " + ShimSettings.TRANSPORT + "=shm to run the stores in worker processes instead.", cause);
    }
  }

  private static File findJar(File dir) {
    File[] jars = dir.listFiles((d, name) -> name.startsWith("jep-") && name.endsWith(".jar"));
    return jars == null || jars.length == 0 ? null : jars[0];
  }

  private static JsonNode probe(String pythonExec, long timeoutMs) {
    Process process;
    try {
      process = new ProcessBuilder(pythonExec, "-c", PROBE).redirectErrorStream(true).start();
    } catch (IOException e) {
      throw new WorkerFailedException("sparkstate transport=embedded: cannot run the interpreter '" + pythonExec
          + "': " + e.getMessage() + ". Set " + ShimSettings.PYTHON_EXEC + " to a Python that has sparkstate and jep.", e);
    }
    try (InputStream in = process.getInputStream()) {
      ByteArrayOutputStream out = new ByteArrayOutputStream();
      in.transferTo(out);
      if (!process.waitFor(timeoutMs, TimeUnit.MILLISECONDS) || process.exitValue() != 0) {
        process.destroyForcibly();
        throw new WorkerFailedException("sparkstate transport=embedded: probing the interpreter '" + pythonExec
            + "' failed: " + out.toString(StandardCharsets.UTF_8));
      }
      String text = out.toString(StandardCharsets.UTF_8).trim();
      return Json.parse(text.substring(text.lastIndexOf('\n') + 1), "embedded probe");
    } catch (IOException e) {
      throw new WorkerFailedException("sparkstate transport=embedded: probing '" + pythonExec + "' failed: " + e, e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new WorkerFailedException("interrupted while probing the interpreter '" + pythonExec + "'", e);
    }
  }

  private Object newInterpreter() {
    try {
      Object interp = interpreterClass.getConstructor().newInstance();
      // invoke() resolves "a.b" as attribute b of global a, one level deep: hence the alias
      exec.invoke(interp, "import sparkstate.worker.embedded as " + ENTRY_MODULE);
      LOG.debug("sparkstate: embedded interpreter for thread {}", Thread.currentThread().getName());
      return interp;
    } catch (ReflectiveOperationException e) {
      Throwable cause = e instanceof InvocationTargetException ? e.getCause() : e;
      throw new WorkerFailedException("sparkstate transport=embedded: cannot create an interpreter for thread "
          + Thread.currentThread().getName() + ": " + cause, cause);
    }
  }

  @Override
  public Object invoke(String name, Object... args) {
    try {
      return invoke.invoke(interpreter.get(), name, args);
    } catch (InvocationTargetException e) {
      throw PythonRaisedException.from(e.getCause());
    } catch (IllegalAccessException e) {
      throw new IllegalStateException(e);
    }
  }

  @Override
  public Object callable(String expression) {
    try {
      return getValue.invoke(interpreter.get(), expression, pyCallableClass);
    } catch (InvocationTargetException e) {
      throw PythonRaisedException.from(e.getCause());
    } catch (IllegalAccessException e) {
      throw new IllegalStateException(e);
    }
  }

  @Override
  public Object call(Object callable, Object... args) {
    try {
      return call.invoke(callable, (Object) args);
    } catch (InvocationTargetException e) {
      throw PythonRaisedException.from(e.getCause());
    } catch (IllegalAccessException e) {
      throw new IllegalStateException(e);
    }
  }
}
