"""The lock that keeps a second rescale or migration off a checkpoint one is rewriting."""
from __future__ import annotations

import json
import os

import pytest

from sparkstate.errors import MigrationError, RescaleError
from sparkstate.rewrite.lock import RewriteLock
from sparkstate.rewrite.tool import MIGRATION, RESCALE
from sparkstate.storage import fileio_for


def test_second_rescale_is_refused_while_one_holds_the_lock(tmp_path):
    fio = fileio_for(str(tmp_path))
    first = RewriteLock(fio, str(tmp_path), RESCALE)
    first.acquire("rescale to 7 partitions")
    with pytest.raises(RescaleError, match="another rescale"):
        RewriteLock(fio, str(tmp_path), RESCALE).acquire("rescale to 5 partitions")
    with pytest.raises(MigrationError, match="another rescale to 7 partitions"):  # the refused tool's error
        RewriteLock(fio, str(tmp_path), MIGRATION).acquire("migration to hdfs")
    first.release()
    # a lock left by a dead process is taken over
    path = os.path.join(str(tmp_path), "sparkstate-rescale", "lock")
    with open(path, "w") as f:
        json.dump({"pid": 2**22 + 12345, "host": os.uname().nodename, "partitions": 3}, f)
    again = RewriteLock(fio, str(tmp_path), RESCALE)
    again.acquire("rescale to 5 partitions")
    again.release()
    assert not os.path.exists(path)
