"""The RocksDB backend (rocksdict): state in a local database, incremental SST checkpoints."""
