"""`sparkstate verify`: check every retained version of every store of a query, without Spark and without
changing anything, and say how to roll back when the newest committed version cannot be loaded.

A version is loadable when its manifest parses (header crc32 and length), names this store, lists a valid
chain (heap backend: at most one full snapshot, then deltas up to the version), and every file it lists is
present with the size and crc32 the manifest records. Each distinct file is read once, however many
versions list it.

Which version must load: Spark's commit log says batch B is the newest done, so every store of a
partition the query still has must load version B+1 (without a commit log: the newest manifest). Versions
beyond B+1 belong to a batch that was never recorded (re-run on restart, replacing them) or are strays;
they are listed, not judged. Partitions at or above the query's partition count (left by a rescale) are
listed as such.

Roll-back to version N (`rollback_plan`, `apply_rollback`): Spark re-runs batch N, which reads version N,
when its offset log ends at N and its commit log at N-1, with the provider and partition count batch N's
entry pins. N must therefore pin sparkstate (a batch between two `sparkstate migrate` runs pins another)
and the query's partition count (a roll-back does not undo a rescale, whose operator metadata it leaves).
The roll-back removes the commit log entries >= N, the offset log entries > N, every store's manifests of
versions > N (under checkpoint format v2 its attempt manifests too), and the entries >= N of the query's
file sinks' logs (a file sink skips a batch it has logged, and a skipped batch commits no state). Spark's logs go first: interrupted midway, the query
already restarts at N, and running the roll-back again finishes it.

A query whose newest offset log entry pins another provider (`sparkstate migrate` moved its state out)
is refused: its sparkstate stores are those from before the move, which the query no longer reads.

So is a query whose newest batch is an unfinished rescale or migration: its offset log entry pins
another partition count or provider than the batch before, and it has no commit log entry. Its stores
are between two layouts, and what the user needs is the command that finishes it (running the same
command again does; `unfinished.py`), not a verdict on stores or a roll-back.

Under checkpoint format v2 a version is the commit attempt Spark's commit log recorded, which need not be
the one `<v>.manifest` copies (checkpoint/recorded_attempts.py): that attempt is the one checked.
"""
from __future__ import annotations

import os
import re
import tempfile
from dataclasses import dataclass, field
from typing import Iterable

from ..checkpoint import CheckpointFileManager, Manifest
from ..checkpoint.file_manager import parse_manifest_name, version_ranges, versions_of
from ..checkpoint.location import discover_stores, query_key, state_root
from ..checkpoint.recorded_attempts import RecordedAttempts, read_recorded_manifest
from ..checkpoint.spark_logs import OffsetEntry, SparkLogs
from ..config import PROVIDER_CLASS, PROVIDER_CLASS_KEY
from ..engine import check_restorable
from ..errors import CheckpointError, SparkstateError
from ..rewrite.file_sink import file_sink_rollback_entries
from ..rewrite.tool import ROLLBACK
from ..storage import FileIO
from .unfinished import unfinished_rewrite

_STORE_RE = re.compile(r"^(\d+)/(\d+)(?:/(.+))?$")


@dataclass
class VersionCheck:
    version: int
    problems: list[str] = field(default_factory=list)

    @property
    def loadable(self) -> bool:
        return not self.problems


@dataclass
class StoreCheck:
    rel: str                          # `<op>/<part>[/<storeName>]` below the state root
    location: str                     # the store's location (above `sparkstate/`)
    manifests_dir: str
    versions: list[VersionCheck] = field(default_factory=list)
    needed: int | None = None         # the version the query loads next (B+1), None: nothing committed
    beyond: list[int] = field(default_factory=list)
    abandoned: bool = False           # a partition the query no longer has (left by a rescale)
    backend: str | None = None
    manifest_names: list[str] = field(default_factory=list)  # every manifest file (attempts too)

    def check_of(self, version: int) -> VersionCheck | None:
        return next((c for c in self.versions if c.version == version), None)

    @property
    def healthy(self) -> bool:
        """The version the query needs loads (or the store is one the query no longer uses)."""
        if self.abandoned or self.needed is None or self.needed == 0:
            return True
        check = self.check_of(self.needed)
        return check is not None and check.loadable

    def loadable_versions(self) -> list[int]:
        return [c.version for c in self.versions if c.loadable]


