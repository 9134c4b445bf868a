"""The API's guards around every route: reading that needs a token (``[api] read_requires_token``), and
the ``Host`` names answered.

Reading is open unless ``[api] read_requires_token = true``; then every request but ``/healthz``,
``/readyz``, the Hub webhook (it has its own secret) and the API's own description needs a token.

Links (feeds, pages) point at ``[api] public_url`` when it is set; otherwise at the request's own
``Host``, so that Host must be one the tracker knows (``[api] allowed_hosts``; by default the
address it listens on and localhost): any other is answered 400, or a shared cache would hand
everyone links to wherever a forged Host said (:class:`KnownHosts`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.types import ASGIApp, Receive, Scope, Send

from tracker.surfaces.api_errors import Unauthorized, error_response

__all__ = ["OPEN_PATHS", "PROBES", "KnownHosts", "ReadGuard", "served_hosts"]

# Open even when reads need a token: probes, the Hub's webhook (its own secret), the API's description.
OPEN_PATHS = frozenset({"/healthz", "/readyz", "/hooks/hub", "/openapi.json", "/docs", "/docs/oauth2-redirect"})
PROBES = frozenset({"/healthz", "/readyz"})  # answered whatever the Host: probes use the pod's address


def _bearer_token(header: str | None) -> str | None:
    if not header:
        return None
    scheme, _, value = header.partition(" ")
    return value.strip() if scheme.lower() == "bearer" and value.strip() else None


class ReadGuard:
    """ASGI middleware for ``read_requires_token``: every path but ``OPEN_PATHS`` needs a valid token."""

    def __init__(self, app: ASGIApp, check: Callable[[str], bool]) -> None:
        self.app = app
        self.check = check

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in OPEN_PATHS:
            await self.app(scope, receive, send)
            return
        header = next((v.decode("latin-1") for k, v in scope["headers"] if k == b"authorization"), None)
        token = _bearer_token(header)
        if token is None or not await run_in_threadpool(self.check, token):
            message = "reading needs a bearer token here ([api] read_requires_token)" if token is None \
                else "invalid or revoked token"
            await error_response(Unauthorized(message))(scope, receive, send)
            return
        await self.app(scope, receive, send)


def served_hosts(settings: Any, bind_host: str | None) -> list[str] | None:
    """The Host names answered, or None for any.

    ``[api] allowed_hosts`` when set. Otherwise, when links do not depend on the Host (``public_url``
    is set) any; else the address served on and localhost. An app built without ``bind_host`` (in
    process, as tests do) checks only what ``allowed_hosts`` names.
    """
    configured = list(getattr(getattr(settings, "api", None), "allowed_hosts", ()) or ())
    if configured:
        return [_host_pattern(h) for h in configured]
    if getattr(settings, "public_url", None) or bind_host is None:
        return None
    return list(dict.fromkeys(_host_pattern(h) for h in (bind_host, "localhost", "127.0.0.1", "::1")))


def _host_pattern(host: str) -> str:
    """A host as it appears in a ``Host`` header: lower case, an IPv6 address in brackets."""
    host = host.strip().lower().strip("[]")
    return f"[{host}]" if ":" in host else host


class KnownHosts:
    """ASGI middleware: a request whose ``Host`` is not one of ``hosts`` gets 400 (Starlette's
    TrustedHostMiddleware), but for the probes (``PROBES``), which make no links."""

    def __init__(self, app: ASGIApp, hosts: list[str]) -> None:
        self.app = app
        self.checked = TrustedHostMiddleware(app, allowed_hosts=hosts, www_redirect=False)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"] in PROBES:
            await self.app(scope, receive, send)
            return
        await self.checked(scope, receive, send)
