"""Server-side SVG charts of the estimator's figures across revisions. Pure.

The estimator reruns only at revisions that moved ``config.json`` or the weights; in between, a
revision's figures are those of the last rerun, so each line is carried forward as a step. Two
panels: the parameter count, and the memory of a full fine-tune and of LoRA at batch 1 against
the memory of each priced card (a horizontal line per card), so a reader sees the revision at
which a model stopped fitting a card. No script, no external file: plain SVG elements with
presentation attributes (no inline ``style``), so a strict Content-Security-Policy holds.
"""

from __future__ import annotations

import html
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Any

from tracker.core.estimate.cards import CARDS

WIDTH = 720
PANEL_HEIGHT = 170
LEFT = 64
RIGHT = 96
TOP = 26
BOTTOM = 24
MARKERS_SHOWN = 200  # a dot per estimator rerun, up to this many
RERUNS_CHARTED = 50  # the repo page charts its newest estimator reruns, this many at most (as a timeline page)


@dataclass(frozen=True)
class Layout:
    """Where a chart puts things, in viewBox units (a CSS pixel when the chart is drawn at ``width``).

    ``WIDE`` is for desktops: card names right of the plot, the legend beside the title. ``NARROW``
    is for phones, drawn about as wide as a 390 px screen, so its 12-unit labels stay 12 CSS px:
    card names inside the plot, the legend and any axis note on a line of their own under the title.
    """

    name: str
    width: int
    panel_height: int
    left: int
    right: int
    top: int
    bottom: int
    font: int
    title_font: int
    compact: bool


WIDE = Layout("wide", WIDTH, PANEL_HEIGHT, LEFT, RIGHT, TOP, BOTTOM, font=11, title_font=13, compact=False)
NARROW = Layout("narrow", 360, 210, 50, 10, 44, 24, font=12, title_font=14, compact=True)


@dataclass(frozen=True)
class ChartPoint:
    """One revision on the x axis: its short sha and the estimate figures in force there."""

    label: str
    params: float | None
    full_gb: float | None
    lora_gb: float | None
    rerun: bool  # the estimator ran at this revision (else carried forward)


def points(revisions: Sequence[tuple[str, Mapping[str, Any] | None]]) -> list[ChartPoint]:
    """Chart points from (label, stored estimate or None), oldest first, figures carried forward."""
    out: list[ChartPoint] = []
    current: tuple[float | None, float | None, float | None] = (None, None, None)
    for label, est in revisions:
        rerun = est is not None
        if est is not None:
            if est.get("supported") is False:
                current = (None, None, None)
            else:
                current = (_number(est.get("params")), _number(est.get("full_finetune_gb")),
                           _number(est.get("lora_gb")))
        out.append(ChartPoint(label, *current, rerun=rerun))
    return out


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(value)


def human_params(value: float) -> str:
    """559890432 -> "559.9M"; 8030261248 -> "8.03B"."""
    for size, suffix in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "k")):
        if value >= size:
            scaled = value / size
            return f"{scaled:.3g}{suffix}" if scaled < 100 else f"{scaled:.4g}{suffix}"
    return f"{value:.0f}"


def human_gb(value: float) -> str:
    return f"{value:.3g} GB" if value < 100 else f"{value:.0f} GB"


def _nice_step(value: float) -> float:
    """A round step at or above ``value``: 1, 2, 2.5 or 5 times a power of ten."""
    if value <= 0:
        return 1.0
    power: float = 10 ** math.floor(math.log10(value))  # an int for positive exponents, as before
    for step in (1, 2, 2.5, 5, 10):
        if step * power >= value * (1 - 1e-9):
            return step * power
    return 10 * power


