"""The stores a worker holds, by handle. Handles are small ints handed to the JVM by `open`.

A worker process has its own `StoreTable`. The embedded workers of one executor JVM live in one
interpreter and share a table: a store a task opened through one of them is reachable through any other,
so a partition whose next task runs on another task thread keeps its live state instead of being
released and restored from the checkpoint. Each registry still owns what it opened, and closes only that
when its worker stops.
"""
from __future__ import annotations

import itertools
import threading

from ..engine import Store, StoreSpec
from ..errors import UnknownHandleError


class StoreTable:
    """Handle -> store for every registry of one interpreter (one per worker process)."""

    def __init__(self) -> None:
        self.stores: dict[int, Store] = {}  # never replaced: registries bind `stores.get`
        self.lock = threading.Lock()
        self.handles = itertools.count(1)  # next(handles) under `lock`

    def partners(self, spec: StoreSpec, store_name: str) -> list[Store]:
        """The open stores of `spec`'s query, operator and partition named `store_name` (a join side's other
        store: a task opens all of a join's stores through one worker)."""
        with self.lock:
            stores = list(self.stores.values())
        return [s for s in stores if s.spec.store_name == store_name and s.spec.same_partition(spec)]


class StoreRegistry:
    def __init__(self, local_root: str | None = None, table: StoreTable | None = None):
        self._table = table if table is not None else StoreTable()
        self._stores = self._table.stores
        self._owned: set[int] = set()  # guarded by the table's lock
        self._local_root = local_root

    def open(self, spec: StoreSpec) -> int:
        store = Store(spec, local_root=spec.settings.local_dir or self._local_root, partners=self._table.partners)
        with self._table.lock:
            handle = next(self._table.handles)
            self._stores[handle] = store
            self._owned.add(handle)
        return handle

    def get(self, handle: int) -> Store:
        store = self._stores.get(handle)
        if store is None:
            raise UnknownHandleError(f"store handle {handle} is not open in this worker (pid-local handles)")
        return store

    def store_count(self) -> int:
        """Stores open in this interpreter (every registry sharing the table)."""
        return len(self._stores)

    def pop(self, handle: int) -> Store | None:
        with self._table.lock:
            self._owned.discard(handle)
            return self._stores.pop(handle, None)

    def close_all(self) -> None:
        """Close every store this registry opened and delete its local files: the worker is going away."""
        with self._table.lock:
            stores = [self._stores.pop(h) for h in self._owned if h in self._stores]
            self._owned.clear()
        for store in stores:
            try:
                store.close()
            except Exception:
                pass
