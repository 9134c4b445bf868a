"""Stable, deterministic advisory ids.

An advisory id is ``x_HFUT-xxxx-xxxx-xxxx``: the ``x_`` prefix that the OSV
schema reserves for local databases (OSV.dev never aggregates them, so no
registered prefix can collide), the database name ``HFUT`` (Hugging Face
Upstream Tracker), then 60 bits of a SHA-256 over *what the advisory is about*,
written in lower-case RFC 4648 base32 in three groups of four, like GHSA ids.

Why a hash and not a counter (``x_HFUT-2026-0001``): a counter depends on the
order in which revisions were read and on the store's state, so re-polling,
re-analysing with newer rules, rebuilding the store or two trackers watching
the same repo would mint different ids for the same change. The hash depends
only on the identity of the change, so the same change always yields the same
id and "update or create" is an upsert on the id: duplicates cannot happen.

What goes into the hash (and nothing else, so that re-analysis with newer
rules keeps the id and only moves ``modified``):

* the repo id, lower-cased: the Hub resolves repo ids case-insensitively, so
  ``Org/Model`` and ``org/model`` are the same repo;
* the subject: the 40-hex revision for a per-revision advisory, or, for an
  advisory about the repo itself, the sorted set of revisions it concerns;
* the kind (``update``, ``risk``, ``repo.deleted``, ...): one revision may
  carry one advisory per kind, each with its own id.

60 bits make an accidental collision among a million advisories about one in
two million; ids stay short enough to read aloud.
"""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import Iterable

ID_PREFIX = "x_HFUT-"
ID_RE = re.compile(r"^x_HFUT-[a-z2-7]{4}-[a-z2-7]{4}-[a-z2-7]{4}$")


def _digest_id(*parts: str) -> str:
    material = "\x1f".join(parts).encode("utf-8")
    digest = hashlib.sha256(material).digest()
    code = base64.b32encode(digest).decode("ascii").lower()[:12]
    return f"{ID_PREFIX}{code[0:4]}-{code[4:8]}-{code[8:12]}"


def advisory_id(repo_id: str, revision: str, kind: str) -> str:
    """Id of the advisory of ``kind`` about ``revision`` of ``repo_id``.

    ``revision`` is a commit sha (compared lower-case). Same inputs, same id,
    on any machine and at any time.
    """
    if not kind:
        raise ValueError("advisory kind is empty")
    return _digest_id("revision", repo_id.lower(), revision.lower(), kind)


def repo_event_id(repo_id: str, kind: str, revisions: Iterable[str]) -> str:
    """Id of an advisory about the repo itself (deleted, renamed, history rewritten, ...).

    The subject is the *set* of revisions concerned, so order and duplicates do
    not matter, while the same kind of event happening again to a different set
    of revisions (deleted, recreated, deleted again) gets a new id.
    """
    if not kind:
        raise ValueError("repo event kind is empty")
    subject = ",".join(sorted({r.lower() for r in revisions}))
    return _digest_id("repo", repo_id.lower(), subject, f"repo.{kind}")


def inherited_id(repo_id: str, base_advisory_id: str) -> str:
    """Id of the advisory telling ``repo_id`` (a derivative) that it lacks its base's update ``base_advisory_id``.

    One per (derivative, base advisory): the base advisory's id already names the base repo,
    revision and kind, so polling either repo again, in either order, finds the same record.
    """
    if not is_advisory_id(base_advisory_id):
        raise ValueError(f"not an advisory id: {base_advisory_id!r}")
    return _digest_id("inherited", repo_id.lower(), base_advisory_id)


def is_advisory_id(value: str) -> bool:
    """True when ``value`` has the shape of an id this module mints."""
    return bool(ID_RE.match(value))
