"""The tools that rewrite a checkpoint, as the shared code names them in messages and errors.

The code rescale, migrate and roll-back share raises each tool's own error with each tool's own words
("another rescale holds the lock", "appeared while migrating"), so no tool rewords another's message.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..errors import MigrationError, RescaleError, SparkCheckpointError, SparkstateError


@dataclass(frozen=True)
class RewriteTool:
    noun: str                     # "rescale": "the rescale's batch", "re-run the rescale"
    gerund: str                   # "rescaling": "stop it before rescaling its state"
    error: type[SparkstateError]  # what the tool raises: RescaleError
    untouched: str                # what a refusal before its first switch leaves: "nothing was published"


RESCALE = RewriteTool("rescale", "rescaling", RescaleError, "nothing was published")
MIGRATION = RewriteTool("migration", "migrating", MigrationError, "nothing was switched")
# `sparkstate verify --rollback-to`: a file sink log it cannot roll back is one of Spark's files in a shape
# sparkstate does not handle, as its other refusals are
ROLLBACK = RewriteTool("roll-back", "rolling back", SparkCheckpointError, "nothing was removed")
