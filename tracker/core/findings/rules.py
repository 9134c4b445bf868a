"""Severity rules as data: a table from finding code to severity and the reason for it.

The default table is the union of the ``severity/*.toml`` files beside this
module, one per category, each line ``"code" = { severity = "...", why = "..." }``
(the policy behind them is docs/findings.md); ``config/tracker.toml`` may override
any code's severity under ``[severity]``.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Any, NamedTuple

from tracker.core.bounded import cap_evidence
from tracker.core.escaping import escape_controls
from tracker.core.model import Finding, Severity


class CodePolicy(NamedTuple):
    """A code's default severity and the one line saying why it has it."""

    severity: Severity
    why: str


def parse_policy(name: str, text: str, into: dict[str, CodePolicy]) -> None:
    """Add one ``severity/*.toml`` file's codes to ``into``; a malformed line is a ValueError."""
    for code, value in tomllib.loads(text).get("severity", {}).items():
        if code in into:
            raise ValueError(f"severity code {code!r} is defined twice ({name})")
        if not isinstance(value, dict) or set(value) != {"severity", "why"} or not str(value["why"]).strip():
            raise ValueError(f'{name}: {code!r} must be {{ severity = "...", why = "..." }}')
        into[code] = CodePolicy(Severity(value["severity"]), str(value["why"]))


@cache
def _default_policy() -> dict[str, CodePolicy]:
    policy: dict[str, CodePolicy] = {}
    folder = resources.files("tracker.core.findings").joinpath("severity")
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if entry.name.endswith(".toml"):
            parse_policy(entry.name, entry.read_text("utf-8"), policy)
    return policy


def severity_policy(overrides: Mapping[str, str] | None = None) -> dict[str, CodePolicy]:
    """Every known finding code -> (severity, why), ``[severity]`` overrides applied.

    An overridden code keeps its reason, prefixed so a reader knows the severity
    is this deployment's choice. An unknown severity name is a ValueError.
    """
    policy = dict(_default_policy())
    for code, value in (overrides or {}).items():
        default = policy.get(code)
        origin = f"default {default.severity.value}: {default.why}" if default else "not a default code"
        policy[code] = CodePolicy(Severity(value), f"set by this deployment's [severity] table ({origin})")
    return policy


@dataclass(frozen=True)
class SeverityRules:
    table: Mapping[str, Severity]
    fallback: Severity = Severity.MODERATE
    overrides: Mapping[str, Severity] = field(default_factory=dict)

    @classmethod
    def default(cls) -> SeverityRules:
        return cls(table={code: p.severity for code, p in _default_policy().items()})

    def with_overrides(self, overrides: Mapping[str, Severity | str]) -> SeverityRules:
        """Apply a config ``[severity]`` table; an unknown severity name is a ValueError."""
        parsed = {code: Severity(value) for code, value in overrides.items()}
        return SeverityRules(table=self.table, fallback=self.fallback, overrides={**self.overrides, **parsed})

    def why(self, code: str) -> str:
        """The default's reason for a code's severity ("" for a code the defaults do not know)."""
        default = _default_policy().get(code)
        return default.why if default else ""

    def severity(self, code: str) -> Severity:
        if code in self.overrides:
            return self.overrides[code]
        return self.table.get(code, self.fallback)

    def finding(
        self,
        code: str,
        category: str,
        summary: str,
        *,
        path: str | None = None,
        before: Any = None,
        after: Any = None,
        evidence: Mapping[str, Any] | None = None,
    ) -> Finding:
        """Build a finding whose severity comes from the table.

        The summary is text for reading: upstream names in it (paths, tokens) have their control
        and bidi characters escaped here, once, for every place that shows it.
        """
        return Finding(
            code=code,
            category=category,
            severity=self.severity(code),
            summary=escape_controls(summary),
            path=path,
            before=before,
            after=after,
            evidence=cap_evidence(evidence or {}),
        )
