"""API tokens: made, listed and revoked by name; the API's writes (and, when configured, its reads) need one."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from tracker.adapters.store.tokens import validate_name
from tracker.core.errors import ConfigError, NotFound
from tracker.core.store_types import TokenRow

if TYPE_CHECKING:
    from tracker.app import Tracker

__all__ = ["ApiTokens"]


@dataclass(frozen=True)
class ApiTokens:
    """The API's bearer tokens (a salted hash of each is stored, never the token)."""

    tracker: Tracker

    def create(self, name: str) -> str:
        """A new token called ``name``, the only time its text exists.

        Raises ConfigError for a bad name, TokenExists when one of that name exists.
        """
        try:
            validate_name(name)
        except ValueError as exc:
            raise ConfigError(str(exc)) from exc
        return self.tracker.tokens.create(name, now=self.tracker.clock())

    def all(self) -> list[TokenRow]:
        """The tokens by name (names and dates; the tokens themselves are not stored)."""
        return self.tracker.tokens.list()

    def revoke(self, name: str) -> None:
        """Revoke the token called ``name``: requests with it are refused from now on. Raises NotFound."""
        if not self.tracker.tokens.revoke(name):
            raise NotFound(f"no token named {name!r}")

    def name_of(self, token: str) -> str | None:
        """The name of a valid token, None for an unknown or revoked one."""
        return self.tracker.tokens.check(token, now=self.tracker.clock())
