"""`sparkstate inspect --html FILE`: the inspect report as one self-contained page.

Charts are inline SVG bars drawn here (no script, no stylesheet or font from the network), so the file
opens anywhere, offline, and can be attached to a ticket as it is. Values are printed on the bars where
they fit: a screenshot or a print shows no tooltips.
"""
from __future__ import annotations

import math
from html import escape
from typing import Callable, Sequence

from ..units import human_bytes
from .inspect import AGE_LABELS, Balance, InspectReport

_CSS = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 2em auto; padding: 0 1em; max-width: 960px; color: #222; }
h1 { font-size: 1.35em; margin-bottom: .6em; word-break: break-all; }
h2 { font-size: 1.1em; margin-top: 1.8em; border-bottom: 1px solid #ddd; padding-bottom: .2em; }
table { border-collapse: collapse; font-size: 13px; } td, th { padding: 3px 10px; text-align: right; }
thead th { border-bottom: 1px solid #999; } td.l, th.l { text-align: left; }
tbody tr:nth-child(even) { background: #f6f7f9; }
table.facts th { text-align: left; font-weight: normal; color: #666; padding-left: 0; }
table.facts td { text-align: left; } table.facts tr { background: none; }
.note { color: #555; } .bad { color: #b00020; }
svg { display: block; width: 100%; max-width: 900px; height: auto; margin: .8em 0 1.2em; }
svg text { font: 11px system-ui, sans-serif; fill: #444; }
svg text.title { font-size: 13px; font-weight: 600; fill: #222; } svg text.value { font-size: 10px; fill: #222; }
svg text.mean { fill: #b00020; }
"""
_BLUE, _BLUE_LIGHT = "#3b6ea8", "#a9c1de"
_GREEN, _GREEN_LIGHT = "#5b8a2e", "#bcd49e"
_ORANGE = "#c7762b"


def _count(v: float) -> str:
    return f"{v:,.0f}"


def bar_chart(title: str, labels: Sequence[str], values: Sequence[float], *, axis: str = "",
              colour: str = _BLUE, mean_line: bool = False, fmt: Callable[[float], str] = _count,
              lower: Sequence[float] | None = None, lower_colour: str = _BLUE_LIGHT,
              legend: tuple[str, str] | None = None) -> str:
    """A vertical bar chart as an <svg> element, one bar per label, `axis` naming what the labels are.
    `lower` with `legend`: a part of each bar drawn from its foot in `lower_colour`, `legend` naming (the
    rest, that part). Ticks of a `human_bytes` axis fall on round binary sizes."""
    width, height, left, right, top, bottom = 900, 250, 70, 92, 46, 46
    plot_w, plot_h, base = width - left - right, height - top - bottom, height - bottom
    n = max(1, len(values))
    peak, tick = _axis_top(max(values, default=0), binary=fmt is human_bytes)
    step = plot_w / n
    bar = max(1.0, min(step * 0.7, 64.0))
    parts = [f'<svg role="img" aria-label="{escape(title)}" viewBox="0 0 {width} {height}" '
             f'xmlns="http://www.w3.org/2000/svg">',
             f'<text class="title" x="{left}" y="18">{escape(title)}</text>',
             f'<line x1="{left}" y1="{base}" x2="{left + plot_w}" y2="{base}" stroke="#999"/>',
             f'<text x="{left - 8}" y="{base + 4}" text-anchor="end">0</text>']
    for k in range(1, round(peak / tick) + 1):
        y = base - plot_h * k * tick / peak
        parts.append(f'<line x1="{left}" y1="{y:.1f}" x2="{left + plot_w}" y2="{y:.1f}" stroke="#eaeaea"/>'
                     f'<text x="{left - 8}" y="{y + 4:.1f}" text-anchor="end">{escape(fmt(k * tick))}</text>')
    if legend:
        parts.append(_legend(width - right, legend, (colour, lower_colour)))
    widest_label = max((len(label) for label in labels), default=1)
    label_every = max(1, math.ceil(n * (widest_label * 6.5 + 8) / plot_w))
    show_values = n <= 40 and max((len(fmt(v)) for v in values), default=0) * 6 + 4 <= step
    for i, (label, value) in enumerate(zip(labels, values)):
        h = plot_h * value / peak
        x = left + i * step + (step - bar) / 2
        tip = f"{axis} {label}: {fmt(value)}".strip()
        parts.append(f'<rect class="bar" x="{x:.1f}" y="{base - h:.1f}" width="{bar:.1f}" height="{h:.1f}" '
                     f'fill="{colour}"><title>{escape(tip)}</title></rect>')
        if lower is not None and legend:
            lh = plot_h * min(lower[i], value) / peak
            parts.append(f'<rect class="part" x="{x:.1f}" y="{base - lh:.1f}" width="{bar:.1f}" '
                         f'height="{lh:.1f}" fill="{lower_colour}"><title>{escape(tip)}, '
                         f'{escape(fmt(lower[i]))} {escape(legend[1])}</title></rect>')
        if show_values:
            parts.append(f'<text class="value" x="{x + bar / 2:.1f}" y="{base - h - 4:.1f}" '
                         f'text-anchor="middle">{escape(fmt(value))}</text>')
        if i % label_every == 0:
            parts.append(f'<text x="{x + bar / 2:.1f}" y="{base + 15}" text-anchor="middle">'
                         f'{escape(label)}</text>')
    if axis:
        parts.append(f'<text x="{left + plot_w / 2}" y="{height - 8}" text-anchor="middle">{escape(axis)}</text>')
    if mean_line and values:
        mean = sum(values) / len(values)
        y = base - plot_h * mean / peak
        parts.append(f'<line x1="{left}" y1="{y:.1f}" x2="{left + plot_w}" y2="{y:.1f}" stroke="#b00020" '
                     f'stroke-dasharray="5 3"/><text class="mean" x="{left + plot_w + 6}" y="{y + 4:.1f}">'
                     f'mean {escape(fmt(mean))}</text>')
    parts.append("</svg>")
    return "".join(parts)


def _axis_top(peak: float, binary: bool) -> tuple[float, float]:
    """(top of the value axis, distance between its ticks): 1, 2 or 5 times a power of ten (of a power of
    1024 in bytes), at most five ticks, whole numbers at least."""
    if peak <= 0:
        return 1.0, 1.0
    unit = 1024.0 ** int(math.log(peak, 1024)) if binary and peak >= 1024 else 1.0
    scaled = peak / unit
    power = 10.0 ** math.floor(math.log10(scaled / 5)) if scaled > 5 else 1.0
    tick = next(m * power for m in (1, 2, 5, 10) if math.ceil(scaled / (m * power) - 1e-9) <= 5)
    return math.ceil(scaled / tick - 1e-9) * tick * unit, tick * unit


def _legend(x_end: float, names: tuple[str, str], colours: tuple[str, str]) -> str:
    """Two swatches with their names, right-aligned at `x_end` on the title's line."""
    out, x = [], x_end
    for name, colour in reversed(list(zip(names, colours))):
        x -= len(name) * 6 + 4
        out.append(f'<text x="{x:.0f}" y="18">{escape(name)}</text>'
                   f'<rect x="{x - 15:.0f}" y="8" width="11" height="11" fill="{colour}"/>')
        x -= 32
    return "".join(out)


def _table(header: Sequence[str] | None, rows: Sequence[Sequence[object]], left: int = 1,
           cls: str | None = None) -> str:
    def cell(tag: str, i: int, value: object) -> str:
        align = ' class="l"' if i < left else ""
        return f"<{tag}{align}>{escape('-' if value is None else str(value))}</{tag}>"
    head = ("<thead><tr>" + "".join(cell("th", i, h) for i, h in enumerate(header)) + "</tr></thead>"
            if header else "")
    body = "".join("<tr>" + "".join(cell("th" if header is None and i == 0 else "td", i, v)
                                    for i, v in enumerate(row)) + "</tr>" for row in rows)
    attr = f' class="{cls}"' if cls else ""
    return f"<table{attr}>{head}<tbody>{body}</tbody></table>"


def _balance_chart(b: Balance, what: str, colour: str) -> str:
    return bar_chart(f"operator {b.operator_id}: keys per partition {what}, {b.partitions} partitions "
                     f"(max/mean {b.skew:.2f})", [str(p) for p in range(b.partitions)], b.keys,
                     axis="partition", colour=colour, mean_line=True)


def render_html(report: InspectReport) -> str:
    title = f"sparkstate inspect: {report.checkpoint}"
    out = [f"<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>{escape(title)}</title>"
           f"<style>{_CSS}</style></head><body><h1>{escape(title)}</h1>"]
    shown = [f for s in report.stores if (f := s.figures_of(s.version)) is not None]
    live = [s.live_bytes for s in report.stores if s.live_bytes is not None]
    facts = [("provider", report.provider or "-"), ("backend", ", ".join(report.backends) or "-"),
             ("state root", report.state_root), ("newest committed batch", report.last_batch),
             ("partitions", report.num_partitions), ("version shown", report.version),
             ("retained versions", _ranges(report.retained_versions())), ("stores", len(report.stores))]
    if report.ours:
        facts.append(("keys", f"{sum(s.keys or 0 for s in report.stores):,}"))
    if live:
        facts.append(("live bytes (key + value)", human_bytes(sum(live))))
    if shown:
        facts.append(("bytes in the checkpoint", human_bytes(sum(f.checkpoint_bytes for f in shown))))
    out.append(_table(None, facts, left=2, cls="facts"))
    out.extend(f'<p class="note">{escape(n)}</p>' for n in report.notes)

    totals = report.totals_by_version()
    if totals:
        out.append("<h2>State over the retained versions</h2>")
        labels = [str(v) for v, _, _, _ in totals]
        if report.ours:
            out.append(bar_chart("keys, all stores", labels, [k for _, k, _, _ in totals], axis="version"))
        shared = [s for *_, s in totals]
        out.append(bar_chart("bytes in the checkpoint, all stores", labels, [b for _, _, b, _ in totals],
                             axis="version", colour=_GREEN, fmt=human_bytes, lower=shared, lower_colour=_GREEN_LIGHT,
                             legend=("new", "shared with the version before") if any(shared) else None))
    if report.balance or report.predicted:
        out.append("<h2>Keys per partition</h2>")
        out.extend(_balance_chart(b, "now", _BLUE) for b in report.balance)
        out.extend(f'<p class="note">{escape(note)}</p>' for note in report.key_group_notes())
    if report.key_ages:
        out.append("<h2>Time since each key's last write</h2>")
        out.extend(bar_chart(f"operator {op}: keys by time since their last write, at the batch time of the "
                             "version shown", list(AGE_LABELS), counts, axis="time since the last write")
                   for op, counts in sorted(report.key_ages.items()))
    if report.predicted:
        out.append(f"<h2>After a rescale to {report.predicted[0].partitions} partitions (predicted)</h2>")
        out.extend(_balance_chart(b, "predicted", _ORANGE) for b in report.predicted)
    if report.schemas:
        out.append("<h2>Operators and stores</h2>")
        out.append(_table(["operator", "name", "store", "key", "value"],
                          [(s.operator_id, s.operator_name, s.store_name, s.columns("key"), s.columns("value"))
                           for s in report.schemas], left=5))
    out.append("<h2>Stores</h2>")
    rows = []
    for s in report.stores:
        f = s.figures_of(s.version)
        rows.append((s.rel, s.backend, s.version, None if s.keys is None else f"{s.keys:,}", _bytes(s.live_bytes),
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
