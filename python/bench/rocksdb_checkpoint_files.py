"""What the bytes under a query checkpoint's `state/` are, by file kind: the RocksDB backend against
Spark's RocksDB provider.

    python python/bench/rocksdb_checkpoint_files.py /tmp/rb/checkpoints/sparkstate /tmp/rb/checkpoints/rocksdb-changelog
    python python/bench/rocksdb_checkpoint_files.py --per-version /tmp/rb/checkpoints/sparkstate

Each argument is a query checkpoint (aggregation.py --keep leaves them in <workdir>/checkpoints/<provider>).
Kinds of a sparkstate store (`<store>/sparkstate/`):
- `sst flush`: SST files a version uploaded that are on level 0 of that version's database (a flush's
  output); `sst compaction`: the ones on a lower level (a compaction's output). The level is read from
  the version's own RocksDB MANIFEST: the version's database is assembled from the checkpoint's files in
  a scratch directory and opened read-only.
- `change log`: the version's `delta-<v>.arrow`; `private files`: the pack of RocksDB's small files of an
  SST set; `manifest`: `manifests/<v>.manifest`; `unreferenced`: files under `files/` no manifest names.
A file counts for the first version whose manifest names it (an SST set written in maintenance is named
by the commit after the version it was written for).
Kinds of Spark's RocksDB provider: `changelog`, `zip` (a snapshot's metadata and small files), `sst`,
`crc` (Hadoop's checksum siblings) and `other` (`_metadata`, schema files). Per batch means the kind's
bytes over the batches committed (the highest version of a store); "retained" counts the files the last
`--retain` versions of every sparkstate store need (what cleanup at minBatchesToRetain keeps).
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from collections import defaultdict
from dataclasses import dataclass, field

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "provider"))

from sparkstate.checkpoint.manifest import Manifest, remote_version  # noqa: E402
from sparkstate.checkpoint.file_manager import parse_manifest_name  # noqa: E402
from sparkstate.engine import arrow_files as hf  # noqa: E402
from sparkstate.engine.rocksdb.private_files import PACK_NAME, unpack_private_files  # noqa: E402


@dataclass
class Tally:
    """Bytes and files per kind; `per_version[v][kind]` for the versions that wrote them."""
    bytes: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    files: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    per_version: dict[int, dict[str, int]] = field(default_factory=lambda: defaultdict(lambda: defaultdict(int)))
    per_version_files: dict[int, dict[str, int]] = field(
        default_factory=lambda: defaultdict(lambda: defaultdict(int)))
    versions: int = 0
    stores: int = 0
    retained: int = 0

    def add(self, kind: str, size: int, version: int | None = None) -> None:
        self.bytes[kind] += size
        self.files[kind] += 1
        if version is not None:
            self.per_version[version][kind] += size
            self.per_version_files[version][kind] += 1

    def through(self, last: int) -> "Tally":
        """The files of versions up to `last` only (files of no version are left out)."""
        out = Tally(versions=min(self.versions, last), stores=self.stores)
        for v, row in self.per_version.items():
            if v <= last:
                for kind, size in row.items():
                    out.bytes[kind] += size
                    out.files[kind] += self.per_version_files[v][kind]
                    out.per_version[v][kind] += size
                    out.per_version_files[v][kind] += self.per_version_files[v][kind]
        out.retained = sum(out.bytes.values())
        return out


def sst_levels(manifest: Manifest, files_dir: str, scratch: str) -> dict[str, int]:
    """Local SST name -> level in the version `manifest` describes (empty if the database cannot open)."""
    import rocksdict  # noqa: PLC0415

    db_dir = os.path.join(scratch, f"v{manifest.version}")
    os.makedirs(db_dir)
    try:
        for ref in manifest.shared_files:
            if ref.local.endswith(".sst"):
                os.link(os.path.join(files_dir, ref.remote), os.path.join(db_dir, ref.local))
            elif ref.local == PACK_NAME:
                unpack_private_files(os.path.join(files_dir, ref.remote), db_dir, ref.remote)
        for pf in manifest.private_files:
            with open(os.path.join(db_dir, pf.name), "wb") as f:
                f.write(pf.data)
        for name in os.listdir(db_dir):
            if name.endswith(".log") or name.startswith("LOG"):
                os.remove(os.path.join(db_dir, name))
        try:
            db = rocksdict.Rdict(db_dir, rocksdict.Options(raw_mode=True),
                                 access_type=rocksdict.AccessType.read_only())
        except Exception as e:  # noqa: BLE001 - reported, the kinds then say "sst ?"
            print(f"  cannot open version {manifest.version} read-only: {e}", file=sys.stderr)
            return {}
        try:
            return {f["name"].lstrip("/"): f["level"] for f in db.live_files()}
        finally:
            db.close()
    finally:
        shutil.rmtree(db_dir, ignore_errors=True)


def tally_sparkstate_store(root: str, tally: Tally, retain: int, scratch: str) -> None:
    """One store's `sparkstate/` directory."""
    manifests_dir, files_dir = os.path.join(root, "manifests"), os.path.join(root, "files")
    manifests: dict[int, Manifest] = {}
    for name in sorted(os.listdir(manifests_dir)):
        parsed = parse_manifest_name(name)
        path = os.path.join(manifests_dir, name)
        if parsed is None:
            tally.add("other", os.path.getsize(path))
            continue
        with open(path, "rb") as f:
            raw = f.read()
        tally.add("manifest", len(raw), parsed[0])
        if parsed[1] is None:
            manifests[parsed[0]] = Manifest.from_bytes(raw, path)
    referenced: set[str] = set()
    sizes = {name: os.path.getsize(os.path.join(files_dir, name)) for name in os.listdir(files_dir)}
    first = min(manifests, default=0) - 1  # an SST set of the version before the first is the first's
    for v in sorted(manifests):
        m = manifests[v]
        fresh = [ref for ref in m.shared_files
                 if ref.remote not in referenced and (remote_version(ref.remote) or 0) >= first]
        levels = sst_levels(m, files_dir, scratch) if any(r.local.endswith(".sst") for r in fresh) else {}
        for ref in fresh:
            if hf.parse_local_name(ref.local) is not None:
                kind = "change log"
            elif ref.local.endswith(".sst"):
                level = levels.get(ref.local)
                kind = "sst ?" if level is None else ("sst flush" if level == 0 else "sst compaction")
            elif ref.local == PACK_NAME:
                kind = "private files"
            else:
                kind = "other"
            tally.add(kind, sizes.get(ref.remote, ref.size), v)
        if m.change_log is not None and m.change_log.remote not in {r.remote for r in m.shared_files}:
            fresh.append(m.change_log)
            tally.add("change log", sizes.get(m.change_log.remote, m.change_log.size), v)
        referenced.update(r.remote for r in m.shared_files)
        if m.change_log is not None:
            referenced.add(m.change_log.remote)
    for name, size in sizes.items():
        if name not in referenced:
            tally.add("unreferenced", size)
    if manifests:
        head = max(manifests)
        kept = [manifests[v] for v in manifests if v > head - retain]
        needed: set[str] = set()
        for m in kept:
            needed.update(r.remote for r in m.shared_files)
            if m.change_log is not None:
                needed.add(m.change_log.remote)
        tally.retained += sum(sizes.get(r, 0) for r in needed)
        tally.retained += sum(os.path.getsize(os.path.join(manifests_dir, f"{m.version}.manifest")) for m in kept)
        tally.versions = max(tally.versions, head)
    tally.stores += 1


