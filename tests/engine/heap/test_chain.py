"""Chain.rebased: a background full snapshot replaces a prefix of a chain, and only a prefix."""
from sparkstate.checkpoint import SharedFileRef
from sparkstate.engine.heap.chain import Chain


def ref(kind: str, version: int, attempt: str = "a") -> SharedFileRef:
    return SharedFileRef(remote=f"{version}-{attempt}-{kind}-{version}.arrow", local=f"{kind}-{version}.arrow",
                         size=1, crc32=0)


def names(chain: Chain) -> frozenset[str]:
    return chain.remote_names()


def test_a_snapshot_of_a_prefix_replaces_exactly_that_prefix():
    d1, d2, d3 = ref("delta", 1), ref("delta", 2), ref("delta", 3)
    at_2 = Chain().with_delta(1, d1).with_delta(2, d2)
    at_3 = at_2.with_delta(3, d3)
    full = ref("full", 2)
    assert at_3.rebased(3, 2, full, names(at_2)) == Chain(full, 2, ((3, d3),))
    assert at_2.rebased(2, 2, full, names(at_2)) == Chain(full, 2, ())


def test_a_snapshot_newer_than_the_chain_is_refused():
    # version 2 was snapshotted, then the store went back to version 1 (a retried batch): a chain of
    # version 1 whose next delta is a new version 2 cannot start from the snapshot of the old one
    d1 = ref("delta", 1)
    at_1 = Chain().with_delta(1, d1)
    assert at_1.rebased(1, 2, ref("full", 2), names(at_1)) is None


def test_a_version_committed_again_is_not_replaced_by_a_snapshot_of_the_first_attempt():
    d1, old_d2, new_d2, d3 = ref("delta", 1), ref("delta", 2, "old"), ref("delta", 2, "new"), ref("delta", 3)
    old_at_2 = Chain().with_delta(1, d1).with_delta(2, old_d2)
    new_at_3 = Chain().with_delta(1, d1).with_delta(2, new_d2).with_delta(3, d3)
    assert new_at_3.rebased(3, 2, ref("full", 2), names(old_at_2)) is None  # not a prefix
    nothing_at_2 = Chain().with_delta(1, d1)  # old version 2 changed nothing: its chain is version 1's
    assert new_at_3.rebased(3, 2, ref("full", 2), names(nothing_at_2)) is None  # new delta 2 would be dropped


def test_a_chain_whose_own_full_snapshot_is_not_replaced_is_refused():
    f4, d5 = ref("full", 4), ref("delta", 5)
    at_5 = Chain(f4, 4, ((5, d5),))
    assert at_5.rebased(5, 5, ref("full", 5), frozenset({d5.remote})) is None
