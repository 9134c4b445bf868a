"""API tokens: made once, stored hashed, checked in constant time, revoked by name.

A token reads ``trk_<key_id>_<secret>``: ``key_id`` (12 hex digits, stored as it is) finds the
row, ``secret`` (32 random bytes, base64url) is never stored. The row holds a random 16-byte
salt and HMAC-SHA256(key=salt, msg=secret). A keyed fast hash rather than a slow password hash
(scrypt, argon2): the secret has 256 bits of entropy, so nothing can be guessed faster for a slow
hash to slow down, and every API write checks a token, where a slow hash would cost ~50 ms.
Revoking a token deletes its row: the next request with it gets 401.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from datetime import datetime, timedelta

from sqlalchemy import delete, insert, select, update

from tracker.adapters.store.db import Database
from tracker.adapters.store.tables import api_tokens
from tracker.core.errors import TrackerError
from tracker.core.store_types import TokenRow

PREFIX = "trk_"
_TOKEN_RE = re.compile(r"trk_([0-9a-f]{12})_([A-Za-z0-9_-]{43})")
NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")
TOUCH_EVERY = timedelta(minutes=10)  # last_used_at is written at most this often per token


class TokenExists(TrackerError):
    """A token with that name exists already."""


def digest(salt: str, secret: str) -> str:
    return hmac.new(bytes.fromhex(salt), secret.encode(), hashlib.sha256).hexdigest()


def validate_name(name: str) -> str:
    if not NAME_RE.fullmatch(name):
        raise ValueError(f"invalid token name {name[:100]!r}: 1-100 letters, digits, '.', '_' or '-', "
                         "starting with a letter or digit")
    return name


class TokenStore:
    """The ``api_tokens`` table (each method one transaction)."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def create(self, name: str, *, now: datetime) -> str:
        """A new token named ``name``; the only time its text exists. Raises TokenExists."""
        validate_name(name)
        key_id = secrets.token_hex(6)
        secret = secrets.token_urlsafe(32)
        salt = secrets.token_hex(16)
        with self.db.transaction() as conn:
            if conn.execute(select(api_tokens.c.id).where(api_tokens.c.name == name)).first() is not None:
                raise TokenExists(f"a token named {name!r} exists already: revoke it first, or choose another name")
            conn.execute(insert(api_tokens).values(name=name, key_id=key_id, salt=salt,
                                                   digest=digest(salt, secret), created_at=now))
        return f"{PREFIX}{key_id}_{secret}"

    def list(self) -> list[TokenRow]:
        with self.db.transaction() as conn:
            rows = conn.execute(select(api_tokens).order_by(api_tokens.c.name)).all()
        return [TokenRow(name=r.name, key_id=r.key_id, created_at=r.created_at,
                         last_used_at=r.last_used_at) for r in rows]

    def revoke(self, name: str) -> bool:
        with self.db.transaction() as conn:
            return conn.execute(delete(api_tokens).where(api_tokens.c.name == name)).rowcount > 0

    def check(self, token: str, *, now: datetime) -> str | None:
        """The name of the token, or None when it is malformed, unknown, revoked or wrong."""
        match = _TOKEN_RE.fullmatch(token)
        if match is None:
            return None
        key_id, secret = match.groups()
        with self.db.transaction() as conn:
            row = conn.execute(select(api_tokens).where(api_tokens.c.key_id == key_id)).first()
            if row is None or not hmac.compare_digest(digest(row.salt, secret), row.digest):
                return None
            last = row.last_used_at
            if last is None or now - last >= TOUCH_EVERY:
                conn.execute(update(api_tokens).where(api_tokens.c.id == row.id).values(last_used_at=now))
            return str(row.name)
