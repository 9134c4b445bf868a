"""Which revision to move to: the one rule ``tracker scan`` and ``tracker audit`` share. Contains no I/O.

The suggestion depends on the branch alone, never on where the pin is, so it is a fixed
point: pinning the suggested revision suggests that same revision again. On the branch (its
first-parent line from the head, as far as it was read), each revision is weighed by its open
advisories, critical first: fewest critical, then fewest high, and so on down to info. The
lightest wins and, among equals, the newest. A pin off that line (a side branch, or a commit
older than what was read) whose own open advisories weigh less than the best on the line is
told to stay where it is: the suggestion never carries a worse open risk than the pin.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from tracker.model import Severity

_ORDER = (Severity.CRITICAL, Severity.HIGH, Severity.MODERATE, Severity.LOW, Severity.INFO)


def weight(severities: Iterable[Severity]) -> tuple[int, ...]:
    """Open advisories as a comparable weight: (critical, high, moderate, low, info) counts; smaller is lighter."""
    counts = dict.fromkeys(_ORDER, 0)
    for severity in severities:
        counts[severity] += 1
    return tuple(counts[s] for s in _ORDER)


def suggest(branch: Sequence[tuple[str, Sequence[Severity]]], *,
            pinned: tuple[str, Sequence[Severity]] | None = None) -> str | None:
    """The revision to move to.

    ``branch`` lists the branch's revisions newest first, each with the severities of the
    advisories open on it; ``pinned`` is the revision the code or the cache holds, with its
    own, when it is known. None when nothing was read.
    """
    best: tuple[str, tuple[int, ...]] | None = None
    for sha, severities in branch:
        heft = weight(severities)
        if best is None or heft < best[1]:  # strictly lighter: an equal older one never beats a newer one
            best = (sha, heft)
    if best is None:
        return None
    if pinned is not None:
        sha, severities = pinned
        if all(sha != s for s, _ in branch) and weight(severities) < best[1]:
            return sha
    return best[0]