@dataclass
class VerifyReport:
    checkpoint: str
    root: str
    last_batch: int | None
    num_partitions: int | None
    offset_batches: list[int]
    commit_batches: list[int]
    stores: list[StoreCheck] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    # What the offset log entries pin: batches pinning another provider (between two `sparkstate migrate`
    # runs), and each batch's partition count. A roll-back goes to neither another provider's batch nor
    # across a rescale (Spark re-runs the batch with what its entry pins; a rescale also rewrote the
    # operators' metadata, which a roll-back leaves as it is).
    other_provider_batches: set[int] = field(default_factory=set)
    partitions_by_batch: dict[int, int | None] = field(default_factory=dict)

    @property
    def damaged(self) -> list[StoreCheck]:
        return [s for s in self.stores if not s.healthy]

    @property
    def ok(self) -> bool:
        return not self.damaged

    def rollback_targets(self) -> set[int]:
        """The versions N a roll-back can go to: every live store loads N, and Spark's offset log has batch N
        pinning sparkstate and the query's partition count (Spark re-runs batch N with what it pins)."""
        live = [s for s in self.stores if not s.abandoned]
        if not live or self.last_batch is None:
            return set()
        common = set.intersection(*(set(s.loadable_versions()) for s in live))
        return {n for n in common if n in set(self.offset_batches) and n <= self.last_batch + 1
                and n not in self.other_provider_batches
                and self.partitions_by_batch.get(n) in (None, self.num_partitions)}

    def rollback_target(self) -> int | None:
        """The newest version a roll-back can go to."""
        return max(self.rollback_targets(), default=None)


def verify_checkpoint(checkpoint: str, fileio: FileIO, state_fileio: FileIO,
                      state_location: str | None = None, scratch_dir: str | None = None) -> VerifyReport:
    """Check every store of the query at `checkpoint` (Spark's logs read with `fileio`, the stores with
    `state_fileio`). Reads only."""
    logs = SparkLogs(fileio, checkpoint)
    root = state_root(checkpoint, state_location)
    try:
        offsets, commits = logs.offset_batches(), logs.commit_batches()
        partitions = logs.read_offset(offsets[-1]).shuffle_partitions if offsets else None
    except (CheckpointError, OSError) as e:
        offsets, commits, partitions = [], [], None
        note = f"Spark's logs unreadable ({e}): the newest manifest of each store is taken as committed"
    else:
        note = None if commits else "no commit log entries: the newest manifest of each store is taken as committed"
    entries = _readable_entries(logs, offsets)
    unfinished = unfinished_rewrite(logs, offsets, commits, checkpoint)
    if unfinished:
        raise SparkstateError(unfinished)
    if offsets and offsets[-1] in entries:
        _refuse_another_providers_state(logs, entries[offsets[-1]], offsets, checkpoint, root)
    report = VerifyReport(checkpoint, root, commits[-1] if commits else None, partitions, offsets, commits)
    # an unreadable entry counts as another provider's: no roll-back goes to a batch whose provider is unknown
    report.other_provider_batches = {b for b in offsets
                                     if b not in entries or entries[b].conf.get(PROVIDER_CLASS_KEY)
                                     not in (None, PROVIDER_CLASS)}
    report.partitions_by_batch = {b: entry.shuffle_partitions for b, entry in entries.items()}
    if note:
        report.notes.append(note)
    expected_key = query_key(checkpoint) if state_location else None
    attempts = RecordedAttempts(logs, commits)
    with tempfile.TemporaryDirectory(prefix="sparkstate-verify-", dir=scratch_dir) as scratch:
        checked: dict[str, str | None] = {}  # remote name -> problem (None: intact), each file read once
        for rel in discover_stores(root, state_fileio):
            report.stores.append(_check_store(root, rel, state_fileio, report, expected_key, attempts, scratch,
                                              checked))
    if not report.stores:
        report.notes.append(f"no sparkstate store under {root}")
    return report


def _readable_entries(logs: SparkLogs, offsets: list[int]) -> dict[int, OffsetEntry]:
    """The offset log entries that can be read, by batch."""
    entries = {}
    for batch in offsets:
        try:
            entries[batch] = logs.read_offset(batch)
        except (CheckpointError, OSError):
            continue
    return entries