def spark_kind(name: str) -> str:
    if name.endswith(".crc"):
        return "crc"
    if name.endswith(".changelog"):
        return "changelog"
    if name.endswith(".zip"):
        return "zip"
    if name.endswith(".sst"):
        return "sst"
    if name.endswith(".delta") or name.endswith(".snapshot"):
        return name.rsplit(".", 1)[1]
    return "other"


def tally_checkpoint(checkpoint: str, retain: int) -> tuple[str, Tally]:
    """('sparkstate' | 'spark', tally) of a query checkpoint's `state/`."""
    state = os.path.join(checkpoint, "state")
    tally = Tally()
    sparkstate_roots = []
    for dirpath, dirnames, _ in os.walk(state):
        if os.path.basename(dirpath) == "sparkstate" and "manifests" in dirnames:
            sparkstate_roots.append(dirpath)
            dirnames.clear()
    if sparkstate_roots:
        scratch = tempfile.mkdtemp(prefix="rocksdb-ckpt-files-")
        try:
            for root in sorted(sparkstate_roots):
                tally_sparkstate_store(root, tally, retain, scratch)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        inside = tuple(os.path.join(r, "") for r in sparkstate_roots)
        for dirpath, _, names in os.walk(state):
            if not os.path.join(dirpath, "").startswith(inside):
                for n in names:
                    tally.add("other", os.path.getsize(os.path.join(dirpath, n)))
        return "sparkstate", tally
    for dirpath, _, names in os.walk(state):
        parent = os.path.dirname(dirpath) if os.path.basename(dirpath) == "SSTs" else dirpath
        first_listed = _sst_versions(parent, os.listdir(parent))
        for n in names:
            kind = spark_kind(n)
            version = first_listed.get(n) if kind == "sst" else _leading_version(n)
            tally.add(kind, os.path.getsize(os.path.join(dirpath, n)), version)
            if kind in ("changelog", "zip", "delta") and version is not None:
                tally.versions = max(tally.versions, version)
    tally.retained = sum(tally.bytes.values())
    return "spark", tally


