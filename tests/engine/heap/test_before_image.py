"""BeforeImage: the log and dict forms answer alike (first value wins), through seals, compaction and merges."""
import random

import pytest

from sparkstate.engine.heap import before_image
from sparkstate.engine.heap.before_image import ABSENT, LOG_CHUNK_ROWS, BeforeImage


def random_writes(rnd: random.Random, n: int, keys: int) -> list[tuple[bytes, bytes | None]]:
    """(key, old value or None) pairs, with keys written many times."""
    return [(b"k%05d" % rnd.randrange(keys), None if rnd.random() < 0.3 else rnd.randbytes(rnd.randrange(1, 12)))
            for _ in range(n)]


def model(writes) -> dict:
    out: dict = {}
    for k, old in writes:
        out.setdefault(k, ABSENT if old is None else old)
    return out


def record(image: BeforeImage, writes, step: int = 1000) -> None:
    for i in range(0, len(writes), step):
        part = writes[i:i + step]
        image.record([k for k, _ in part], [o for _, o in part])


@pytest.mark.parametrize("lookups", [False, True], ids=["log", "dict"])
def test_first_value_of_each_key_wins(lookups):
    rnd = random.Random(1)
    writes = random_writes(rnd, 3 * LOG_CHUNK_ROWS + 17, keys=5_000)
    image = BeforeImage(lookups)
    record(image, writes)
    image.seal()
    expected = model(writes)
    assert image.first_values() == expected
    assert {k: image.get(k, "unwritten") for k in expected} == expected
    assert image.get(b"never", "unwritten") == "unwritten"


def test_undoing_newest_first_leaves_each_key_at_its_first_value():
    rnd = random.Random(2)
    writes = random_writes(rnd, 2 * LOG_CHUNK_ROWS, keys=300)
    image = BeforeImage()
    record(image, writes, step=777)
    state: dict = {}
    for k, old in image.newest_first():
        state[k] = old
    assert state == model(writes)


def test_a_log_compacts_repeated_keys_and_keeps_first_values():
    rnd = random.Random(3)
    writes = random_writes(rnd, 10 * LOG_CHUNK_ROWS, keys=1_000)
    image = BeforeImage()
    record(image, writes)
    image.seal()
    assert len(image) <= 4 * LOG_CHUNK_ROWS + 1_000  # compacted as it grew, not 10 * LOG_CHUNK_ROWS rows
    assert image.first_values() == model(writes)


def test_pending_entries_stay_bounded_and_seal_turns_them_into_columns():
    image = BeforeImage()
    for i in range(3 * LOG_CHUNK_ROWS):
        image.record([b"k%06d" % i], [None])
        assert len(image._keys) < LOG_CHUNK_ROWS
    image.seal()
    assert not image._keys and image.is_log and len(image) == 3 * LOG_CHUNK_ROWS


@pytest.mark.parametrize("older_lookups", [False, True], ids=["older-log", "older-dict"])
@pytest.mark.parametrize("newer_lookups", [False, True], ids=["newer-log", "newer-dict"])
def test_absorbing_a_newer_image_keeps_the_older_values(older_lookups, newer_lookups):
    rnd = random.Random(4)
    first, second = random_writes(rnd, 500, keys=400), random_writes(rnd, 500, keys=400)
    older, newer = BeforeImage(older_lookups), BeforeImage(newer_lookups)
    record(older, first)
    record(newer, second)
    older.absorb_newer(newer)
    assert older.first_values() == model(first + second)
    assert not newer
    state: dict = {}
    for k, old in older.newest_first():
        state[k] = old
    assert state == model(first + second)


def test_a_point_read_turns_a_log_into_a_dict_for_good():
    image = BeforeImage()
    image.record([b"a", b"b", b"a"], [b"1", None, b"2"])
    assert image.is_log and image.get(b"a") == b"1" and image.get(b"b") is ABSENT
    assert not image.is_log
    image.record([b"a", b"c"], [b"3", b"4"])  # later writes keep the first value
    assert image.first_values() == {b"a": b"1", b"b": ABSENT, b"c": b"4"}


def test_a_sealed_log_costs_its_bytes_not_python_objects():
    image = BeforeImage()
    keys = [b"%026d" % i for i in range(LOG_CHUNK_ROWS)]
    image.record(keys, [b"v" * 16] * len(keys))
    image.seal()
    per_entry = image.memory_bytes() / len(keys)
    assert 26 + 16 <= per_entry <= 26 + 16 + 10 + before_image._CHUNK_OVERHEAD / len(keys)
