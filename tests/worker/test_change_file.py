"""The change feed's hand-over file: every record, in order, in the layout ChangeFileReader.java reads."""
from __future__ import annotations

import os
import struct

from sparkstate.engine import VersionChanges
from sparkstate.worker.change_file import write_change_file


def _read(path: str) -> list[tuple[int, bytes, bytes | None]]:
    out = []
    with open(path, "rb") as f:
        data = f.read()
    pos = 0
    while pos < len(data):
        version, key_len = struct.unpack_from(">qi", data, pos)
        pos += 12
        key = data[pos:pos + key_len]
        pos += key_len
        (value_len,) = struct.unpack_from(">i", data, pos)
        pos += 4
        value = None if value_len < 0 else data[pos:pos + value_len]
        pos += max(value_len, 0)
        out.append((version, key, value))
    return out


def test_records_round_trip_in_order(tmp_path):
    changes = [VersionChanges(3, [(b"\x00\x00\x00\x01k1", b"v1"), (b"\x00\x00\x00\x02k2", None)]),
               VersionChanges(4, []),
               VersionChanges(5, [(b"\x00\x00\x00\x01k1", b""), (b"\x00\x00\x00\x03k3", b"x" * 70000)])]
    path, rows = write_change_file(changes, str(tmp_path / "scratch"))
    assert rows == 4 and os.path.dirname(path) == str(tmp_path / "scratch")
    assert _read(path) == [(3, b"\x00\x00\x00\x01k1", b"v1"), (3, b"\x00\x00\x00\x02k2", None),
                           (5, b"\x00\x00\x00\x01k1", b""), (5, b"\x00\x00\x00\x03k3", b"x" * 70000)]


def test_a_failed_read_leaves_no_file(tmp_path):
    def failing():
        yield VersionChanges(1, [(b"k", b"v")])
        raise OSError("the change log could not be read")

    scratch = tmp_path / "scratch"
    try:
        write_change_file(failing(), str(scratch))
    except OSError:
        pass
    else:
        raise AssertionError("the error was swallowed")
    assert os.listdir(scratch) == []
