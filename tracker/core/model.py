"""The vocabulary shared by every layer: frozen data, no I/O.

Everything here is plain data that the pure core (findings, estimator,
advisories) takes in and gives back, and that the edges (Hub adapter, store,
CLI, API) translate to and from their own formats.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, NewType

if TYPE_CHECKING:
    from tracker.core.advisory.record import Advisory

RepoId = NewType("RepoId", str)
CommitSha = NewType("CommitSha", str)

SHA_RE = re.compile(r"^[0-9a-f]{40}\Z")

# Hub rules for a repo name: letters, digits, '-', '_', '.'; no '--' or '..';
# may not start or end with '-' or '.'; at most 96 characters per part.
_REPO_PART = r"(?!.*(?:--|\.\.))[A-Za-z0-9](?:[A-Za-z0-9._-]{0,94}[A-Za-z0-9])?"
REPO_ID_RE = re.compile(rf"{_REPO_PART}/{_REPO_PART}")  # use fullmatch: "$" would accept a trailing newline


class RepoState(enum.StrEnum):
    """Where a watched repo stands on the Hub (stored as these values)."""

    ACTIVE = "active"
    GONE = "gone"  # was read before, now 404: deleted or made private
    GATED = "gated"
    DISABLED = "disabled"
    NOT_FOUND = "not_found"  # never read: a typo, or private/gated without a token


class PollOutcome(enum.StrEnum):
    """What one poll of one repo came to."""

    UNCHANGED = "unchanged"
    NEW = "new"
    BASELINE = "baseline"
    DEFERRED = "deferred"  # rate limited: skipped until the Hub's reset
    GONE = "gone"
    GATED = "gated"
    DISABLED = "disabled"
    NOT_FOUND = "not_found"
    BUSY = "busy"  # another process holds the repo's lease
    ERROR = "error"


class RevisionStatus(enum.StrEnum):
    PENDING = "pending"
    DONE = "done"
    UNREACHABLE = "unreachable"  # rewritten away before it was read


class AdvisoryKind(enum.StrEnum):
    """Revision advisories are ``update`` or ``risk``; the others are about the repo itself."""

    UPDATE = "update"
    RISK = "risk"
    HISTORY_REWRITTEN = "history_rewritten"
    RENAMED = "renamed"
    DELETED = "deleted"
    RECREATED = "recreated"
    GATED = "gated"
    INHERITED = "inherited"  # a base model's update that a derivative has not taken (tracker/core/inherit.py)
    COMMIT_FLOOD = "commit_flood"  # more new commits at once than [poll] max_new_commits: the rest read later


def validate_repo_id(value: str) -> RepoId:
    """Return ``value`` as a RepoId, or raise ValueError saying what is wrong with it."""
    if not isinstance(value, str) or not value:
        raise ValueError("repo id is empty; expected 'owner/name'")
    if len(value) > 2 * 96 + 1:  # checked first: the error message quotes the value
        raise ValueError(f"invalid repo id {value[:60]!r}...: longer than 193 characters")
    if value.count("/") != 1:
        raise ValueError(f"invalid repo id {value!r}: expected exactly one '/' as in 'owner/name'")
    if not REPO_ID_RE.fullmatch(value):
        raise ValueError(
            f"invalid repo id {value!r}: each part must be 1-96 letters, digits, '-', '_' or '.', "
            "not start or end with '-' or '.', and not contain '--' or '..'"
        )
    return RepoId(value)


class Severity(enum.Enum):
    """How much a finding matters; ordered, ``CRITICAL`` worst."""

    CRITICAL = "critical"
    HIGH = "high"
    MODERATE = "moderate"
    LOW = "low"
    INFO = "info"

    @property
    def rank(self) -> int:
        """0 for critical .. 4 for info: sort ascending for most severe first."""
        return _SEVERITY_ORDER.index(self)

    def at_least(self, other: Severity) -> bool:
        return self.rank <= other.rank

    @classmethod
    def worst(cls, values: Iterable[Severity]) -> Severity | None:
        values = list(values)
        return min(values, key=lambda s: s.rank) if values else None


_SEVERITY_ORDER = [Severity.CRITICAL, Severity.HIGH, Severity.MODERATE, Severity.LOW, Severity.INFO]
SEVERITY_NAMES: tuple[str, ...] = tuple(s.value for s in _SEVERITY_ORDER)  # worst first: CLI choices, filters


class OutputFormat(enum.StrEnum):
    """What a report can be written as (``--format`` of scan, audit and their API twins)."""

    TEXT = "text"
    JSON = "json"
    SARIF = "sarif"  # SARIF 2.1.0, for code-scanning UIs
    CYCLONEDX = "cyclonedx"  # a CycloneDX 1.6 ML-BOM


class ChannelKind(enum.StrEnum):
    """Where a subscription's alerts go (each kind's channel: tracker/adapters/delivery/channels.py)."""

    SLACK = "slack"
    WEBHOOK = "webhook"


OUTPUT_FORMATS: tuple[str, ...] = tuple(f.value for f in OutputFormat)


class Category(enum.StrEnum):
    """The part of a repo a finding is about: the one list of finding categories.

    Analysers, repo events and lookups emit these; subscriptions, feeds, the pages' filters and
    the CLI's choices derive from this enum, so a category anything can emit is one a user can
    subscribe to. A finding with a category outside it is refused when it is built.
    """

    ADAPTER = "adapter"  # PEFT adapter_config.json
    ANALYSIS = "analysis"  # the tracker's own analysis could not finish
    CHAT_TEMPLATE = "chat_template"
    CODE = "code"  # remote code (*.py, auto_map)
    CONFIG = "config"
    CONSISTENCY = "consistency"
    DEPENDENCIES = "dependencies"  # OSV lookups of the packages a revision asks for
    DIFFUSERS = "diffusers"
    EMBEDDINGS = "embeddings"  # the stored-vectors verdict
    ESTIMATE = "estimate"
    EXPORTS = "exports"  # ONNX, OpenVINO
    FILES = "files"
    GENERATION = "generation"
    GGUF = "gguf"
    LICENCE = "licence"
    MANIFEST = "manifest"  # shard indexes
    PREPROCESSING = "preprocessing"
    PROCESSOR = "processor"
    REPO = "repo"  # repo events: rewritten, renamed, deleted, gated...
    SENTENCE_TRANSFORMERS = "sentence_transformers"
    TOKENIZER = "tokenizer"
    UPSTREAM = "upstream"  # kept for subscriptions made when upstream.* findings had their own category
    VERIFY = "verify"  # a measurement (tracker verify) that contradicts the inferred verdict
    WEIGHTS = "weights"


CATEGORIES: tuple[str, ...] = tuple(c.value for c in Category)


@dataclass(frozen=True)
class FileEntry:
    """One file of a revision as the Hub's tree lists it; never its content."""

    path: str
    size: int
    blob_id: str  # git blob sha1 (of the LFS pointer for LFS files)
    lfs_sha256: str | None = None  # sha256 of the real content, for LFS files
    xet_hash: str | None = None

    @property
    def content_id(self) -> str:
        """What identifies the content: the LFS sha256 where there is one, else the blob id."""
        return self.lfs_sha256 or self.blob_id

    @property
    def is_lfs(self) -> bool:
        return self.lfs_sha256 is not None