def axis_range(values: Sequence[float], *, intervals: int = 4) -> tuple[float, float, float]:
    """(bottom, top, tick step) of an axis scaled to the data, not to zero.

    A tenth of the data's spread is added each side (a tenth of the value when all are equal), then
    the ends are rounded out to a round step, so a change of 559.9M to 567.8M fills the panel instead
    of a sliver of an axis from 0 to 1B. Non-negative data never gets a negative bottom.
    """
    low, high = min(values), max(values)
    spread = high - low or abs(high) or 1.0
    margin = spread * 0.1
    bottom, top = low - margin, high + margin
    if low >= 0:
        bottom = max(bottom, 0.0)
    step = _nice_step((top - bottom) / intervals)
    bottom = math.floor(bottom / step + 1e-9) * step
    top = math.ceil(top / step - 1e-9) * step
    return bottom, top, step


def _esc(text: str) -> str:
    return html.escape(text, quote=True)


class _Panel:
    def __init__(self, layout: Layout, n: int, top: float, axis: tuple[float, float, float]) -> None:
        self.layout, self.n, self.top = layout, n, top
        self.y_min, self.y_max, self.step = axis
        self.plot_w = layout.width - layout.left - layout.right
        self.plot_h = layout.panel_height - layout.top - layout.bottom

    @property
    def left(self) -> int:
        return self.layout.left

    @property
    def right(self) -> int:
        return self.layout.width - self.layout.right

    @property
    def plot_top(self) -> float:
        return self.top + self.layout.top

    @property
    def plot_bottom(self) -> float:
        return self.top + self.layout.top + self.plot_h

    def x(self, i: int) -> float:
        return self.left + (self.plot_w / 2 if self.n == 1 else i * self.plot_w / (self.n - 1))

    def y(self, value: float) -> float:
        value = min(max(value, self.y_min), self.y_max)
        return self.plot_top + self.plot_h * (self.y_max - value) / (self.y_max - self.y_min)


def _series(panel: _Panel, values: Sequence[float | None], *, colour: str, dash: str | None,
            pts: Sequence[ChartPoint], name: str, fmt: Any) -> list[str]:
    """A stepped line through the values (gaps where there is none) and a dot per rerun."""
    parts: list[str] = []
    segment: list[str] = []

    def close() -> None:
        if segment:
            dash_attr = f' stroke-dasharray="{dash}"' if dash else ""
            parts.append(f'<polyline fill="none" stroke="{colour}" stroke-width="2"{dash_attr} '
                         f'points="{" ".join(segment)}"/>')
            segment.clear()

    previous: float | None = None
    for i, value in enumerate(values):
        if value is None:
            close()
            previous = None
            continue
        x, y = panel.x(i), panel.y(value)
        if previous is not None and previous != value:
            segment.append(f"{x:.1f},{panel.y(previous):.1f}")  # step: hold the old value up to here
        segment.append(f"{x:.1f},{y:.1f}")
        previous = value
    close()
    for i in _markers(pts, values):
        value = values[i]
        assert value is not None
        parts.append(f'<circle cx="{panel.x(i):.1f}" cy="{panel.y(value):.1f}" r="3" fill="{colour}">'
                     f"<title>{_esc(pts[i].label)}: {_esc(name)} {_esc(fmt(value))}</title></circle>")
    return parts


def _markers(pts: Sequence[ChartPoint], values: Sequence[float | None]) -> list[int]:
    """The reruns that get a dot: all of them, or past the cap those where the figure moved, the latest first."""
    reruns = [i for i, p in enumerate(pts) if p.rerun and values[i] is not None]
    if len(reruns) > MARKERS_SHOWN:
        moved = [i for k, i in enumerate(reruns) if k == 0 or values[i] != values[reruns[k - 1]]]
        kept = set(moved[-MARKERS_SHOWN:])
        rest = [i for i in reruns if i not in kept]
        kept.update(rest[len(rest) - (MARKERS_SHOWN - len(kept)):])
        reruns = sorted(kept)
    return reruns


