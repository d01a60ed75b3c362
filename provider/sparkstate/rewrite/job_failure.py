"""What a rewrite's failed Spark job says went wrong, out of the text of a Py4J or Spark failure."""
from __future__ import annotations

from .tool import RewriteTool


def job_failure_message(error: BaseException, tool: RewriteTool) -> str:
    """The innermost error's message: the text after the first of the tool's error, a Java IOException or any
    Java exception it names, up to the JVM's stack trace (at most 1500 characters)."""
    text = str(error)
    for marker in (f"{tool.error.__name__}: ", "IOException: ", "Exception: "):
        if marker in text:
            text = text[text.index(marker) + len(marker):]
            break
    return text.strip().split("\n\tat ")[0][:1500]
