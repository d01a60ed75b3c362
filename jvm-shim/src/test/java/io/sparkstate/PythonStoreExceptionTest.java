package io.sparkstate;

import static io.sparkstate.ShimTests.equal;

public final class PythonStoreExceptionTest {
  public static void testAReportedPythonErrorIsOneLineWithoutTheTraceback() {
    String py4j = "An exception was raised by the Python Proxy. Return Message: Traceback (most recent call "
        + "last):\n  File \"/venv/lib/python3.11/site-packages/py4j/clientserver.py\", line 617, in _call_proxy\n"
        + "    return_value = getattr(self.pool[obj_id], method)(*params)\n"
        + "RuntimeError: ConfigError: invalid value 'foo' for 'spark.sql.streaming.stateStore.sparkstate.backend': "
        + "expected rocksdb, heap\n";
    equal("ConfigError: invalid value 'foo' for 'spark.sql.streaming.stateStore.sparkstate.backend': "
        + "expected rocksdb, heap", PythonStoreException.reportedError(py4j), "the reported error");
  }

  public static void testOtherFailuresKeepTheirWholeText() {
    equal(null, PythonStoreException.reportedError("Error while sending or receiving"), "a network error");
    equal(null, PythonStoreException.reportedError(null), "no message");
    equal(null, PythonStoreException.reportedError("Return Message: Traceback ...\nKeyError: 3"),
        "an error the worker did not report itself");
  }
}
