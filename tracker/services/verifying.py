"""Verify: run two revisions of a repo with the library it is loaded with and measure what moved
(``tracker verify``; the download, the limited process and the measures are tracker/adapters/verify/)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from tracker.core.errors import ConfigError
from tracker.core.model import RepoId

if TYPE_CHECKING:
    from tracker.adapters.settings import Settings
    from tracker.core.verify import Verification

__all__ = ["VerifyAsked", "verify"]


@dataclass(frozen=True)
class VerifyAsked:
    """What ``tracker verify`` asks beyond ``[verify]`` in the config (None: the config's)."""

    samples: int | None = None
    device: str | None = None
    max_params: int | None = None


def _checked(name: str, value: str) -> str:
    if not value.strip() or any(c.isspace() or ord(c) < 32 for c in value.strip()):
        raise ConfigError(f"{name} must be a revision (a commit sha, a branch or a tag), not {value!r:.60}")
    return value.strip()


def verify(settings: Settings, repo_id: RepoId, old: str, new: str, asked: VerifyAsked = VerifyAsked()) -> Verification:
    """Measure what moved between revisions ``old`` and ``new`` (ConfigError naming OLD or NEW for one that cannot
    be a revision; VerifyError when the verify extra is missing or the run fails)."""
    from tracker.adapters.verify.verifying import VerifyOptions, verify_revisions

    old, new = _checked("OLD", old), _checked("NEW", new)
    options = VerifyOptions.from_settings(settings, samples=asked.samples, device=asked.device,
                                          max_params=asked.max_params)
    return verify_revisions(repo_id, old, new, options)
