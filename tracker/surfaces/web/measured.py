"""The measurement of ``tracker verify`` on the revision and advisory pages: a few figures and a small
inline-SVG histogram of the per-sample cosines between the two revisions. Pure.

The figures come from a stored record's ``database_specific.measured``: read as data, each number
checked (finite, in range), each string left to the template's escaping; the SVG holds only numbers
the code computed and fixed labels. No script, nothing from another host, no inline ``style``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tracker.core.verify import histogram

WIDTH = 360
HEIGHT = 120
LEFT = 28
BOTTOM = 22
TOP = 8
BINS = 10
MAX_VALUES = 1000  # cosines drawn at most (a record says how many samples it measured)

SIDE_LABELS = {"index": "Index side", "query": "Query side", "hidden": "Hidden states"}


@dataclass(frozen=True)
class SideLine:
    label: str
    mean: float
    minimum: float
    moved: int
    samples: int


@dataclass(frozen=True)
class MeasuredView:
    verdict: str
    reason: str | None
    kind: str
    samples: int | None
    sides: tuple[SideLine, ...]
    dimension: tuple[Any, Any] | None
    libraries: str
    svg: str | None


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def _count(value: Any) -> int:
    number = _number(value)
    return int(number) if number is not None and number >= 0 else 0


def cosines_of(side: Any) -> list[float]:
    values = side.get("cosines") if isinstance(side, Mapping) else None
    if not isinstance(values, list):
        return []
    numbers = (_number(v) for v in values[:MAX_VALUES])
    return [v for v in numbers if v is not None and -1.0 <= v <= 1.0]


def histogram_svg(values: Sequence[float], *, title: str) -> str | None:
    """Bars of how many samples fall in each cosine bin, lowest cosine at the left, 1.0 at the right."""
    bars = histogram(values, bins=BINS)
    if not bars:
        return None
    tallest = max(b.count for b in bars) or 1
    inner_w, inner_h = WIDTH - LEFT - 8, HEIGHT - TOP - BOTTOM
    width = inner_w / len(bars)
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" '
             f'class="histogram" aria-label="{_attr(title)}">', f"<title>{_attr(title)}</title>",
             f'<line x1="{LEFT}" y1="{TOP + inner_h}" x2="{LEFT + inner_w}" y2="{TOP + inner_h}" stroke="#888"/>']
    for number, bar in enumerate(bars):
        height = inner_h * bar.count / tallest
        x = LEFT + number * width
        parts.append(f'<rect x="{x + 1:.1f}" y="{TOP + inner_h - height:.1f}" width="{width - 2:.1f}" '
                     f'height="{height:.1f}" fill="#1f5fbf"><title>{bar.count} sample'
                     f'{"" if bar.count == 1 else "s"} with cosine {bar.low:.4f} to {bar.high:.4f}</title></rect>')
    parts.append(f'<text x="{LEFT}" y="{HEIGHT - 6}" font-size="10" fill="#555">{bars[0].low:.3f}</text>')
    parts.append(f'<text x="{LEFT + inner_w}" y="{HEIGHT - 6}" font-size="10" text-anchor="end" fill="#555">1.000</text>')
    parts.append(f'<text x="2" y="{TOP + 10}" font-size="10" fill="#555">{tallest}</text>')
    parts.append("</svg>")
    return "".join(parts)


def _attr(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")


def measured_view(measured: Any) -> MeasuredView | None:
    """What the pages show of a ``database_specific.measured`` object; None when there is none."""
    if not isinstance(measured, Mapping) or not isinstance(measured.get("verdict"), str):
        return None
    sides = []
    for name, label in SIDE_LABELS.items():
        side = measured.get(name)
        if isinstance(side, Mapping):
            sides.append(SideLine(label, _number(side.get("mean_cosine")) or 0.0,
                                  _number(side.get("min_cosine")) or 0.0, _count(side.get("moved")),
                                  _count(side.get("samples"))))
    chart_side = next((measured.get(n) for n in ("index", "hidden") if isinstance(measured.get(n), Mapping)), None)
    dimension = measured.get("dimension")
    libraries = measured.get("libraries")
    return MeasuredView(
        verdict=measured["verdict"],
        reason=measured.get("reason") if isinstance(measured.get("reason"), str) else None,
        kind=str(measured.get("kind") or ""),
        samples=_count(measured.get("samples")) if "samples" in measured else None,
        sides=tuple(sides),
        dimension=(dimension.get("before"), dimension.get("after")) if isinstance(dimension, Mapping) else None,
        libraries=", ".join(f"{k} {v}" for k, v in sorted(libraries.items())) if isinstance(libraries, Mapping) else "",
        svg=histogram_svg(cosines_of(chart_side), title="Per-sample cosine between the two revisions"),
    )



def revision_measured(measured: Sequence[Any]) -> MeasuredView | None:
    """The first measurement attached to the revision's advisories (``database_specific.measured`` of each)."""
    for value in measured:
        view = measured_view(value)
        if view is not None:
            return view
    return None
