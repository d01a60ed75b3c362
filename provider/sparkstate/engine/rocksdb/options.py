"""RocksDB options of a store: raw byte keys, bloom filter, per-store memtable, the worker's shared block
cache (block_cache.py), compression (the last level's apart), SST file and level sizes, the level-0
compaction trigger, reads through memory maps, and the memtable (a hash table of linked lists for a store
that only gets and puts, a sorted skip list for one that scans).

WAL off is set per write (see backend.py): durability comes from checkpoints, not the WAL.
"""
from __future__ import annotations

import rocksdict

from ...config import Settings

# RocksDB appends a few hundred bytes to its MANIFEST on every flush/compaction and only rolls it (into a
# fresh file holding just the live files) past this size. The whole file is in the private files of every
# SST set a checkpoint writes (private_files.py): a 1 MiB roll size would let every SST set carry up to
# 1 MiB of it whatever its state size. Rolling is cheap.
MAX_ROCKSDB_MANIFEST_BYTES = 32 << 10
# RocksDB's info LOG gains a few KB per commit (flush and checkpoint lines) for as long as the store is
# open; rolled at this size and keeping INFO_LOG_FILES old files, a store's logs stay under 1 MiB.
MAX_INFO_LOG_BYTES = 256 << 10
INFO_LOG_FILES = 2
# Level-0 files beyond the compaction trigger at which RocksDB slows, then stops writes (its own defaults
# are 20 and 36 files, 16 and 32 beyond its default trigger of 4).
L0_SLOWDOWN_BEYOND_TRIGGER = 16
L0_STOP_BEYOND_TRIGGER = 32
_COMPRESSION = {
    "lz4": rocksdict.DBCompressionType.lz4,
    "zstd": rocksdict.DBCompressionType.zstd,
    "snappy": rocksdict.DBCompressionType.snappy,
    "none": rocksdict.DBCompressionType.none,
}
# Hash memtable: one bucket per this many bytes of write buffer (262,144 buckets of 8 bytes for 64 MiB).
# Its entries take about 105 bytes each, so most buckets hold one key and its versions, in a sorted linked
# list (RocksDB turns a bucket of over 256 entries into a skip list).
WRITE_BUFFER_BYTES_PER_BUCKET = 256


def make_options(settings: Settings, block_cache: rocksdict.Cache | None,
                 point_memtable: bool = False, compactions: bool = True) -> rocksdict.Options:
    """Options for a database of a store; `block_cache` None turns RocksDB's block cache off.

    `point_memtable`: a hash memtable, for a store that will not scan. A get or put finds its key's bucket
    by hashing the whole key (the no-op prefix extractor) instead of descending a skip list of every entry
    of many batches; an iterator must then ask for total order, and creating one sorts the memtable.

    `compactions` False: no automatic compaction until `resume_compactions`. Level-0 files then never slow
    or stop writes either (RocksDB's write stalls wait for compactions, so it applies them only while
    automatic compactions run)."""
    opt = rocksdict.Options(raw_mode=True)
    opt.create_if_missing(True)
    opt.set_disable_auto_compactions(not compactions)
    opt.set_write_buffer_size(settings.rocksdb_write_buffer_mb << 20)
    if point_memtable:
        opt.set_prefix_extractor(rocksdict.SliceTransform.create_noop())
        buckets = (settings.rocksdb_write_buffer_mb << 20) // WRITE_BUFFER_BYTES_PER_BUCKET
        opt.set_memtable_factory(rocksdict.MemtableFactory.hash_link_list(bucket_count=buckets))
        opt.set_allow_concurrent_memtable_write(False)  # the hash memtable takes one writer at a time
    opt.set_target_file_size_base(settings.rocksdb_target_file_mb << 20)
    opt.set_max_bytes_for_level_base(settings.rocksdb_level_base_mb << 20)
    opt.set_compression_type(_COMPRESSION[settings.rocksdb_compression]())
    if settings.rocksdb_bottommost_compression != "same":
        opt.set_bottommost_compression_type(_COMPRESSION[settings.rocksdb_bottommost_compression]())
    trigger = settings.rocksdb_level0_trigger
    opt.set_level_zero_file_num_compaction_trigger(trigger)
    opt.set_level_zero_slowdown_writes_trigger(trigger + L0_SLOWDOWN_BEYOND_TRIGGER)
    opt.set_level_zero_stop_writes_trigger(trigger + L0_STOP_BEYOND_TRIGGER)
    opt.set_max_manifest_file_size(MAX_ROCKSDB_MANIFEST_BYTES)
    opt.set_max_log_file_size(MAX_INFO_LOG_BYTES)
    opt.set_keep_log_file_num(INFO_LOG_FILES)
    # Uncompressed blocks of a mapped file are read in place: no pread, copy or block cache insert per miss.
    opt.set_allow_mmap_reads(settings.rocksdb_mmap_reads)
    table = rocksdict.BlockBasedOptions()
    table.set_block_size(settings.rocksdb_block_size_kb << 10)
    if settings.rocksdb_bloom_bits > 0:
        table.set_bloom_filter(settings.rocksdb_bloom_bits, False)
    if block_cache is not None:
        table.set_block_cache(block_cache)
    else:
        table.disable_cache()
    opt.set_block_based_table_factory(table)
    return opt


def resume_compactions(db: rocksdict.Rdict) -> None:
    """Start automatic compactions of a database opened with `compactions=False`."""
    db.set_options({"disable_auto_compactions": "false"})
