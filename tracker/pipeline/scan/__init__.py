"""``tracker scan``: find the Hub models a codebase loads, and report what changed upstream since each pin.

``finder`` walks a tree and parses (never runs) Python, notebooks and config
files; ``source`` is the one door to the tracker's advisories; ``report``
renders text, JSON and SARIF and decides the exit status.
"""

from tracker.pipeline.scan.finder import find_references
from tracker.pipeline.scan.model import AdvisoryHit, Found, PinStatus, Reference, Skipped, SourceKind

__all__ = ["AdvisoryHit", "Found", "PinStatus", "Reference", "Skipped", "SourceKind", "find_references"]
