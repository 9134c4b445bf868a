"""Turn the raw difference between two revisions into findings. Pure: no I/O.

Each analyser module exposes ``analyse(change, sources, rules) -> list[Finding]``
and is listed in ``ANALYSERS``. ``analyse_revision`` runs them all, isolates
failures (an analyser that raises yields an ``analysis.failed`` finding rather
than aborting the poll) and returns the findings most severe first.

Severities are not chosen in the analysers: they pick a stable *code* and the
severity comes from the rules table (``severity.toml``, overridable in config).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

from tracker.errors import HubRateLimited, HubUnavailable, RevisionGone
from tracker.findings.rules import SeverityRules
from tracker.model import Finding, RevisionChange, RevisionSources, sort_findings

Analyser = Callable[[RevisionChange, RevisionSources, SeverityRules], list[Finding]]

# Module names under tracker.findings; each exposes analyse(change, sources, rules).
ANALYSER_MODULES: tuple[str, ...] = (
    "files",
    "config",
    "generation",
    "tokenizer",
    "chat_template",
    "weights",
    "manifests",
    "gguf",
    "processor",
    "remote_code",
    "licence",
    "consistency",
)


def _load(name: str) -> Analyser | None:
    try:
        module = importlib.import_module(f"tracker.findings.{name}")
    except ModuleNotFoundError as exc:
        if exc.name == f"tracker.findings.{name}":
            return None  # not written yet
        raise
    return module.analyse


TRANSIENT = (HubUnavailable, HubRateLimited, RevisionGone)  # raised by the sources while strict


def analyse_revision(
    change: RevisionChange, sources: RevisionSources, rules: SeverityRules | None = None
) -> list[Finding]:
    rules = rules or SeverityRules.default()
    findings: list[Finding] = []
    for name in ANALYSER_MODULES:
        analyser = _load(name)
        if analyser is None:
            continue
        try:
            findings.extend(analyser(change, sources, rules))
        except TRANSIENT:
            raise  # the Hub failed, not the content: the revision stays pending and is read again
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
