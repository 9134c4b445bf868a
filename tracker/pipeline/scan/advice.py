"""Which revision to move to: the one rule ``tracker scan`` and ``tracker audit`` share. Contains no I/O.

Each revision on the branch (its first-parent line from the head, as far as it was read) is
weighed by the advisories open on it, severities compared critical first: fewest critical, then
fewest high, and so on down to info; at equal weight, the one whose open advisories hold fewer
risks (a pickle, remote code) is lighter than one that only lacks updates. Revisions whose open
*risks* weigh more than the pin's are never candidates. The suggestion is the lightest candidate
and, among equals, the newest.

It is a fixed point: the suggestion's risks weigh no more than the pin's, so its own candidates
are some of the pin's, among which it was already the lightest and newest; pinning it suggests
it again. A pin off the line (a side branch, or older than what was read) lighter than every
candidate is told to stay where it is.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence

from tracker.core.model import AdvisoryKind, Severity

_ORDER = (Severity.CRITICAL, Severity.HIGH, Severity.MODERATE, Severity.LOW, Severity.INFO)

Open = Sequence[tuple[Severity, str]]
"""The advisories open on a revision: (severity, kind) each."""


def weight(severities: Iterable[Severity]) -> tuple[int, ...]:
    """Severities as a comparable weight: (critical, high, moderate, low, info) counts; smaller is lighter."""
    counts = dict.fromkeys(_ORDER, 0)
    for severity in severities:
        counts[severity] += 1
    return tuple(counts[s] for s in _ORDER)


def risk_weight(advisories: Open) -> tuple[int, ...]:
    """The weight of the open risks alone."""
    return weight(s for s, kind in advisories if kind == AdvisoryKind.RISK)


def heft(advisories: Open) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The order revisions are compared in: all open advisories, then the open risks among them."""
    return weight(s for s, _ in advisories), risk_weight(advisories)


def suggest(branch: Sequence[tuple[str, Open]], *, pinned: tuple[str, Open] | None = None) -> str | None:
    """The revision to move to.

    ``branch`` lists the branch's revisions newest first, each with the advisories open on it;
    ``pinned`` is the revision the code or the cache holds, with its own, when it is known.
    None when nothing was read.
    """
    if not branch:
        return None
    bound = risk_weight(pinned[1]) if pinned is not None else None
    best: tuple[str, tuple[tuple[int, ...], tuple[int, ...]]] | None = None
    for sha, advisories in branch:
        if bound is not None and risk_weight(advisories) > bound:
            continue
        weighed = heft(advisories)
        if best is None or weighed < best[1]:  # strictly lighter: an equal older one never beats a newer one
            best = (sha, weighed)
    if pinned is not None:
        sha, advisories = pinned
        off_line = all(sha != s for s, _ in branch)
        if off_line and (best is None or heft(advisories) < best[1]):
            return sha
    return best[0] if best is not None else None


Held = Sequence[tuple[str, Severity, str]]
"""The advisories open on a revision by id: (advisory id, severity, kind) each."""


def counted(severities: Iterable[Severity]) -> str:
    """"1 critical, 2 high": how many of each severity, worst first."""
    counts = weight(severities)
    return ", ".join(f"{n} {s.value}" for n, s in zip(counts, _ORDER, strict=True) if n)


def explain(pin: Held, target: Held, line: Sequence[Collection[str]], *, older: bool) -> str:
    """Why the suggestion ``target`` beats the ``pin``: what it fixes, adds and keeps, by severity.

    ``line`` holds the ids open on each revision of the branch read; an advisory open on all of them is
    kept because no revision is without it, any other because each revision without it weighs more.
    ``older``: the suggestion is an older commit than the pin, which needs saying.
    """
    pin_ids, target_ids = {i for i, _, _ in pin}, {i for i, _, _ in target}
    fixed = [s for i, s, _ in pin if i not in target_ids]
    lacks = [s for i, s, kind in target if i not in pin_ids and kind != AdvisoryKind.RISK]
    risks = [s for i, s, kind in target if i not in pin_ids and kind == AdvisoryKind.RISK]
    kept = [(i, s) for i, s, _ in target if i in pin_ids]
    everywhere = [s for i, s in kept if line and all(i in ids for ids in line)]
    avoidable = [s for i, s in kept if not (line and all(i in ids for ids in line))]
    parts = []
    if fixed:
        parts.append(f"fixes {counted(fixed)}")
    if risks:
        parts.append(f"adds {counted(risks)} risk, lighter than what it fixes")
    if lacks:
        parts.append(f"lacks {counted(lacks)} update (a missing update weighs less than a risk)")
    if everywhere:
        parts.append(f"keeps {counted(everywhere)} (no revision without {'it' if len(everywhere) == 1 else 'them'})")
    if avoidable:
        one = len(avoidable) == 1
        parts.append(f"keeps {counted(avoidable)} (every revision without {'it' if one else 'them'} carries worse)")
    if not parts:
        parts.append("nothing open on either; the newest of the lightest revisions")
    if older:
        parts.append("an older commit than the pin: every newer revision carries worse")
    return "; ".join(parts)
