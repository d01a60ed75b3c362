"""Lets the programs in python/ run as plain scripts from a checkout.

Installed, this folder is the package `sparkstate_jobs`; run as `python python/demo.py` it is not
importable under that name, so scripts call `ensure_sparkstate_jobs()` before their package imports.
"""
from __future__ import annotations

import importlib.util
import os
import sys


def ensure_sparkstate_jobs() -> None:
    if "sparkstate_jobs" in sys.modules:
        return
    try:
        import sparkstate_jobs  # noqa: F401 - installed (pip install .)
        return
    except ImportError:
        pass
    root = os.path.dirname(os.path.abspath(__file__))
    spec = importlib.util.spec_from_file_location(
        "sparkstate_jobs", os.path.join(root, "__init__.py"), submodule_search_locations=[root])
    module = importlib.util.module_from_spec(spec)
    sys.modules["sparkstate_jobs"] = module
    spec.loader.exec_module(module)
