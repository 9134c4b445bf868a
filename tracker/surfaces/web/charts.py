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
    def __init__(self, n: int, top: float, axis: tuple[float, float, float]) -> None:
        self.n, self.top = n, top
        self.y_min, self.y_max, self.step = axis
        self.plot_w = WIDTH - LEFT - RIGHT
        self.plot_h = PANEL_HEIGHT - TOP - BOTTOM

    def x(self, i: int) -> float:
        return LEFT + (self.plot_w / 2 if self.n == 1 else i * self.plot_w / (self.n - 1))

    def y(self, value: float) -> float:
        value = min(max(value, self.y_min), self.y_max)
        return self.top + TOP + self.plot_h * (self.y_max - value) / (self.y_max - self.y_min)


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
    reruns = [i for i, p in enumerate(pts) if p.rerun and values[i] is not None]
    if len(reruns) > MARKERS_SHOWN:  # keep the dots where the figure moved, the latest first
        moved = [i for k, i in enumerate(reruns) if k == 0 or values[i] != values[reruns[k - 1]]]
        kept = set(moved[-MARKERS_SHOWN:])
        rest = [i for i in reruns if i not in kept]
        kept.update(rest[len(rest) - (MARKERS_SHOWN - len(kept)):])
        reruns = sorted(kept)
    for i in reruns:
        value = values[i]
        assert value is not None
        parts.append(f'<circle cx="{panel.x(i):.1f}" cy="{panel.y(value):.1f}" r="3" fill="{colour}">'
                     f"<title>{_esc(pts[i].label)}: {_esc(name)} {_esc(fmt(value))}</title></circle>")
    return parts


def _axes(panel: _Panel, title: str, fmt: Any) -> list[str]:
    top, bottom = panel.top + TOP, panel.top + TOP + panel.plot_h
    parts = [f'<text x="{LEFT}" y="{panel.top + 16}" font-size="13" font-weight="bold" fill="#222">{_esc(title)}</text>',
             f'<line x1="{LEFT}" y1="{bottom}" x2="{WIDTH - RIGHT}" y2="{bottom}" stroke="#999"/>',
             f'<line x1="{LEFT}" y1="{top}" x2="{LEFT}" y2="{bottom}" stroke="#999"/>']
    ticks = round((panel.y_max - panel.y_min) / panel.step)  # 4 to 6 steps (axis_range)
    for k in range(ticks + 1):
        value = panel.y_min + k * panel.step
        y = panel.y(value)
        parts.append(f'<text x="{LEFT - 6}" y="{y + 4:.1f}" font-size="11" text-anchor="end" fill="#555">'
                     f"{_esc(fmt(value) if value else '0')}</text>")
    return parts


def estimate_chart(pts: Sequence[ChartPoint]) -> str | None:
    """The two-panel SVG (as markup text) or None when no revision has a supported estimate."""
    if not any(p.params is not None for p in pts):
        return None
    n = len(pts)
    height = 2 * PANEL_HEIGHT + 16
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {height}" role="img" '
             f'class="chart" aria-labelledby="chart-title">',
             '<title id="chart-title">Parameters and estimated memory across revisions</title>']

    params = [p.params for p in pts]
    panel = _Panel(n, 0, axis_range([v for v in params if v is not None]))
    parts += _axes(panel, "Parameters", human_params)
    parts += _series(panel, params, colour="#1f5fbf", dash=None, pts=pts, name="parameters", fmt=human_params)

    full = [p.full_gb for p in pts]
    lora = [p.lora_gb for p in pts]
    highest = max([v for v in (*full, *lora) if v is not None] or [1.0])
    # Show the cards up to the first one that holds the largest figure (and always the smallest).
    shown = [c for c in CARDS if c.gb <= highest * 1.05] or []
    bigger = [c for c in CARDS if c.gb > highest * 1.05]
    if bigger:
        shown.append(bigger[0])
    figures = [v for v in (*full, *lora) if v is not None] or [highest]
    panel = _Panel(n, PANEL_HEIGHT + 16, axis_range([*figures, *(c.gb for c in shown)]))
    parts += _axes(panel, "Memory at batch 1 against each card", human_gb)
    labelled: set[int] = set()
    for card in shown:
        y = panel.y(card.gb)
        parts.append(f'<line x1="{LEFT}" y1="{y:.1f}" x2="{WIDTH - RIGHT}" y2="{y:.1f}" stroke="#bbb" '
                     f'stroke-dasharray="2 3"/>')
        if card.gb not in labelled:  # A100 80 GB and H100 80 GB share a line
            labelled.add(card.gb)
            names = " / ".join(c.label.rsplit(" ", 2)[0] for c in shown if c.gb == card.gb)
            parts.append(f'<text x="{WIDTH - RIGHT + 4}" y="{y + 4:.1f}" font-size="11" fill="#666">'
                         f"{_esc(names)} {card.gb} GB</text>")
    parts += _series(panel, full, colour="#c0392b", dash=None, pts=pts, name="full fine-tune", fmt=human_gb)
    parts += _series(panel, lora, colour="#27864a", dash="6 3", pts=pts, name="LoRA", fmt=human_gb)
    legend_y = panel.top + 16
    parts.append(f'<line x1="{WIDTH - RIGHT - 230}" y1="{legend_y - 4}" x2="{WIDTH - RIGHT - 210}" '
                 f'y2="{legend_y - 4}" stroke="#c0392b" stroke-width="2"/>'
                 f'<text x="{WIDTH - RIGHT - 206}" y="{legend_y}" font-size="11" fill="#333">full fine-tune</text>'
                 f'<line x1="{WIDTH - RIGHT - 110}" y1="{legend_y - 4}" x2="{WIDTH - RIGHT - 90}" '
                 f'y2="{legend_y - 4}" stroke="#27864a" stroke-width="2" stroke-dasharray="6 3"/>'
                 f'<text x="{WIDTH - RIGHT - 86}" y="{legend_y}" font-size="11" fill="#333">LoRA r=16</text>')
    first, last = pts[0].label, pts[-1].label
    base = 2 * PANEL_HEIGHT + 12
    parts.append(f'<text x="{LEFT}" y="{base}" font-size="11" fill="#555">{_esc(first)}</text>')
    if n > 1:
        parts.append(f'<text x="{WIDTH - RIGHT}" y="{base}" font-size="11" text-anchor="end" fill="#555">'
                     f"{_esc(last)}</text>")
    parts.append("</svg>")
    return "".join(parts)
