"""The store engine: the lifecycle of one store (Store) over a backend (RocksDB or heap)."""
from .backend_registry import check_restorable
from .change_feed import VersionChanges
from .spec import StoreSpec
from .store import CommitResult, LoadResult, State, Store, StoreMetrics

__all__ = ["Store", "StoreSpec", "LoadResult", "CommitResult", "StoreMetrics", "State", "VersionChanges",
           "check_restorable"]