def _axes(panel: _Panel, title: str, fmt: Any) -> list[str]:
    """The panel's title, its axes and tick labels; an axis that does not start at zero says so and is broken."""
    lay = panel.layout
    top, bottom = panel.plot_top, panel.plot_bottom
    parts = [f'<text x="{lay.left}" y="{panel.top + 16}" font-size="{lay.title_font}" font-weight="bold" '
             f'fill="#222">{_esc(title)}</text>',
             f'<line x1="{lay.left}" y1="{bottom}" x2="{panel.right}" y2="{bottom}" stroke="#999"/>',
             f'<line x1="{lay.left}" y1="{top}" x2="{lay.left}" y2="{bottom}" stroke="#999"/>']
    if panel.y_min > 0:
        note = f"axis starts at {fmt(panel.y_min)}, not zero"
        if lay.compact:
            parts.append(f'<text x="{lay.left}" y="{panel.top + 34}" font-size="{lay.font}" fill="#555">'
                         f"{_esc(note)}</text>")
        else:
            parts.append(f'<text x="{panel.right}" y="{panel.top + 16}" font-size="{lay.font}" text-anchor="end" '
                         f'fill="#555">{_esc(note)}</text>')
        # the break mark: two short slashes across the foot of the axis
        parts.append(f'<path d="M{lay.left - 5},{bottom - 3} l10,-4 M{lay.left - 5},{bottom - 8} l10,-4" '
                     f'stroke="#555" stroke-width="1.5"/>')
    ticks = round((panel.y_max - panel.y_min) / panel.step)  # 4 to 6 steps (axis_range)
    for k in range(ticks + 1):
        value = panel.y_min + k * panel.step
        y = panel.y(value)
        parts.append(f'<text x="{lay.left - 6}" y="{y + 4:.1f}" font-size="{lay.font}" text-anchor="end" '
                     f"fill=\"#555\">{_esc(fmt(value) if value else '0')}</text>")
    return parts


def _shown_cards(highest: float) -> list[Any]:
    """The cards up to the first one that holds the largest figure (and always the smallest)."""
    shown = [c for c in CARDS if c.gb <= highest * 1.05]
    bigger = [c for c in CARDS if c.gb > highest * 1.05]
    if bigger:
        shown.append(bigger[0])
    return shown


def _card_lines(panel: _Panel, shown: Sequence[Any]) -> list[str]:
    """A dashed line per card memory, named right of the plot (wide) or above the line inside it (narrow).

    Names never overlap: a name that would sit within a line of text of the one above it moves down.
    """
    lay = panel.layout
    parts: list[str] = []
    for gb in sorted({c.gb for c in shown}):
        y = panel.y(gb)
        parts.append(f'<line x1="{lay.left}" y1="{y:.1f}" x2="{panel.right}" y2="{y:.1f}" stroke="#bbb" '
                     f'stroke-dasharray="2 3"/>')
    previous: float | None = None
    for gb in sorted({c.gb for c in shown}, reverse=True):  # top of the panel first
        names = " / ".join(c.label.rsplit(" ", 2)[0] for c in shown if c.gb == gb)  # A100 and H100 share 80 GB
        y = panel.y(gb) + (4 if not lay.compact else -3)
        if previous is not None:
            y = max(y, previous + lay.font + 1)
        previous = y
        if lay.compact:
            parts.append(f'<text x="{panel.right - 2}" y="{y:.1f}" font-size="{lay.font}" text-anchor="end" '
                         f'fill="#555">{_esc(names)} {gb} GB</text>')
        else:
            parts.append(f'<text x="{panel.right + 4}" y="{y:.1f}" font-size="{lay.font}" fill="#555">'
                         f"{_esc(names)} {gb} GB</text>")
    return parts


def _legend(panel: _Panel) -> str:
    lay = panel.layout
    if lay.compact:
        x, y = lay.left, panel.top + 34
    else:
        x, y = panel.right - 230, panel.top + 16
    return (f'<line x1="{x}" y1="{y - 4}" x2="{x + 20}" y2="{y - 4}" stroke="#c0392b" stroke-width="2"/>'
            f'<text x="{x + 24}" y="{y}" font-size="{lay.font}" fill="#333">full fine-tune</text>'
            f'<line x1="{x + 120}" y1="{y - 4}" x2="{x + 140}" y2="{y - 4}" stroke="#27864a" stroke-width="2" '
            f'stroke-dasharray="6 3"/>'
            f'<text x="{x + 144}" y="{y}" font-size="{lay.font}" fill="#333">LoRA r=16</text>')


