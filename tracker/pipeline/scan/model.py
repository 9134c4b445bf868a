"""The scan's vocabulary: a reference found in a codebase, what the tracker knows of its pin. Contains no I/O."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from tracker.core.model import SHA_RE, RepoId, Severity


class SourceKind(enum.StrEnum):
    """Where a reference was found."""

    PYTHON = "python"
    NOTEBOOK = "notebook"
    YAML = "yaml"
    JSON = "json"
    TOML = "toml"


@dataclass(frozen=True)
class Reference:
    """One place in a codebase that loads a Hub model.

    ``file`` is a POSIX path relative to the scanned root; ``line`` and
    ``column`` are 1-based, the column counted in characters and pointing at
    the repo id as written (the string literal, the constant's name, or the
    config value). ``ref`` is the revision as written: ``None`` when the code
    gives none. ``revision_expr`` holds the source of a ``revision=`` argument
    that cannot be read without running the code (``args.revision``).
    """

    file: str
    line: int
    column: int | None
    repo: RepoId
    ref: str | None
    source: SourceKind
    via: str  # the call ("AutoModel.from_pretrained") or the config key ("model_name_or_path")
    cell: int | None = None  # notebooks: the cell, 1-based, counting every cell
    revision_expr: str | None = None

    @property
    def pinned(self) -> bool:
        """Pinned to a commit: a 40-hex sha; a branch, a tag or nothing at all is floating."""
        return self.ref is not None and SHA_RE.match(self.ref) is not None

    @property
    def sort_key(self) -> tuple[str, int, int, str]:
        return self.file, self.line, self.column or 0, self.repo


@dataclass(frozen=True)
class Skipped:
    """A file the scan did not read, and why (too large, binary, not valid Python, ...)."""

    file: str
    reason: str


@dataclass(frozen=True)
class Found:
    """What the finder returns: the references, how many files it read, what it skipped."""

    references: tuple[Reference, ...]
    files_read: int
    skipped: tuple[Skipped, ...] = ()


@dataclass(frozen=True)
class AdvisoryHit:
    """An advisory that affects a revision, as the scan reports it."""

    id: str
    severity: Severity
    kind: str
    summary: str
    details: str = ""
    published: str | None = None  # RFC 3339, as the OSV record has it
    modified: str | None = None
    urls: tuple[tuple[str, str], ...] = ()  # the OSV record's references: (type, url)


@dataclass(frozen=True)
class ModelFacts:
    """What the tracker knows of a revision's model, for a model card (None: not known)."""

    architecture: str | None = None  # config.json's architectures[0], or the estimator's
    model_type: str | None = None
    parameters: int | None = None  # the memory estimator's count
    task: str | None = None  # the card's pipeline_tag
    licence: str | None = None  # the card's license (license_name for "other")
    library: str | None = None  # the card's library_name


@dataclass(frozen=True)
class PinStatus:
    """What the tracker knows about one (repo, revision as written) pair.

    ``revision`` is the commit the reference resolves to now (the pin itself,
    or the head of a branch); ``behind`` counts commits from it to the branch
    head (``None`` when it is not on the branch or could not be read);
    ``suggested`` is the revision to move to (``tracker.pipeline.scan.advice``: the newest
    of the branch's least-advised revisions, the same wherever the pin is).
    ``note`` says what could not be checked; ``reason`` why the suggestion, beside it.
    """

    repo: RepoId
    ref: str | None
    revision: str | None = None
    head: str | None = None
    behind: int | None = None
    advisories: tuple[AdvisoryHit, ...] = ()
    suggested: str | None = None
    notes: tuple[str, ...] = field(default=())
    reason: str | None = None  # why the suggestion: what it fixes, adds and keeps (advice.explain)
    facts: ModelFacts | None = None  # read only when a report asks for model cards

    @property
    def worst(self) -> Severity | None:
        return Severity.worst(a.severity for a in self.advisories)
