"""The store engine: lifecycle (Store) over pluggable backends (RocksDB now, heap later)."""
from .store import CommitResult, LoadResult, State, Store, StoreMetrics, StoreSpec

__all__ = ["Store", "StoreSpec", "LoadResult", "CommitResult", "StoreMetrics", "State"]