def _refuse_another_providers_state(logs: SparkLogs, newest: OffsetEntry, offsets: list[int], checkpoint: str,
                                    root: str) -> None:
    """Refuse a query whose newest batch pins another state store provider (`sparkstate migrate` moved its
    state out): sparkstate's stores there are those from before the move, which the query no longer reads,
    so judging them by Spark's commit log would call them damaged and offer a roll-back across the move."""
    pinned = newest.conf.get(PROVIDER_CLASS_KEY)
    if pinned is None or pinned == PROVIDER_CLASS:
        return
    since = ""
    for batch in reversed(offsets):
        try:
            if logs.is_migration_batch(batch):
                since = f" since batch {batch} (`sparkstate migrate`)"
                break
        except (CheckpointError, OSError):  # an unreadable older entry: the refusal stands without the batch
            continue
    raise SparkstateError(
        f"the query at {checkpoint} keeps its state with {pinned}{since}, not with sparkstate: its newest "
        f"offset log entry (batch {offsets[-1]}) pins that provider. sparkstate verify checks sparkstate's "
        f"stores only; those under {root}, if any, hold the state from before the move and the query does "
        "not read them. Spark's state data source reads the state it does: "
        "spark.read.format('statestore').load(<checkpoint>)")


def _check_store(root: str, rel: str, io: FileIO, report: VerifyReport, expected_key: str | None,
                 attempts: RecordedAttempts, scratch: str, checked: dict[str, str | None]) -> StoreCheck:
    location = io.join(root, rel) if rel else root
    fm = CheckpointFileManager(location, io)
    store = StoreCheck(rel, location, fm.manifests_dir)
    m = _STORE_RE.match(rel)
    place = (int(m.group(1)), int(m.group(2)), m.group(3) or "default") if m else None
    if place is not None and report.num_partitions is not None and place[1] >= report.num_partitions:
        store.abandoned = True
    try:
        store.manifest_names = io.list(fm.manifests_dir)
    except (CheckpointError, OSError) as e:
        store.versions.append(VersionCheck(-1, [f"manifests unreadable: {e}"]))
        return store
    versions = versions_of(store.manifest_names)
    limit = report.last_batch + 1 if report.last_batch is not None else None
    store.beyond = [v for v in versions if limit is not None and v > limit]
    versions = [v for v in versions if v not in store.beyond]
    store.needed = limit if limit is not None else (versions[-1] if versions else None)
    for v in versions:
        check = VersionCheck(v)
        store.versions.append(check)
        try:
            candidates = attempts.candidates(v, place[0], place[1]) if place is not None else None
            manifest = read_recorded_manifest(fm, v, candidates, store.manifest_names)
        except (CheckpointError, OSError) as e:
            check.problems.append(str(e))
            continue
        store.backend = manifest.backend  # the newest loadable version's: a migration can switch it
        path = fm.manifest_path(v, None if candidates is None else manifest.checkpoint_id)
        check.problems.extend(_identity_problems(manifest, place, expected_key, path))
        try:
            check_restorable(manifest, path)
        except CheckpointError as e:
            check.problems.append(str(e))
        check.problems.extend(_file_problems(fm, manifest, scratch, checked))
    if store.needed and store.check_of(store.needed) is None and not store.abandoned:
        store.versions.append(VersionCheck(store.needed, [
            f"version {store.needed} (committed by batch {store.needed - 1}) has no manifest at "
            f"{fm.manifest_path(store.needed)}"]))
    store.versions.sort(key=lambda c: c.version)
    return store


def _identity_problems(manifest: Manifest, place: tuple[int, int, str] | None, expected_key: str | None,
                       path: str) -> list[str]:
    ident = manifest.store
    if ident is None or place is None:
        return []
    if (ident.operator_id, ident.partition_id, ident.store_name) != place:
        return [f"{path} belongs to {ident.describe()}: moved or copied from another store"]
    if expected_key is not None and ident.query_key != expected_key:
        return [f"{path} belongs to query {ident.query_key}, not {expected_key}"]
    return []


def _file_problems(fm: CheckpointFileManager, manifest: Manifest, scratch: str,
                   checked: dict[str, str | None]) -> list[str]:
    problems = []
    for ref in manifest.files:
        if ref.remote not in checked:
            try:
                os.remove(fm.fetch_to_cache(ref, scratch, manifest.version))  # verifies size and crc32
                checked[ref.remote] = None
            except (CheckpointError, OSError) as e:
                checked[ref.remote] = str(e).split(". The file was damaged")[0]
        if checked[ref.remote] is not None:
            problems.append(checked[ref.remote])  # type: ignore[arg-type]
    return problems


# ---- report -------------------------------------------------------------------------------------------

