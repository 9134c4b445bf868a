"""The API's request and response models beyond OSV: the OpenAPI document is built from these."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field

__all__ = [
    "AUTH_ERRORS", "ERRORS", "DiffOut", "ErrorOut", "FindingOut", "LibrariesOut", "ReadyOut", "RemovedOut",
    "RepoOut", "ReposOut", "RevisionOut", "RevisionsOut", "RuleOut", "RuleRepoOut", "RulesOut", "SubscriptionIn",
    "SubscriptionOut", "TopFinding", "UnsubscribedOut", "WatchIn", "WatchOut",
]


class ErrorOut(BaseModel):
    code: int = Field(description="gRPC-style code, as OSV.dev answers: 3 invalid, 5 not found, 14 unavailable, "
                                  "16 unauthenticated")
    message: str


class RepoOut(BaseModel):
    repo: str
    branch: str
    state: str = Field(description="active, gone (deleted or made private after being read), gated, disabled, "
                                   "or not_found (never read)")
    every_seconds: float | None = Field(description="poll interval; null: the configured default")
    last_seen_sha: str | None
    last_polled_at: datetime | None
    last_error: str | None
    renamed_to: str | None


class ReposOut(BaseModel):
    repos: list[RepoOut]


class RuleRepoOut(BaseModel):
    repo: str
    missing_since: datetime | None = Field(None, description="since when the rule no longer matches it "
                                                             "(dropped after the grace)")


class RuleOut(BaseModel):
    id: int
    rule: str = Field(description="the rule as `tracker watch add --rule` takes it")
    max: int = Field(description="the most repos the rule holds")
    grace_seconds: float
    created_at: datetime
    evaluated_at: datetime | None
    matched: int | None = Field(description="models the last evaluation matched (more than max: capped)")
    capped: bool
    last_error: str | None
    repos: list[RuleRepoOut]


class RulesOut(BaseModel):
    rules: list[RuleOut]


class TopFinding(BaseModel):
    code: str
    severity: str
    summary: str


class RevisionOut(BaseModel):
    sha: str
    date: datetime | None
    title: str
    status: str = Field(description="pending, done, unreachable; not_read for a repo that is not watched")
    baseline: bool
    parent: str | None
    summary: str | None
    worst_severity: str | None
    findings: int | None
    top_findings: list[TopFinding]
    files: dict[str, list[str]]
    libraries: list[str] = Field(default_factory=list, description="what the revision is loaded with; empty when not recorded")


class RevisionsOut(BaseModel):
    repo: str
    watched: bool = Field(description="false: the newest commits read from the Hub, not analysed or stored")
    revisions: list[RevisionOut]


class FindingOut(BaseModel):
    code: str
    category: str
    severity: str
    summary: str
    path: str | None
    before: Any = None
    after: Any = None
    evidence: dict[str, Any]
    library: str | None = Field(None, description="the library whose analyser found it; null: any library")


class LibrariesOut(BaseModel):
    old: list[str]
    new: list[str]


class DiffOut(BaseModel):
    repo: str
    from_: str = Field(alias="from")
    to: str
    libraries: LibrariesOut = Field(description="what each side is loaded with (sentence-transformers, diffusers...)")
    findings: list[FindingOut]
    by_library: dict[str, list[FindingOut]] = Field(
        description="the same findings grouped by library ('any': the repo's files whatever loads them), "
                    "most severe group first")
    files: dict[str, Any]
    texts: dict[str, Any]

    model_config = {"populate_by_name": True}


class ReadyOut(BaseModel):
    status: Literal["ready", "not ready"]
    checks: dict[str, str]


class WatchIn(BaseModel):
    repo: str = Field(description="owner/name", max_length=200)
    branch: str = Field(default="main", min_length=1, max_length=200)
    every: str | None = Field(default=None, max_length=40, description="poll interval, e.g. 15m, 1h, 1d (1m..31d)")
    check: bool = Field(default=True, description="ask the Hub whether the repo exists first (404 with close "
                                                  "matches when it does not); false adds it unasked, as --no-check")


class WatchOut(BaseModel):
    repo: str
    branch: str
    every_seconds: float | None
    created: bool


class RemovedOut(BaseModel):
    removed: str


class SubscriptionIn(BaseModel):
    target: str = Field(description="a repo owner/name, an owner, or '*'", max_length=200)
    slack: str | None = Field(default=None, max_length=2000, description="a Slack incoming-webhook URL")
    webhook: str | None = Field(default=None, max_length=2000,
                                description="an HTTPS endpoint; alerts are signed per Standard Webhooks")
    min_severity: Literal["critical", "high", "moderate", "low", "info"] = "info"
    categories: list[str] = Field(default_factory=list, max_length=20)


class SubscriptionOut(BaseModel):
    id: int
    target: str
    kind: str
    url: str = Field(description="a Slack URL is a credential: only its host is shown")
    min_severity: str
    categories: list[str]
    created_at: datetime
    secret: str | None = Field(description="the webhook signing secret: shown in this answer only")


class UnsubscribedOut(BaseModel):
    removed: int
    dropped: int = Field(description="deliveries still pending that were dropped with it")


ERRORS: dict[int | str, dict[str, Any]] = {
    400: {"model": ErrorOut, "description": "malformed request"},
    404: {"model": ErrorOut, "description": "no such repo or revision"},
    503: {"model": ErrorOut, "description": "the Hub or the database cannot answer now"},
}
AUTH_ERRORS: dict[int | str, dict[str, Any]] = {401: {"model": ErrorOut, "description": "no valid bearer token"}}
