"""What a rewrite reports of its failed Spark job: the innermost message, not Py4J's wrapping."""
from sparkstate.rewrite.job_failure import job_failure_message
from sparkstate.rewrite.tool import MIGRATION, RESCALE

PY4J = ("An error occurred while calling o45.collect.\n: org.apache.spark.SparkException: Job aborted due to stage "
        "failure: Task 0 failed: java.io.IOException: No space left on device\n\tat org.apache.Foo.bar(Foo.java:1)")


def test_the_innermost_message_without_the_stack_trace():
    assert job_failure_message(RuntimeError(PY4J), MIGRATION) == "No space left on device"
    assert job_failure_message(RuntimeError("RescaleError: boom\n\tat x"), RESCALE) == "boom"
    assert job_failure_message(RuntimeError("  plain text  "), RESCALE) == "plain text"