def estimate_chart(pts: Sequence[ChartPoint], layout: Layout = WIDE) -> str | None:
    """The two-panel SVG (as markup text) or None when no revision has a supported estimate."""
    if not any(p.params is not None for p in pts):
        return None
    n, lay = len(pts), layout
    height = 2 * lay.panel_height + 16
    title_id = "chart-title" if lay is WIDE else f"chart-title-{lay.name}"
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {lay.width} {height}" role="img" '
             f'class="chart chart-{lay.name}" aria-labelledby="{title_id}">',
             f'<title id="{title_id}">Parameters and estimated memory across revisions</title>']

    params = [p.params for p in pts]
    panel = _Panel(lay, n, 0, axis_range([v for v in params if v is not None]))
    parts += _axes(panel, "Parameters", human_params)
    parts += _series(panel, params, colour="#1f5fbf", dash=None, pts=pts, name="parameters", fmt=human_params)

    full = [p.full_gb for p in pts]
    lora = [p.lora_gb for p in pts]
    highest = max([v for v in (*full, *lora) if v is not None] or [1.0])
    shown = _shown_cards(highest)
    figures = [v for v in (*full, *lora) if v is not None] or [highest]
    # Memory against a card's memory reads as a share of it: this axis always starts at zero.
    panel = _Panel(lay, n, lay.panel_height + 16, axis_range([0.0, *figures, *(c.gb for c in shown)]))
    parts += _axes(panel, "Memory at batch 1 against each card", human_gb)
    parts += _card_lines(panel, shown)
    parts += _series(panel, full, colour="#c0392b", dash=None, pts=pts, name="full fine-tune", fmt=human_gb)
    parts += _series(panel, lora, colour="#27864a", dash="6 3", pts=pts, name="LoRA", fmt=human_gb)
    parts.append(_legend(panel))
    first, last = pts[0].label, pts[-1].label
    base = 2 * lay.panel_height + 12
    parts.append(f'<text x="{lay.left}" y="{base}" font-size="{lay.font}" fill="#555">{_esc(first)}</text>')
    if n > 1:
        parts.append(f'<text x="{lay.width - lay.right}" y="{base}" font-size="{lay.font}" text-anchor="end" '
                     f'fill="#555">{_esc(last)}</text>')
    parts.append("</svg>")
    return "".join(parts)


def axis_note(pts: Sequence[ChartPoint]) -> str | None:
    """A sentence for the caption when the parameter axis does not start at zero: where it starts, how far it moves."""
    params = [p.params for p in pts if p.params is not None]
    if not params:
        return None
    bottom = axis_range(params)[0]
    if bottom <= 0:
        return None
    low, high = min(params), max(params)
    moved = f"{(high - low) / low:.1%}" if low else "?"
    return (f"The parameter axis starts at {human_params(bottom)}, not at zero: the count moves by {moved} "
            f"at most ({human_params(low)} to {human_params(high)}).")


# The severity badges' colours (pages.css), for a strip's cells; "none" is a revision with no finding.
SEVERITY_FILL = {"critical": "#6e0b14", "high": "#c0392b", "moderate": "#e67e22", "low": "#f1c40f",
                 "info": "#d0d7de", None: "#eef1f4"}
STRIP_REVISIONS = 30  # the index's strip shows a repo's newest revisions read, this many at most


