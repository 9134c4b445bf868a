"""Watch rules as data: a family of models (an org, a library above a download count...) watched as one.

A rule is a few ``key=value`` terms, all of which must hold::

    author=intfloat
    library=sentence-transformers downloads>=10000
    pipeline_tag=text-generation author=meta-llama

:func:`parse_rule` reads one (pure); :class:`RuleRow` is a stored rule. The store keeps them
(``tracker.adapters.store.rules``); ``tracker.pipeline.watchrules`` evaluates them against the Hub.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from tracker.core.errors import ConfigError
from tracker.core.model import validate_repo_id

DEFAULT_MAX = 1000
DEFAULT_GRACE = 86400.0  # a repo the rule stopped matching is dropped after this long
MAX_CAP = 100_000
KEYS = ("author", "library", "pipeline_tag", "downloads")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]{0,99}")
_TERM = re.compile(r"(?P<key>[a-z_]+)\s*(?P<op>>=|=)\s*(?P<value>\S+)")


@dataclass(frozen=True)
class WatchRule:
    """A parsed rule: the Hub listing filters it stands for."""

    author: str | None = None
    library: str | None = None
    pipeline_tag: str | None = None
    downloads_min: int | None = None

    @property
    def text(self) -> str:
        """The rule written the one canonical way (terms in a fixed order)."""
        terms = [f"{k}={v}" for k, v in (("author", self.author), ("library", self.library),
                                          ("pipeline_tag", self.pipeline_tag)) if v]
        if self.downloads_min is not None:
            terms.append(f"downloads>={self.downloads_min}")
        return " ".join(terms)

    def to_json(self) -> dict[str, Any]:
        return {"author": self.author, "library": self.library, "pipeline_tag": self.pipeline_tag,
                "downloads_min": self.downloads_min}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> WatchRule:
        return cls(author=data.get("author"), library=data.get("library"), pipeline_tag=data.get("pipeline_tag"),
                   downloads_min=data.get("downloads_min"))

    def query(self) -> list[tuple[str, str]]:
        """The ``GET /api/models`` parameters (huggingface_hub's ``list_models`` names: ``filter`` holds the library)."""
        params: list[tuple[str, str]] = []
        if self.author:
            params.append(("author", self.author))
        if self.library:
            params.append(("filter", self.library))
        if self.pipeline_tag:
            params.append(("pipeline_tag", self.pipeline_tag))
        if self.downloads_min is not None:
            params += [("sort", "downloads"), ("direction", "-1"), ("expand", "downloads")]
        return params


def parse_rule(text: str) -> WatchRule:
    """``author=intfloat downloads>=10000`` -> WatchRule; a clear ConfigError for anything else."""
    if len(text) > 300:
        raise ConfigError("a rule is at most 300 characters")
    values: dict[str, str] = {}
    for term in text.split():
        match = _TERM.fullmatch(term)
        if match is None:
            raise ConfigError(f"rule term {term!r:.60}: write key=value, or downloads>=N "
                              f"(keys: {', '.join(KEYS)})")
        key, op, value = match["key"], match["op"], match["value"]
        if key not in KEYS:
            raise ConfigError(f"rule term {term!r:.60}: unknown key {key!r} (keys: {', '.join(KEYS)})")
        if key in values:
            raise ConfigError(f"rule term {term!r:.60}: {key} is given twice")
        if (key == "downloads") != (op == ">="):
            raise ConfigError(f"rule term {term!r:.60}: " + ("write downloads>=N" if key == "downloads"
                                                             else f"write {key}=VALUE"))
        values[key] = value
    if not values:
        raise ConfigError("an empty rule: give author=, library= or pipeline_tag= (and downloads>=N)")
    if not {"author", "library", "pipeline_tag"} & values.keys():
        raise ConfigError("a rule needs author=, library= or pipeline_tag= (downloads>=N alone would list the "
                          "whole Hub)")
    if "author" in values:
        try:
            validate_repo_id(f"{values['author']}/x")
        except ValueError as exc:
            raise ConfigError(f"rule: author={values['author']!r:.60} is not a Hub user or org name") from exc
    for key in ("library", "pipeline_tag"):
        if key in values and not _NAME.fullmatch(values[key]):
            raise ConfigError(f"rule: {key}={values[key]!r:.60} is not a Hub tag (letters, digits, - _ .)")
    downloads: int | None = None
    if "downloads" in values:
        if not values["downloads"].isdigit() or len(values["downloads"]) > 12:
            raise ConfigError(f"rule: downloads>={values['downloads']!r:.20} must be a whole number")
        downloads = int(values["downloads"])
    return WatchRule(author=values.get("author"), library=values.get("library"),
                     pipeline_tag=values.get("pipeline_tag"), downloads_min=downloads)


@dataclass(frozen=True)
class RuleRow:
    """A stored rule, with what its last evaluation found."""

    id: int
    rule: WatchRule
    max_repos: int
    grace_seconds: float
    created_at: datetime
    evaluated_at: datetime | None
    matched: int | None
    capped: bool
    last_error: str | None

    @property
    def text(self) -> str:
        return self.rule.text


__all__ = ["DEFAULT_GRACE", "DEFAULT_MAX", "KEYS", "MAX_CAP", "RuleRow", "WatchRule", "parse_rule"]
