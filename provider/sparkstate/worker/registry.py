"""The stores a worker holds, by handle. Handles are small ints handed to the JVM by `open`."""
from __future__ import annotations

import itertools
import threading

from ..engine.store import Store, StoreSpec


class UnknownHandleError(KeyError):
    pass


class StoreRegistry:
    def __init__(self, local_root: str | None = None):
        self._stores: dict[int, Store] = {}  # never replaced: `lookup` is bound to it
        # The store of a handle or None, without the error: for a transport's per-row fast path.
        self.lookup = self._stores.get
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._local_root = local_root

    def open(self, spec: StoreSpec) -> int:
        store = Store(spec, local_root=spec.settings.local_dir or self._local_root)
        with self._lock:
            handle = next(self._ids)
            self._stores[handle] = store
        return handle

    def get(self, handle: int) -> Store:
        store = self._stores.get(handle)
        if store is None:
            raise UnknownHandleError(f"store handle {handle} is not open in this worker (pid-local handles)")
        return store

    def pop(self, handle: int) -> Store | None:
        with self._lock:
            return self._stores.pop(handle, None)

    def all(self) -> list[Store]:
        with self._lock:
            return list(self._stores.values())

    def close_all(self) -> None:
        """Close every store and delete its local files: the worker is going away with its JVM."""
        with self._lock:
            stores = list(self._stores.values())
            self._stores.clear()
        for store in stores:
            try:
                store.close()
            except Exception:
                pass