def _leading_version(name: str) -> int | None:
    """v of `v.changelog`, `v.zip` and their `.v.changelog.crc` siblings."""
    head = name.lstrip(".").split(".")[0]
    return int(head) if head.isdigit() else None


def _sst_versions(store_dir: str, names: list[str]) -> dict[str, int]:
    """SST file name (in SSTs/) -> the first snapshot version whose zip lists it (Spark's `metadata`)."""
    import json  # noqa: PLC0415
    import zipfile  # noqa: PLC0415

    out: dict[str, int] = {}
    zips = sorted((v, n) for n in names if n.endswith(".zip") and (v := _leading_version(n)) is not None)
    for version, name in zips:
        try:
            with zipfile.ZipFile(os.path.join(store_dir, name)) as z:
                text = z.read("metadata").decode()
        except (OSError, KeyError, zipfile.BadZipFile):
            continue
        body = json.loads(text[text.index("{"):])
        for f in body.get("sstFiles", ()):
            out.setdefault(f["dfsSstFileName"], version)
    return out


def mib(n: float) -> str:
    return f"{n / (1 << 20):,.2f}"


def report(checkpoint: str, retain: int, per_version: bool, through: int | None = None) -> Tally:
    flavour, t = tally_checkpoint(checkpoint, retain)
    if through is not None:
        t = t.through(through)
    total = sum(t.bytes.values())
    batches = t.versions or 1
    print(f"\n{checkpoint} ({flavour}; {batches} batches{' counted' if through else ' committed'})\n")
    print("| kind | files | MiB | MiB per batch | share |")
    print("|---|---:|---:|---:|---:|")
    for kind in sorted(t.bytes, key=lambda k: -t.bytes[k]):
        print(f"| {kind} | {t.files[kind]:,} | {mib(t.bytes[kind])} | {mib(t.bytes[kind] / batches)} "
              f"| {t.bytes[kind] / total:.1%} |")
    print(f"| total | {sum(t.files.values()):,} | {mib(total)} | {mib(total / batches)} | |")
    if flavour == "sparkstate" and through is None:
        print(f"\nretained by the last {retain} versions of every store: {mib(t.retained)} MiB")
    if per_version and t.per_version:
        kinds = sorted({k for row in t.per_version.values() for k in row})
        print("\n| version | " + " | ".join(f"{k} MiB" for k in kinds) + " |")
        print("|---:|" + "---:|" * len(kinds))
        for v in sorted(t.per_version):
            print(f"| {v} | " + " | ".join(mib(t.per_version[v].get(k, 0)) for k in kinds) + " |")
    return t


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("checkpoints", nargs="+", help="query checkpoint directories")
    p.add_argument("--retain", type=int, default=100, help="minBatchesToRetain for the retained figure")
    p.add_argument("--per-version", action="store_true", help="also the bytes each version wrote, by kind")
    p.add_argument("--through", type=int, help="count only the files of versions up to this one (a run that is "
                   "still going, or runs of different lengths)")
    args = p.parse_args(argv)
    totals = [(c, report(c, args.retain, args.per_version, args.through)) for c in args.checkpoints]
    if len(totals) > 1:
        base = sum(totals[-1][1].bytes.values())
        for c, t in totals[:-1]:
            print(f"\n{c} ÷ {totals[-1][0]}: {sum(t.bytes.values()) / base:.2f}x bytes under state/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
