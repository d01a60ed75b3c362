"""`sparkstate inspect --html FILE`: the inspect report as one self-contained page.

Charts are inline SVG bars drawn here (no script, no stylesheet or font from the network), so the file
opens anywhere, offline, and can be attached to a ticket as it is.
"""
from __future__ import annotations

from html import escape
from typing import Sequence

from ..units import human_bytes
from .inspect import Balance, InspectReport

_CSS = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 2em auto; max-width: 1100px; color: #222; }
h1 { font-size: 1.4em; } h2 { font-size: 1.1em; margin-top: 2em; border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; font-size: 13px; } td, th { padding: 2px 10px; text-align: right; }
th { border-bottom: 1px solid #999; } td.l, th.l { text-align: left; }
.note { color: #555; } .bad { color: #b00020; } svg text { font: 11px system-ui, sans-serif; fill: #333; }
"""


def bar_chart(title: str, labels: Sequence[str], values: Sequence[float], *, unit: str = "",
              colour: str = "#3b6ea8", mean_line: bool = False, fmt=lambda v: f"{v:,.0f}") -> str:
    """A vertical bar chart as an <svg> element (one bar per label)."""
    width, height, left, bottom, top = 900, 220, 70, 40, 24
    n = max(1, len(values))
    peak = max(values, default=0) or 1
    step = (width - left - 10) / n
    bar = max(1.0, step * 0.8)
    parts = [f'<svg role="img" aria-label="{escape(title)}" width="{width}" height="{height}" '
             f'viewBox="0 0 {width} {height}" xmlns="http://www.w3.org/2000/svg">',
             f'<text x="{left}" y="14">{escape(title)}</text>',
             f'<line x1="{left}" y1="{height - bottom}" x2="{width - 10}" y2="{height - bottom}" stroke="#999"/>',
             f'<text x="{left - 6}" y="{top + 4}" text-anchor="end">{escape(fmt(peak))}{escape(unit)}</text>',
             f'<text x="{left - 6}" y="{height - bottom}" text-anchor="end">0</text>']
    label_every = max(1, n // 30)
    for i, (label, value) in enumerate(zip(labels, values)):
        h = (height - bottom - top) * value / peak
        x = left + i * step + (step - bar) / 2
        parts.append(f'<rect class="bar" x="{x:.1f}" y="{height - bottom - h:.1f}" width="{bar:.1f}" '
                     f'height="{h:.1f}" fill="{colour}"><title>{escape(label)}: {escape(fmt(value))}'
                     f'{escape(unit)}</title></rect>')
        if i % label_every == 0:
            parts.append(f'<text x="{x + bar / 2:.1f}" y="{height - bottom + 14}" text-anchor="middle">'
                         f'{escape(label)}</text>')
    if mean_line and values:
        mean = sum(values) / len(values)
        y = height - bottom - (height - bottom - top) * mean / peak
        parts.append(f'<line x1="{left}" y1="{y:.1f}" x2="{width - 10}" y2="{y:.1f}" stroke="#b00020" '
                     f'stroke-dasharray="4 3"/><text x="{width - 12}" y="{y - 4:.1f}" text-anchor="end">'
                     f'mean {escape(fmt(mean))}</text>')
    parts.append("</svg>")
    return "".join(parts)


def _table(header: Sequence[str], rows: Sequence[Sequence[object]], left: int = 1) -> str:
    def cell(tag: str, i: int, value: object) -> str:
        cls = ' class="l"' if i < left else ""
        return f"<{tag}{cls}>{escape('-' if value is None else str(value))}</{tag}>"
    head = "".join(cell("th", i, h) for i, h in enumerate(header))
    body = "".join("<tr>" + "".join(cell("td", i, v) for i, v in enumerate(row)) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _balance_chart(b: Balance, what: str) -> str:
    return bar_chart(f"operator {b.operator_id}: keys per partition {what} ({b.partitions} partitions, "
                     f"max/mean {b.skew:.2f})", [str(p) for p in range(b.partitions)], b.keys, mean_line=True)


def render_html(report: InspectReport) -> str:
    title = f"sparkstate inspect: {report.checkpoint}"
    out = [f"<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>{escape(title)}</title>"
           f"<style>{_CSS}</style></head><body><h1>{escape(title)}</h1>"]
    facts = [("provider", report.provider or "-"), ("backend", ", ".join(report.backends) or "-"),
             ("state root", report.state_root), ("newest committed batch", report.last_batch),
             ("partitions", report.num_partitions), ("version shown", report.version),
             ("retained versions", _ranges(report.retained_versions()))]
    out.append(_table(["", ""], facts, left=2))
    out.extend(f'<p class="note">{escape(n)}</p>' for n in report.notes)

    totals = report.totals_by_version()
    if totals:
        out.append("<h2>State over the retained versions</h2>")
        labels = [str(v) for v, _, _ in totals]
        if report.ours:
            out.append(bar_chart("keys (all stores)", labels, [k for _, k, _ in totals]))
        out.append(bar_chart("bytes in the checkpoint (all stores)", labels, [b for _, _, b in totals],
                             colour="#6a8f3b", fmt=human_bytes))
    if report.balance or report.predicted:
        out.append("<h2>Keys per partition</h2>")
        out.extend(_balance_chart(b, "now") for b in report.balance)
        for op, (group, keys) in sorted(report.largest_key_group.items()):
            out.append(f'<p class="note">operator {op}: the largest key group ({group}) holds {keys:,} keys</p>')
    if report.predicted:
        out.append(f"<h2>After a rescale to {report.predicted[0].partitions} partitions</h2>")
        out.extend(_balance_chart(b, "predicted") for b in report.predicted)
    if report.schemas:
        out.append("<h2>Operators and stores</h2>")
        out.append(_table(["operator", "name", "store", "key", "value"],
                          [(s.operator_id, s.operator_name, s.store_name, s.columns("key"), s.columns("value"))
                           for s in report.schemas], left=5))
    out.append("<h2>Stores</h2>")
    rows = []
    for s in report.stores:
        f = s.figures_of(s.version)
        rows.append((s.rel, s.backend, s.version, s.keys, _bytes(s.live_bytes),
                     _bytes(f.checkpoint_bytes if f else None), _bytes(f.shared_bytes if f else None),
                     _ranges([v.version for v in s.versions])))
    out.append(_table(["store", "backend", "version", "keys", "live", "in checkpoint", "shared with older",
                       "retained"], rows, left=2))
    problems = [f"{s.rel}: {s.problem}" for s in report.stores if s.problem]
    out.extend(f'<p class="bad">{escape(p)}</p>' for p in problems)
    out.append("</body></html>")
    return "\n".join(out)


def _bytes(n: int | None) -> str | None:
    return None if n is None else human_bytes(n)


def _ranges(versions: list[int]) -> str:
    from ..checkpoint.file_manager import version_ranges
    return version_ranges(versions) or "-"
