package io.sparkstate;

/** A Python exception raised by a call into the embedded interpreter, with Jep's wrapping removed. */
final class PythonRaisedException extends RuntimeException {
  private PythonRaisedException(String message, Throwable cause) {
    super(message, cause);
  }

  static RuntimeException from(Throwable jepException) {
    if (jepException instanceof RuntimeException && !jepException.getClass().getName().startsWith("jep.")) {
      return (RuntimeException) jepException;
    }
    // Jep's message is "<class 'RuntimeError'>: the message"
    String msg = String.valueOf(jepException.getMessage());
    if (msg.startsWith("<class '")) {
      int end = msg.indexOf("'>: ");
      if (end > 0) {
        msg = msg.substring(end + 4);
      }
    }
    return new PythonRaisedException(msg, jepException);
  }
}