def format_report(report: VerifyReport, command: str) -> str:
    lines = [f"checkpoint {report.checkpoint}, state at {report.root}"]
    if report.last_batch is not None:
        lines.append(f"Spark's commit log ends at batch {report.last_batch}: every store must load version "
                     f"{report.last_batch + 1}")
    lines.extend(report.notes)
    for s in report.stores:
        head = f"{s.rel or '.'} ({s.backend or 'unknown backend'})"
        bad = [c for c in s.versions if not c.loadable]
        good = s.loadable_versions()
        if s.abandoned:
            head += f": partition beyond the query's {report.num_partitions} (left by a rescale; `sparkstate gc` " \
                    "removes it once no retained batch needs it)"
        verdict = "OK" if s.healthy else f"DAMAGED: version {s.needed} cannot be loaded"
        lines.append(f"{head}: {verdict}; loadable versions: {version_ranges(good)}")
        for c in bad:
            for problem in c.problems:
                lines.append(f"  version {c.version}: {problem}")
        if s.beyond:
            lines.append(f"  versions beyond the commit log: {version_ranges(s.beyond)} (an unrecorded batch's, "
                         "replaced when it runs again, or strays `sparkstate gc` collects)")
    damaged = report.damaged
    if not damaged:
        lines.append(f"verdict: OK, {len(report.stores)} stores, the newest committed version of each loads")
        return "\n".join(lines)
    lines.append(f"verdict: DAMAGED, {len(damaged)} of {len(report.stores)} stores cannot load the newest "
                 "committed version")
    target = report.rollback_target()
    if target is None:
        lines.append("no version that every store can load is within Spark's retained logs: restore the "
                     "checkpoint from a backup, or start the query from a new checkpoint")
        return "\n".join(lines)
    lines.append(f"roll-back: every store loads version {target}. Stop the query, then remove:")
    lines.extend(f"  {path}" for path in rollback_plan(report, target))
    lines.append(f"and restart the query: it runs batch {target} again from version {target}. "
                 f"`{command} --rollback-to {target}` does this after asking; add --file-sink <output path> "
                 "for each file sink the query writes (their logs are rolled back too).")
    return "\n".join(lines)


def rollback_plan(report: VerifyReport, target: int, file_sinks: Iterable[tuple[FileIO, str]] = ()) -> list[str]:
    """The files a roll-back to version `target` removes, in order: Spark's commit log entries >= target,
    offset log entries > target (newest first), every store's manifests above `target`, then the entries
    >= target of each file sink's log (`(fileio, output path)`; refused when a compaction folded them)."""
    ckpt = report.checkpoint.rstrip("/")
    paths = [f"{ckpt}/commits/{b}" for b in sorted(report.commit_batches, reverse=True) if b >= target]
    paths += [f"{ckpt}/offsets/{b}" for b in sorted(report.offset_batches, reverse=True) if b > target]
    for s in report.stores:
        above = {c.version for c in s.versions if c.version > target} | set(s.beyond)
        names = [(p[0], p[1] is None, n) for n in s.manifest_names if (p := parse_manifest_name(n)) and p[0] in above]
        # newest version first; a version's attempt manifests (format v2) before its `<v>.manifest`
        paths += [f"{s.manifests_dir}/{n}" for _, _, n in sorted(names, key=lambda t: (-t[0], t[1], t[2]))]
    last = report.last_batch if report.last_batch is not None else -1
    for fio, sink in file_sinks:
        paths += file_sink_rollback_entries(fio, sink, target, last, ROLLBACK)
    return paths


def apply_rollback(report: VerifyReport, target: int, fileio: FileIO, state_fileio: FileIO,
                   file_sinks: Iterable[tuple[FileIO, str]] = ()) -> list[str]:
    """Remove what `rollback_plan` lists (and the checksum files Hadoop keeps beside Spark's log entries)."""
    if target not in report.rollback_targets():
        raise SparkstateError(f"cannot roll back to version {target}: not every store can load it, or Spark's "
                              f"offset log has no batch {target}")
    sinks = list(file_sinks)
    last = report.last_batch if report.last_batch is not None else -1
    sink_entries = {p: fio for fio, sink in sinks
                    for p in file_sink_rollback_entries(fio, sink, target, last, ROLLBACK)}
    removed = []
    for path in rollback_plan(report, target, sinks):
        io = sink_entries.get(path) or (state_fileio if path.endswith(".manifest") else fileio)
        siblings = [path]
        if not path.endswith(".manifest"):
            head, _, name = path.rpartition("/")
            siblings.append(f"{head}/.{name}.crc")
        io.delete_many(siblings)
        removed.append(path)
    return removed

