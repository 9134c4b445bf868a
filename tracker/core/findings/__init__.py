"""Turn the raw difference between two revisions into findings. Pure: no I/O.

Each analyser module exposes ``analyse(change, inputs, rules) -> list[Finding]``,
registered by ``@analyser`` (:mod:`tracker.core.findings.registry`). It reads the two sides only
through the :class:`~tracker.core.findings.inputs.RevisionInputs` it is handed: bytes, headers and
budget facts the pipeline fetched before (``tracker/pipeline/analysis.py``); it holds no Hub handle.
``analyse_revision`` runs them all on one revision's inputs, isolates failures (an analyser that
raises yields an ``analysis.failed`` finding rather than aborting the poll) and returns the
findings most severe first.

Severities are not chosen in the analysers: they pick a stable *code* and the
severity comes from the rules table (``severity.toml``, overridable in config).

Analysers register per library (``@analyser(library=...)``): one for a library runs when either side is
loaded with it (:func:`tracker.core.findings.libraries.detect_libraries`), and its findings carry
that library's name; one registered for ``None`` runs on every revision.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any, Protocol

# Each analyser module registers its analyse() with @analyser (tracker/core/findings/registry.py) when it
# is imported; the package imports them here, by name, so a misspelt or removed one fails at import.
from tracker.core.findings import (
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
from tracker.core.findings import libraries as lib
from tracker.core.findings.inputs import NotRead, RevisionInputs
from tracker.core.findings.registry import Registered, registered
from tracker.core.findings.rules import SeverityRules
from tracker.core.model import Finding, RevisionChange, Snapshot, sort_findings
from tracker.core.templates import TemplateRenderer

del (chat_template, config, consistency, diffusers, exports, files, generation, gguf, licence, manifests,
     open_clip_config, processor, remote_code, sentence_transformers, sentencepiece, slow_tokenizer, timm_config,
     tokenizer, weights)

# (module under tracker.core.findings, library), in run order: a library-specific analyser runs only
# when the library is on either side; transformers' analysers run always (each reads only its own
# files) and label their findings transformers; exports' runs where either side has an export.
ANALYSERS: tuple[tuple[str, str | None], ...] = tuple((r.name, r.library) for r in registered())
ALWAYS = frozenset({lib.TRANSFORMERS, lib.GGUF, None})  # their analysers look for their files themselves
ANALYSER_MODULES: tuple[str, ...] = tuple(name for name, _ in ANALYSERS)


class TextReader(Protocol):
    """What library detection reads: a side's small files (RevisionInputs, or the pipeline's reader)."""

    def text(self, side: str, path: str) -> bytes | None: ...


def libraries_of(snapshot: Snapshot | None, inputs: TextReader, side: str) -> tuple[str, ...]:
    """The libraries one side is loaded with (reads its README.md and config.json)."""
    if snapshot is None:
        return ()
    from tracker.core.diff import readme_front_matter

    return lib.detect_libraries(snapshot, lambda path: inputs.text(side, path), readme_front_matter)


def libraries_present(change: RevisionChange, inputs: TextReader) -> set[str]:
    """The libraries either side is loaded with (new side first, as the analysis reads them)."""
    return set(libraries_of(change.new, inputs, "new")) | set(libraries_of(change.old, inputs, "old"))


def runs_for(entry: Registered, present: set[str]) -> bool:
    """Whether ``entry`` runs on a revision loaded with ``present``."""
    return entry.library in ALWAYS or entry.library in present


def call_analyser(entry: Registered, change: RevisionChange, inputs: RevisionInputs, rules: SeverityRules,
                  renderer: TemplateRenderer | None = None, *, only: Sequence[Any] | None = None) -> list[Finding]:
    """``entry``'s findings on ``inputs`` (``only``: those of these parts); whatever it raises propagates."""
    kwargs: dict[str, Any] = {"renderer": renderer} if entry.renders else {}
    if only is not None:
        kwargs["only"] = only
    found: list[Finding] = entry.analyse(change, inputs, rules, **kwargs)
    return found


def labelled(entry: Registered, found: list[Finding]) -> list[Finding]:
    """Findings of a library's analyser carry the library."""
    return [f if f.library or not entry.library else dataclasses.replace(f, library=entry.library) for f in found]


def failed(entry: Registered, exc: BaseException, rules: SeverityRules) -> Finding:
    """The ``analysis.failed`` finding of an analyser that raised."""
    return rules.finding("analysis.failed", "analysis", f"{entry.name} analysis failed: {type(exc).__name__}: {exc}",
                         evidence={"analyser": entry.name})


def run_analyser(entry: Registered, change: RevisionChange, inputs: RevisionInputs, rules: SeverityRules,
                 renderer: TemplateRenderer | None = None) -> list[Finding]:
    """One analyser's findings, labelled with its library; a failure is one ``analysis.failed`` finding.

    :class:`NotRead` (it read what ``inputs`` does not hold) and ``MemoryError`` propagate.
    """
    try:
        return labelled(entry, call_analyser(entry, change, inputs, rules, renderer))
    except (NotRead, MemoryError):
        raise  # NotRead: the pipeline fetches what was wanted and runs it again; MemoryError: never swallowed
    except Exception as exc:
        return [failed(entry, exc, rules)]


def analyse_revision(change: RevisionChange, inputs: RevisionInputs, rules: SeverityRules | None = None, *,
                     renderer: TemplateRenderer | None = None) -> list[Finding]:
    """Every analyser that runs for the revision's libraries, in run order, on ``inputs`` alone; most severe first.

    An analysis the CPU budget did not allow is skipped (the pipeline recorded it). ``renderer``
    renders chat templates (the analysers that render fail without one, as ``analysis.failed``).
    """
    rules = rules or SeverityRules.default()
    present = libraries_present(change, inputs)
    findings: list[Finding] = []
    for entry in registered():
        if runs_for(entry, present) and inputs.allows(f"the {entry.name} analysis"):
            findings.extend(run_analyser(entry, change, inputs, rules, renderer))
    return sort_findings(findings)
