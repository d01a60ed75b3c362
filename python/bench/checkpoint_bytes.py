"""Where a checkpoint's state bytes go: per file kind, per version, and inside sparkstate's Arrow files.

    python python/bench/checkpoint_bytes.py /tmp/hb/checkpoints/heap /tmp/hb/checkpoints/hdfs
    python python/bench/checkpoint_bytes.py --json out.json <checkpoint or state dir>...

For each directory (a query checkpoint, its `state/` or one store's directory) it prints:

- per file kind (sparkstate: Arrow delta, Arrow full snapshot, SST, manifest; Spark's HDFS provider:
  delta, snapshot; Spark's RocksDB provider: zip, changelog, SST; Hadoop `.crc` files; `_metadata`):
  files, bytes retained, and the median over versions of the bytes a version added (summed over the
  stores: what one batch wrote, for the kinds written every batch);
- for sparkstate's Arrow files, per column: bytes as stored (compressed) and raw (uncompressed IPC body),
  found by re-encoding each column alone with the file's codec (Arrow compresses every buffer on its
  own, so the sizes are exact up to padding), and the rows they hold;
- for the HDFS provider's delta and snapshot files (LZ4 block streams of (key size, key, value size,
  value) records): their raw bytes and rows.

Byte counts do not depend on machine load. No Spark needed: this reads files only.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import struct
import sys
from collections import defaultdict

import pyarrow as pa

_SPARKSTATE_FILE = re.compile(r"^(\d+)-[0-9a-f]+-(.+)$")
_VERSIONED = re.compile(r"^(\d+)\.(delta|snapshot|zip|changelog|manifest)$")
_CODECS = ("lz4", "zstd", None)


def classify(rel: str) -> tuple[str, int | None]:
    """(kind, version) of a file by its path relative to the scanned directory."""
    parts = rel.split(os.sep)
    name = parts[-1]
    if name.endswith(".crc"):
        return "crc", None
    if "_metadata" in parts or name == "metadata":
        return "metadata", None
    if "sparkstate" in parts:
        m = _SPARKSTATE_FILE.match(name)
        if "files" in parts and m:
            v, local = int(m.group(1)), m.group(2)
            if local.startswith("delta-") and local.endswith(".arrow"):
                return "sparkstate arrow delta", v
            if local.startswith("full-") and local.endswith(".arrow"):
                return "sparkstate arrow full", v
            if local.endswith(".sst"):
                return "sparkstate sst", v
            return "sparkstate other file", v
        if "manifests" in parts:
            m = _VERSIONED.match(name)
            return ("sparkstate manifest", int(m.group(1))) if m else ("sparkstate superseded manifest", None)
        return "sparkstate other", None
    m = _VERSIONED.match(name)
    if m:
        return {"delta": "hdfs delta", "snapshot": "hdfs snapshot", "zip": "spark-rocksdb zip",
                "changelog": "spark-rocksdb changelog"}[m.group(2)], int(m.group(1))
    if name.endswith(".sst"):
        return "spark-rocksdb sst", None
    return "other", None


# ---- Arrow files ---------------------------------------------------------------------------------

def _body_sizes(path: str) -> list[int]:
    """Body length of every record batch message of an IPC stream or file, in order."""
    with open(path, "rb") as f:
        data = f.read()
    start = 8 if data[:6] == b"ARROW1" else 0
    reader = pa.ipc.MessageReader.open_stream(pa.BufferReader(pa.py_buffer(data[start:])))
    sizes = []
    while True:
        try:
            msg = reader.read_next_message()
        except StopIteration:
            break
        if msg is None:
            break
        if msg.type == "record batch":
            sizes.append(msg.body.size if msg.body is not None else 0)
    return sizes


def _encoded_body(batch: pa.RecordBatch, codec) -> int:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, batch.schema, options=pa.ipc.IpcWriteOptions(compression=codec)) as w:
        w.write_batch(batch)
    reader = pa.ipc.MessageReader.open_stream(pa.BufferReader(sink.getvalue()))
    reader.read_next_message()  # schema
    return reader.read_next_message().body.size


def arrow_columns(path: str) -> dict:
    """{"codec", "rows", "batches", "columns": {name: [stored, raw]}, "format"} of one Arrow state file."""
    with open(path, "rb") as f:
        is_file = f.read(6) == b"ARROW1"
    src = pa.memory_map(path, "r")
    if is_file:
        r = pa.ipc.open_file(src)
        schema, batches = r.schema, [r.get_batch(i) for i in range(r.num_record_batches)]
    else:
        r = pa.ipc.open_stream(src)
        schema, batches = r.schema, list(r)
    meta = {k.decode(): v.decode() for k, v in (schema.metadata or {}).items()}
    blocks = meta.get("sparkstate.formatVersion") == "3"  # one Arrow row per block (arrow_files.py)
    sizes = _body_sizes(path)
    codec = None
    if batches:
        codec = next((c for c in _CODECS if _encoded_body(batches[0], c) == sizes[0]), "unknown")
    cols: dict[str, list[int]] = {name: [0, 0] for name in schema.names}
    rows = 0
    for b in batches:
        rows += int(b.column(0)[0].as_py()) if blocks else b.num_rows
        for i, name in enumerate(schema.names):
            one = pa.RecordBatch.from_arrays([b.column(i)], names=[name])
            cols[name][0] += _encoded_body(one, None if codec == "unknown" else codec)
            cols[name][1] += _encoded_body(one, None)
    return {"codec": codec, "rows": rows, "batches": len(batches), "columns": cols,
            "format": f"{meta.get('sparkstate.format')} v{meta.get('sparkstate.formatVersion')}",
            "framing": os.path.getsize(path) - sum(sizes)}


# ---- Spark HDFS provider files --------------------------------------------------------------------

def hdfs_rows(path: str) -> tuple[int, int]:
    """(raw bytes, rows) of an HDFS provider delta or snapshot: LZ4 block stream (lz4-java's
    LZ4BlockOutputStream: "LZ4Block", token, compressed length, raw length, checksum, block) of
    (int key size, key, int value size, value) records, ended by -1. Other codecs: (0, 0)."""
    with open(path, "rb") as f:
        data = f.read()
    raw = bytearray()
    pos = 0
    lz4 = pa.Codec("lz4_raw")
    while pos + 21 <= len(data) and data[pos:pos + 8] == b"LZ4Block":
        token = data[pos + 8]
        clen, rlen = struct.unpack_from("<ii", data, pos + 9)
        block = data[pos + 21:pos + 21 + clen]
        pos += 21 + clen
        if rlen == 0:
            break
        raw += block if token & 0xF0 == 0x10 else lz4.decompress(block, decompressed_size=rlen).to_pybytes()
    rows = i = 0
    while i + 4 <= len(raw):
        (ks,) = struct.unpack_from(">i", raw, i)
        if ks < 0:
            break
        (vs,) = struct.unpack_from(">i", raw, i + 4 + ks)
        i += 8 + ks + max(vs, 0)
        rows += 1
    return len(raw), rows


# ---- report --------------------------------------------------------------------------------------

def scan(root: str, detail: bool = True) -> dict:
    kinds: dict[str, dict] = defaultdict(lambda: {"files": 0, "bytes": 0, "per_version": defaultdict(int),
                                                  "rows": 0, "raw": 0, "columns": {}, "codecs": set(),
                                                  "formats": set(), "framing": 0})
    for dirpath, _, names in os.walk(root):
        for name in names:
            path = os.path.join(dirpath, name)
            try:
                size = os.path.getsize(path)
            except OSError:
                continue
            kind, version = classify(os.path.relpath(path, root))
            k = kinds[kind]
            k["files"] += 1
            k["bytes"] += size
            if version is not None:
                k["per_version"][version] += size
            if not detail:
                continue
            if kind.startswith("sparkstate arrow"):
                a = arrow_columns(path)
                k["rows"] += a["rows"]
                k["codecs"].add(str(a["codec"]))
                k["formats"].add(a["format"])
                k["framing"] += a["framing"]
                for col, (stored, raw) in a["columns"].items():
                    c = k["columns"].setdefault(col, [0, 0])
                    c[0] += stored
                    c[1] += raw
            elif kind in ("hdfs delta", "hdfs snapshot"):
                raw, rows = hdfs_rows(path)
                k["raw"] += raw
                k["rows"] += rows
    out = {}
    for kind, k in sorted(kinds.items()):
        pv = sorted(k["per_version"].values())
        out[kind] = {"files": k["files"], "bytes": k["bytes"], "versions": len(pv),
                     "median_bytes_per_version": statistics.median(pv) if pv else None,
                     "rows": k["rows"], "raw": k["raw"], "columns": k["columns"],
                     "codecs": sorted(k["codecs"]), "formats": sorted(k["formats"]), "framing": k["framing"]}
    return out


def _mb(n: float | None) -> str:
    return "-" if n is None else f"{n / 1e6:.2f} MB"


def render(root: str, kinds: dict) -> str:
    total = sum(k["bytes"] for k in kinds.values())
    lines = [f"## {root}: {_mb(total)} in {sum(k['files'] for k in kinds.values())} files", "",
             "| kind | files | bytes | versions | median per version | rows | bytes/row |",
             "|---|---|---|---|---|---|---|"]
    for kind, k in kinds.items():
        per_row = f"{k['bytes'] / k['rows']:.1f}" if k["rows"] else "-"
        lines.append(f"| {kind} | {k['files']} | {_mb(k['bytes'])} | {k['versions']} | "
                     f"{_mb(k['median_bytes_per_version'])} | {k['rows'] or '-'} | {per_row} |")
    for kind, k in kinds.items():
        if k["columns"]:
            lines += ["", f"{kind} ({', '.join(k['formats'])}; codec {', '.join(k['codecs'])}; "
                          f"IPC framing {_mb(k['framing'])}):", "",
                      "| column | stored | raw | stored/row |", "|---|---|---|---|"]
            for col, (stored, raw) in k["columns"].items():
                per_row = f"{stored / k['rows']:.2f}" if k["rows"] else "-"
                lines.append(f"| {col} | {_mb(stored)} | {_mb(raw)} | {per_row} |")
        elif k["raw"]:
            lines += ["", f"{kind}: raw {_mb(k['raw'])} (LZ4 block stream), {k['bytes'] / k['raw']:.2f} of raw"]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("dirs", nargs="+", help="checkpoint, state/ or store directories")
    p.add_argument("--no-detail", action="store_true", help="sizes only: do not open the files")
    p.add_argument("--json", help="write the figures to this file")
    args = p.parse_args(argv)
    results = {}
    for d in args.dirs:
        state = os.path.join(d, "state")
        root = state if os.path.isdir(state) else d
        results[d] = scan(root, detail=not args.no_detail)
        print(render(root, results[d]) + "\n")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(results, fh, indent=1, sort_keys=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
