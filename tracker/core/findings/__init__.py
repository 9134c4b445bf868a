"""Turn the raw difference between two revisions into findings. Pure: no I/O.

Each analyser module exposes ``analyse(change, sources, rules) -> list[Finding]``,
registered by ``@analyser`` (:mod:`tracker.core.findings.registry`). ``analyse_revision`` runs them all, isolates
failures (an analyser that raises yields an ``analysis.failed`` finding rather
than aborting the poll) and returns the findings most severe first.

Severities are not chosen in the analysers: they pick a stable *code* and the
severity comes from the rules table (``severity.toml``, overridable in config).

Analysers register per library (``@analyser(library=...)``): one for a library runs when either side is
loaded with it (:func:`tracker.core.findings.libraries.detect_libraries`), and its findings carry
that library's name; one registered for ``None`` runs on every revision.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from tracker.core.errors import HubRateLimited, HubUnavailable, RevisionGone
from tracker.core.findings import libraries as lib
from tracker.core.findings.registry import registered
from tracker.core.findings.rules import SeverityRules
from tracker.core.model import Finding, RevisionChange, RevisionSources, Snapshot, sort_findings

Analyser = Callable[[RevisionChange, RevisionSources, SeverityRules], list[Finding]]

# Each analyser module registers its analyse() with @analyser (tracker/core/findings/registry.py) when it
# is imported; the package imports them here, by name, so a misspelt or removed one fails at import.
from tracker.core.findings import (  # noqa: E402  (after the names the analysers import from the package)
    chat_template,
    config,
    consistency,
    diffusers,
    exports,
    files,
    generation,
    gguf,
    licence,
    manifests,
    open_clip_config,
    processor,
    remote_code,
    sentence_transformers,
    sentencepiece,
    slow_tokenizer,
    timm_config,
    tokenizer,
    weights,
)

del (chat_template, config, consistency, diffusers, exports, files, generation, gguf, licence, manifests,
     open_clip_config, processor, remote_code, sentence_transformers, sentencepiece, slow_tokenizer, timm_config,
     tokenizer, weights)

# (module under tracker.core.findings, library), in run order: a library-specific analyser runs only
# when the library is on either side; transformers' analysers run always (each reads only its own
# files) and label their findings transformers; exports' runs where either side has an export.
ANALYSERS: tuple[tuple[str, str | None], ...] = tuple((r.name, r.library) for r in registered())
ALWAYS = frozenset({lib.TRANSFORMERS, lib.GGUF, None})  # their analysers look for their files themselves
ANALYSER_MODULES: tuple[str, ...] = tuple(name for name, _ in ANALYSERS)
_BY_NAME = {r.name: r for r in registered()}


def _load(name: str) -> Analyser:
    analyse: Analyser = _BY_NAME[name].analyse
    return analyse


TRANSIENT = (HubUnavailable, HubRateLimited, RevisionGone)  # raised by the sources while strict


def libraries_of(snapshot: Snapshot | None, sources: RevisionSources, side: str) -> tuple[str, ...]:
    """The libraries one side is loaded with (reads its README.md and config.json, both cached)."""
    if snapshot is None:
        return ()
    from tracker.core.diff import readme_front_matter

    return lib.detect_libraries(snapshot, lambda path: sources.text(side, path), readme_front_matter)


def analyse_revision(
    change: RevisionChange, sources: RevisionSources, rules: SeverityRules | None = None
) -> list[Finding]:
    rules = rules or SeverityRules.default()
    findings: list[Finding] = []
    present = set(libraries_of(change.new, sources, "new")) | set(libraries_of(change.old, sources, "old"))
    for name, library in ANALYSERS:
        if library not in ALWAYS and library not in present:
            continue
        analyser = _load(name)
        if not sources.allows(f"the {name} analysis"):
            continue  # the revision's CPU time is spent (the sources record what was skipped)
        try:
            found = analyser(change, sources, rules)
            findings.extend(f if f.library or not library else dataclasses.replace(f, library=library)
                            for f in found)
        except TRANSIENT:
            raise  # the Hub failed, not the content: the revision stays pending and is read again
        except MemoryError:
            raise  # never swallowed: the processor drops the revision's reads and completes it
        except Exception as exc:
            findings.append(
                rules.finding(
                    "analysis.failed",
                    "analysis",
                    f"{name} analysis failed: {type(exc).__name__}: {exc}",
                    evidence={"analyser": name},
                )
            )
    return sort_findings(findings)