@dataclass(frozen=True)
class Snapshot:
    """The file list of one revision."""

    files: tuple[FileEntry, ...]

    def by_path(self) -> dict[str, FileEntry]:
        return {f.path: f for f in self.files}

    def get(self, path: str) -> FileEntry | None:
        for f in self.files:
            if f.path == path:
                return f
        return None


@dataclass(frozen=True)
class Commit:
    sha: CommitSha
    date: datetime  # UTC-aware
    title: str
    message: str = ""
    authors: tuple[str, ...] = ()
    parents: tuple[CommitSha, ...] = ()


@dataclass(frozen=True)
class Finding:
    """One meaningful upstream change, with its evidence.

    ``code`` is stable (``generation.eos_token_id_changed``); ``category`` is the
    part of the repo it is about (config, generation, tokenizer, chat_template,
    weights, code, licence, consistency, estimate, repo, files, dependencies).
    ``before``/``after`` are JSON-able values; ``evidence`` holds anything else
    a reader needs (a rendered-prompt diff, an example of drift, ...).
    """

    code: str
    category: str
    severity: Severity
    summary: str
    path: str | None = None
    before: Any = None
    after: Any = None
    evidence: Mapping[str, Any] = field(default_factory=dict)
    library: str | None = None  # the library whose analyser found it (tracker/core/findings/libraries.py); None: any

    def __post_init__(self) -> None:
        if self.category not in CATEGORIES:  # a typo in an analyser fails its first finding, not a filter later
            raise ValueError(f"unknown finding category {self.category!r}: add it to Category (tracker/core/model.py)")

    def to_json(self) -> dict[str, Any]:
        """Strict JSON: a NaN or Infinity read from an upstream file is kept as text (``json_safe``); evidence
        strings are cut, their full size stated (``cap_evidence``)."""
        from tracker.core.bounded import cap_evidence, json_safe

        return {
            "code": self.code,
            "category": self.category,
            "severity": self.severity.value,
            "summary": self.summary,
            "path": self.path,
            "before": json_safe(self.before),
            "after": json_safe(self.after),
            "evidence": json_safe(cap_evidence(self.evidence)),
            "library": self.library,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Finding:
        return cls(
            code=data["code"],
            category=data["category"],
            severity=Severity(data["severity"]),
            summary=data["summary"],
            path=data.get("path"),
            before=data.get("before"),
            after=data.get("after"),
            evidence=data.get("evidence") or {},
            library=data.get("library"),
        )


def clip_words(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` characters at a word boundary, with an ellipsis when cut.

    A cut falls back to the middle of a word only when the last space is in the first half.
    """
    if len(text) <= limit:
        return text
    cut = text[: max(limit - 1, 0)]
    if not text[len(cut)].isspace():
        space = cut.rfind(" ")
        if space >= limit // 2:
            cut = cut[:space]
    return cut.rstrip() + "…"


def sort_findings(findings: Iterable[Finding]) -> list[Finding]:
    """Most severe first, then by category, code and path, so output is stable."""
    return sorted(findings, key=lambda f: (f.severity.rank, f.category, f.code, f.path or ""))


@dataclass(frozen=True)
class RevisionChange:
    """The two sides of a change, as analysers receive them."""

    repo: RepoId
    old: Snapshot | None  # None for the first revision read (the baseline)
    new: Snapshot
    old_sha: CommitSha | None
    new_sha: CommitSha


class AdvisoryEventType(enum.StrEnum):
    """What happened to an advisory, as feeds and alerts announce it (Standard Webhooks event types)."""

    CREATED = "advisory.created"
    UPDATED = "advisory.updated"
    WITHDRAWN = "advisory.withdrawn"


@dataclass(frozen=True)
class AdvisoryEvent:
    """One announceable change to an advisory, produced inside the transaction that stores it.

    Only changes a reader cares about make an event: a new advisory, a changed summary,
    severity, range or fix, a withdrawal. The ``versions`` list growing as new commits
    arrive, or a bare ``modified`` bump, does not.
    """

    type: AdvisoryEventType
    advisory_id: str
    repo_id: RepoId
    severity: str  # critical|high|moderate|low|info
    categories: tuple[str, ...]  # the findings' categories (config, tokenizer, chat_template, ...)
    record: Mapping[str, Any]  # the OSV JSON as served, announced as it is


@dataclass(frozen=True)
class RawDiff:
    """The raw difference between two revisions: files added/removed/changed, and text diffs by path."""

    files: Mapping[str, list[dict[str, Any]]]  # {"added": [...], "removed": [...], "changed": [...]}
    texts: Mapping[str, Any]

    def touched(self, *kinds: str) -> set[str]:
        """Paths added, removed or changed (or only the ``kinds`` given)."""
        return {e["path"] for k in (kinds or ("added", "removed", "changed")) for e in self.files.get(k, [])}

    def to_json(self) -> dict[str, Any]:
        return {"files": dict(self.files), "texts": dict(self.texts)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RawDiff:
        files = data.get("files") or {}
        return cls(files={k: list(files.get(k) or []) for k in ("added", "removed", "changed")},
                   texts=dict(data.get("texts") or {}))


Figure = float | int | str | None
"""A size an estimate stores, in GB; a non-finite one as its name (``json_safe``)."""

_COUNTS = ("params", "active_params", "checkpoint_params", "seq_len", "context", "lora_rank", "lora_params")
_SIZES = ("full_finetune_gb", "lora_gb")
_TEXTS = ("model_type", "reason", "architecture", "checkpoint_note")


@dataclass(frozen=True)
class StoredEstimate:
    """The memory estimate a revision stores: ``Estimate.to_json()`` (tracker/core/estimate/core.py) and, where
    the estimator reran after an older estimate, ``delta`` ({figure: {"before", "after"}}).

    Read once, where the store reads it; ``keys`` are the keys as stored, in their order, so that
    :meth:`to_json` gives back what was read (an old row without a newer key stays without it). ``rest``
    holds what no reader takes apart (structure, verifier, components, buffers), as stored.
    """

    keys: tuple[str, ...]
    supported: bool | None = None
    implausible: bool = False
    model_type: str | None = None
    reason: str | None = None
    architecture: str | None = None
    checkpoint_note: str | None = None
    params: int | None = None
    active_params: int | None = None
    checkpoint_params: int | None = None
    seq_len: int | None = None
    context: int | None = None
    lora_rank: int | None = None
    lora_params: int | None = None
    full_finetune_gb: Figure = None
    lora_gb: Figure = None
    cards: tuple[Mapping[str, Any], ...] = ()  # CardFit.to_json() of each card
    delta: Mapping[str, Any] | None = None
    rest: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> StoredEstimate:
        """ValueError naming the key when a value has the wrong type."""
        if not isinstance(data, Mapping):
            raise ValueError(f"expected an object, not {type(data).__name__}")
        values: dict[str, Any] = {}
        rest: dict[str, Any] = {}
        for key, value in data.items():
            if key in ("supported", "implausible"):
                _expect(key, value, bool, none=key == "supported")
            elif key in _TEXTS:
                _expect(key, value, str)
            elif key in _COUNTS:  # a config may say 2048.0: kept as it is, a whole number all the same
                _expect(key, value, int if not (isinstance(value, float) and value.is_integer()) else float)
            elif key in _SIZES:
                _expect(key, value, (float, int, str))
            elif key == "cards":
                if not isinstance(value, list) or not all(isinstance(c, Mapping) for c in value):
                    raise ValueError("'cards' is not a list of objects")
                value = tuple(value)
            elif key == "delta":
                _expect(key, value, Mapping)
            else:
                rest[key] = value
                continue
            values[key] = value
        values["implausible"] = bool(values.get("implausible", False))
        return cls(keys=tuple(data), rest=rest, **values)

    def to_json(self) -> dict[str, Any]:
        """The estimate as stored: the keys read, in their order."""
        return {key: self.rest[key] if key in self.rest else _json_value(getattr(self, key)) for key in self.keys}


def _expect(key: str, value: Any, kind: type | tuple[type, ...], *, none: bool = True) -> None:
    if value is None and none:
        return
    if isinstance(value, kind) and (kind is bool or not isinstance(value, bool)):  # True is an int too
        return
    raise ValueError(f"{key!r} is {type(value).__name__}, not what an estimate stores there")


def _json_value(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


# -- what the store holds, as the rest of the tracker sees it ---------------------------------------


@dataclass(frozen=True)
class RepoRow:
    pk: int
    repo_id: RepoId
    branch: str
    every_seconds: float | None
    state: RepoState
    hub_uid: str | None
    renamed_to: str | None
    last_seen_sha: CommitSha | None
    defer_until: datetime | None
    last_polled_at: datetime | None
    last_error: str | None
    created_at: datetime
    base_repo_id: RepoId | None = None  # the base model its card declares (migration 0007)
    rule_id: int | None = None  # the watch rule that added it (migration 0009)
    last_checked: datetime | None = None  # its last check of its own: a HEAD or an owner listing (migration 0014)


@dataclass(frozen=True)
class RevisionRow:
    pk: int
    repo_pk: int
    sha: CommitSha
    seq: int
    parent_sha: CommitSha | None
    date: datetime | None
    title: str
    message: str
    authors: list[str]
    status: RevisionStatus
    baseline: bool
    snapshot: Snapshot | None
    diff: RawDiff | None  # the stored values parsed once, where the store reads them
    findings: tuple[Finding, ...] | None
    worst_severity: str | None
    summary: str | None
    estimate: StoredEstimate | None
    analysed_at: datetime | None
    dependencies_pending: bool = False
    attempts: int = 0  # transient Hub failures while reading it
    last_error: str | None = None
    libraries: tuple[str, ...] = ()  # what it is loaded with (tracker/core/findings/libraries.py, migration 0010)
    backlog: bool = False  # one of a commit flood's intermediate revisions: read after the others


@dataclass(frozen=True)
class EventRow:
    pk: int
    repo_id: RepoId
    kind: str
    revision_sha: str | None
    detail: dict[str, Any]
    created_at: datetime


@dataclass(frozen=True)
class AdvisoryRow:
    id: str
    repo_id: RepoId
    revision_sha: str | None
    kind: str
    severity: str
    record: Advisory  # parsed once, where the store reads it
    published: datetime
    modified: datetime
    withdrawn: bool
    fixed_sha: str | None
    osv: Mapping[str, Any] = field(repr=False)  # the record's JSON as read: what JSON out sends, byte for byte
