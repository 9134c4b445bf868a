"""Wall-clock deadlines enforced on every socket operation of a Hub request.

httpx's timeouts are per operation: a read timeout starts again with every byte, so a
server that drips one byte every two seconds holds a request for ever, in the headers as
much as in the body. Here each connect, read and write is given at most the time left
before the calling thread's deadline, and fails as a timeout once none is left.

The deadline is thread-local (each of the daemon's poll threads has its own) and is set by
``HubClient`` around each request. It is enforced by wrapping the network backend of the
connection pools of huggingface_hub's shared session, so the adapter keeps using that session
(proxies, mirrors, the request hook). httpx2 offers no public way to give a pool a backend;
``install`` reaches the pools through private attributes and says so (returns False) if a
release moves them. The adapter also checks the deadline between body chunks, so a slow body
is bounded even then.
"""

from __future__ import annotations

import logging
import ssl
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

import httpcore2
import httpx2

log = logging.getLogger(__name__)

_state = threading.local()


def current() -> float | None:
    """This thread's deadline (a ``time.monotonic()`` value), or None."""
    return getattr(_state, "at", None)


@contextmanager
def active(at: float | None) -> Iterator[None]:
    """Run the block with this thread's socket deadline at ``at`` (None: none)."""
    previous = current()
    _state.at = at
    try:
        yield
    finally:
        _state.at = previous


def set_current(at: float | None) -> None:
    """Move this thread's deadline (inside an ``active`` block, which restores the previous one)."""
    _state.at = at


def _bound(timeout: float | None, expired: type[Exception]) -> float | None:
    at = current()
    if at is None:
        return timeout
    left = at - time.monotonic()
    if left <= 0:
        raise expired("deadline reached")
    return left if timeout is None else min(timeout, left)


class DeadlineStream(httpcore2.NetworkStream):
    def __init__(self, inner: httpcore2.NetworkStream) -> None:
        self.inner = inner

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self.inner.read(max_bytes, _bound(timeout, httpcore2.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self.inner.write(buffer, _bound(timeout, httpcore2.WriteTimeout))

    def close(self) -> None:
        self.inner.close()

    def start_tls(
        self, ssl_context: ssl.SSLContext, server_hostname: str | None = None, timeout: float | None = None
    ) -> httpcore2.NetworkStream:
        stream = self.inner.start_tls(ssl_context, server_hostname, _bound(timeout, httpcore2.ConnectTimeout))
        return DeadlineStream(stream)

    def get_extra_info(self, info: str) -> Any:
        return self.inner.get_extra_info(info)


class DeadlineBackend(httpcore2.NetworkBackend):
    def __init__(self, inner: httpcore2.NetworkBackend) -> None:
        self.inner = inner

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore2.NetworkStream:
        stream = self.inner.connect_tcp(
            host, port, _bound(timeout, httpcore2.ConnectTimeout), local_address, socket_options
        )
        return DeadlineStream(stream)

    def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> httpcore2.NetworkStream:
        stream = self.inner.connect_unix_socket(path, _bound(timeout, httpcore2.ConnectTimeout), socket_options)
        return DeadlineStream(stream)

    def sleep(self, seconds: float) -> None:
        self.inner.sleep(seconds)


def install(client: httpx2.Client) -> bool:
    """Wrap the network backend of every connection pool of ``client``; True when all are wrapped.

    Idempotent. Connections opened before the call keep their plain streams (the pool
    closes idle ones soon enough); every new one is bounded.
    """
    transports: list[object] = [getattr(client, "_transport", None)]
    transports += [t for t in (getattr(client, "_mounts", None) or {}).values() if t is not None]
    done = True
    for transport in transports:
        pool = getattr(transport, "_pool", None)
        backend = getattr(pool, "_network_backend", None)
        if isinstance(backend, DeadlineBackend):
            continue
        if not isinstance(backend, httpcore2.NetworkBackend):
            done = False
            continue
        pool._network_backend = DeadlineBackend(backend)  # type: ignore[union-attr]
    return done
