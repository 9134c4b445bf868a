"""Mistakes caught where they are made: is a repo on the Hub, and which argument did the Hub refuse.

Every answer tells "the Hub says it is not there" (a typo, a deleted or private repo) apart from
"the Hub could not be asked" (down, rate limited, out of time), because the fixes differ: correct
the argument, or retry later.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

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
from tracker.services import existence, missing_message

__all__ = ["ArgumentError", "existence", "missing_message", "naming"]


class ArgumentError(TrackerError):
    """A command-line argument the Hub refused or could not be asked about (exit 1, one line)."""


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
