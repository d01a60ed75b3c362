"""Sizes as people read them, in every report the tools print."""
from __future__ import annotations


def human_bytes(n: float | None) -> str:
    """`1.5 MiB`; `-` for an unknown size."""
    if n is None:
        return "-"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"