def severity_strip(severities: Sequence[str | None], *, what: str = "revision") -> str | None:
    """A row of small cells, oldest left, each coloured by one revision's worst severity; None when empty.

    Its label counts them ("Worst severity of the last 4 revisions: 1 critical, 1 high, 2 info"), so a
    screen reader hears what the colours say; each cell's tooltip names its severity.
    """
    if not severities:
        return None
    severities = [v if v in SEVERITY_FILL else None for v in severities]  # a severity not known reads as none
    counts = {s: sum(1 for v in severities if v == s) for s in SEVERITY_FILL}
    said = ", ".join(f"{n} {s or 'none'}" for s, n in counts.items() if n)
    n = len(severities)
    label = f"Worst severity of the last {n} {what}{'' if n == 1 else 's'}, oldest first: {said}"
    cells = "".join(f'<rect x="{i * 8}" y="0" width="6" height="14" rx="1" '
                    f'fill="{SEVERITY_FILL[v]}"><title>{_esc(v or "none")}</title></rect>'
                    for i, v in enumerate(severities))
    return (f'<svg xmlns="http://www.w3.org/2000/svg" class="strip" width="{n * 8 - 2}" height="14" '
            f'viewBox="0 0 {n * 8 - 2} 14" role="img" aria-label="{_esc(label)}">{cells}</svg>')


TIMELINE_BUCKETS = 40  # the advisories' strip has at most this many columns of time


@dataclass(frozen=True)
class SeverityTimeline:
    """Advisories over time: the SVG, and the words the page writes under it."""

    svg: str
    first: date
    last: date
    bucket_days: int


def _day_label(day: date, bucket_days: int) -> str:
    end = day + timedelta(days=bucket_days - 1)
    return day.isoformat() if bucket_days == 1 else f"{day.isoformat()} to {end.isoformat()}"


def severity_timeline(items: Sequence[tuple[datetime, str]]) -> SeverityTimeline | None:
    """Advisories by the day (or run of days) they were published, a column per run stacked by severity.

    ``TIMELINE_BUCKETS`` columns end at the newest day: a day each when the history is short, as many
    days each as it takes to reach the oldest advisory when it is long; the tallest column fills the
    drawing, the worst severity at its foot.
    """
    if not items:
        return None
    earliest, last = min(d for d, _ in items).date(), max(d for d, _ in items).date()
    bucket_days = max(1, math.ceil(((last - earliest).days + 1) / TIMELINE_BUCKETS))
    n = TIMELINE_BUCKETS  # always the full width, ending at the newest day: a short history is a few bars at the right
    first = last - timedelta(days=n * bucket_days - 1)
    counts: list[dict[str, int]] = [{} for _ in range(n)]
    for when, severity in items:
        column = counts[(when.date() - first).days // bucket_days]
        column[severity] = column.get(severity, 0) + 1
    tallest = max(sum(c.values()) for c in counts)
    order = [s for s in SEVERITY_FILL if s]
    parts = []
    for i, column in enumerate(counts):
        y = 40.0
        day = first + timedelta(days=i * bucket_days)
        for severity in sorted(column, key=lambda s: order.index(s) if s in order else len(order)):  # worst lowest
            h = 40 * column[severity] / tallest
            y -= h
            parts.append(f'<rect x="{i * 10}" y="{y:.1f}" width="8" height="{h:.1f}" '
                         f'fill="{SEVERITY_FILL.get(severity, SEVERITY_FILL[None])}"><title>'
                         f"{_esc(_day_label(day, bucket_days))}: {column[severity]} {_esc(severity)}</title></rect>")
    totals = {s: sum(c.get(s, 0) for c in counts) for s in {s for c in counts for s in c}}
    said = ", ".join(f"{totals[s]} {s}" for s in sorted(totals, key=lambda s: order.index(s) if s in order else 99))
    label = f"Advisories published from {first.isoformat()} to {last.isoformat()} by severity: {said}"
    width = n * 10 - 2
    svg = (f'<svg xmlns="http://www.w3.org/2000/svg" class="timeline-strip" viewBox="0 0 {width} 40" '
           f'preserveAspectRatio="none" role="img" aria-label="{_esc(label)}">{"".join(parts)}</svg>')
    return SeverityTimeline(svg=svg, first=first, last=last, bucket_days=bucket_days)
