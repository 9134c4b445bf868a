"""Severity rules as data: a table from finding code to severity.

The default table is the union of the ``severity/*.toml`` files beside this
module, one per category, each documenting its codes; ``config/tracker.toml``
may override any code under ``[severity]``.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

from tracker.model import Finding, Severity


@dataclass(frozen=True)
class SeverityRules:
    table: Mapping[str, Severity]
    fallback: Severity = Severity.MODERATE
    overrides: Mapping[str, Severity] = field(default_factory=dict)

    @classmethod
    def default(cls) -> SeverityRules:
        table: dict[str, Severity] = {}
        folder = resources.files("tracker.findings").joinpath("severity")
        for entry in sorted(folder.iterdir(), key=lambda e: e.name):
            if entry.name.endswith(".toml"):
                data = tomllib.loads(entry.read_text("utf-8"))
                for code, value in data.get("severity", {}).items():
                    if code in table:
                        raise ValueError(f"severity code {code!r} is defined twice ({entry.name})")
                    table[code] = Severity(value)
        return cls(table=table)

    def with_overrides(self, overrides: Mapping[str, str]) -> SeverityRules:
        """Apply a config ``[severity]`` table; an unknown severity name is a ValueError."""
        parsed = {code: Severity(value) for code, value in overrides.items()}
        return SeverityRules(table=self.table, fallback=self.fallback, overrides={**self.overrides, **parsed})

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
        """Build a finding whose severity comes from the table."""
        return Finding(
            code=code,
            category=category,
            severity=self.severity(code),
            summary=summary,
            path=path,
            before=before,
            after=after,
            evidence=dict(evidence or {}),
        )
