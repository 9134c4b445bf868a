"""Asking the Hub about what a user typed: is a repo there (and, when not, the ids it has that look like it),
and Hub errors said as the argument that caused them (:func:`naming`)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from rapidfuzz import fuzz, process

from tracker.core.errors import (
    EntryGone,
    HubError,
    RepoDisabled,
    RepoGated,
    RepoGone,
    RevisionGone,
    RevisionUnresolved,
    TrackerError,
    first_line,
)
from tracker.core.model import RepoId
from tracker.pipeline.ports import HubReader

__all__ = ["ArgumentError", "Existence", "close_matches", "existence", "missing_message", "naming"]

CHECK_SECONDS = 15.0  # a check never holds a command longer than this, whatever the Hub does
CLOSE_MATCHES = 3
CLOSE_SCORE = 75  # rapidfuzz ratio (0-100) from which an id counts as a likely intended one


@dataclass(frozen=True)
class Existence:
    found: bool
    missing: bool  # the Hub answered: no such repo (or private without a token)
    reason: str = ""  # why the Hub could not be asked, when neither found nor missing
    close: tuple[RepoId, ...] = ()


def close_matches(hub: HubReader, repo_id: RepoId) -> tuple[RepoId, ...]:
    """Ids like ``repo_id`` the Hub has: its owner's models and a search for its name, best first.

    Suggestions are a courtesy: a failed search gives none, never an error.
    """
    owner, name = repo_id.split("/", 1)
    candidates: dict[str, RepoId] = {}
    for search, author in ((name[: max(3, len(name) * 2 // 3)], None), ("", owner)):
        try:
            for found in hub.search_models(search, author=author, limit=100):
                candidates.setdefault(found.lower(), found)
        except HubError:
            continue
    candidates.pop(repo_id.lower(), None)
    ranked = process.extract(repo_id.lower(), list(candidates), scorer=fuzz.ratio, limit=CLOSE_MATCHES,
                             score_cutoff=CLOSE_SCORE)
    return tuple(candidates[key] for key, _score, _index in ranked)


def existence(hub: HubReader, repo_id: RepoId) -> Existence:
    """Whether the Hub has ``repo_id`` (gated and disabled repos exist), within CHECK_SECONDS."""
    with hub.deadline(CHECK_SECONDS):
        try:
            hub.repo_info(repo_id)
        except (RepoGated, RepoDisabled):
            return Existence(found=True, missing=False)
        except RepoGone:
            return Existence(found=False, missing=True, close=close_matches(hub, repo_id))
        except HubError as exc:
            return Existence(found=False, missing=False, reason=first_line(exc))
    return Existence(found=True, missing=False)


def missing_message(repo_id: RepoId, endpoint: str, close: tuple[RepoId, ...]) -> str:
    """Why a repo id is refused: the Hub does not have it, and the ids it has that look like it."""
    hint = f"; did you mean {', '.join(close)}?" if close else " (misspelt, deleted, or private: set HF_TOKEN)"
    return f"{repo_id} is not on the Hub at {endpoint}{hint}"


class ArgumentError(TrackerError):
    """An argument the Hub refused or could not be asked about, said as the argument (exit 1, one line)."""


@contextmanager
def naming(hub: HubReader, repo_id: RepoId, argument: str, value: str) -> Iterator[None]:
    """Hub errors inside the block re-raised as ArgumentError naming ``argument``.

    When the Hub says "not found" the repo is asked about once more, so the message says
    whether the repo or the revision is what is missing.
    """
    try:
        yield
    except (RevisionGone, EntryGone) as exc:
        raise ArgumentError(f"{argument} {value!r}: no such revision of {repo_id} on the Hub"
                            + _short_sha_hint(value)) from exc
    except RevisionUnresolved as exc:
        if exc.temporary:
            raise ArgumentError(f"{argument} {value!r}: could not ask the Hub ({first_line(exc)})") from exc
        raise ArgumentError(f"{argument} {value!r}: {first_line(exc)}") from exc
    except (RepoGated, RepoDisabled) as exc:
        raise ArgumentError(f"REPO {repo_id}: {first_line(exc)}") from exc
    except RepoGone as exc:
        there = existence(hub, repo_id)
        if there.found:
            raise ArgumentError(f"{argument} {value!r}: no such revision of {repo_id} on the Hub"
                                + _short_sha_hint(value)) from exc
        if there.missing:
            raise ArgumentError(f"REPO {missing_message(repo_id, hub.endpoint, there.close)}") from exc
        raise ArgumentError(f"{argument} {value!r}: could not ask the Hub ({there.reason}); retry later") from exc
    except HubError as exc:
        raise ArgumentError(f"{argument} {value!r}: could not ask the Hub ({first_line(exc)}); retry later") from exc


def _short_sha_hint(value: str) -> str:
    """What to do about a short commit id the Hub does not take (it resolves only full ones)."""
    if 4 <= len(value) < 40 and all(c in "0123456789abcdef" for c in value.lower()):
        return (" (a short commit id is resolved among the commits the tracker has read of a watched repo; "
                "give all 40 hex digits)")
    return ""
