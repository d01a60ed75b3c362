"""Rewriting a stopped query's checkpoint outside the query: what `sparkstate rescale`, `sparkstate migrate`
and `sparkstate verify --rollback-to` share, and what the other tools need to know of their batches.

- `tool.py`: the tool doing the rewrite, for its messages and its error
- `stopped_query.py`: a checkpoint's path as the tools compare it; the refusal while a query runs on it
- `lock.py`: one rescale or migration of a checkpoint at a time
- `session.py`: the sparkstate settings and S3 keys of the Spark session that runs the rewrite
- `batch.py`: the batch a rescale or migration adds (its versions, the attempts it reads, its log entries)
- `file_sink.py`: a file sink's own log, kept in step with the batches a rewrite adds or removes
- `job_failure.py`: what a rewrite's failed Spark job says went wrong

Beside the layers like the tools that use it: it uses the layers, no layer uses it.
"""
