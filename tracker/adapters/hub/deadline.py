"""Wall-clock deadlines enforced on every socket operation of a Hub request.

httpx's timeouts are per operation: a read timeout starts again with every byte, so a
server that drips one byte every two seconds holds a request for ever, in the headers as
much as in the body. Here each connect, read and write is given at most the time left
before the calling thread's deadline, and fails as a timeout once none is left.

The deadline is thread-local (each of the daemon's poll threads has its own) and is set by
``HubClient`` around each request. It is enforced by :class:`DeadlineTransport`, the tracker's
own httpx2 transport: an httpcore2 connection pool given a network backend that bounds every
socket operation. Both libraries make these public (``httpx2.BaseTransport``,
``httpcore2.ConnectionPool(network_backend=...)``, ``httpcore2.NetworkBackend``), so an upgrade
cannot switch the deadlines off without failing loudly. The adapter also checks the deadline
between body chunks.
"""

from __future__ import annotations

import logging
import ssl
import threading
import time
import urllib.request
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

import httpcore2
import httpx2

log = logging.getLogger("tracker.hub.deadline")  # the name operators filter logs by, not the module path

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


# httpcore2's errors as httpx2's, most specific first (httpx2's own transport maps them the same way).
_ERRORS: tuple[tuple[type[Exception], type[httpx2.HTTPError]], ...] = (
    (httpcore2.ConnectTimeout, httpx2.ConnectTimeout),
    (httpcore2.ReadTimeout, httpx2.ReadTimeout),
    (httpcore2.WriteTimeout, httpx2.WriteTimeout),
    (httpcore2.PoolTimeout, httpx2.PoolTimeout),
    (httpcore2.TimeoutException, httpx2.TimeoutException),
    (httpcore2.ConnectError, httpx2.ConnectError),
    (httpcore2.ReadError, httpx2.ReadError),
    (httpcore2.WriteError, httpx2.WriteError),
    (httpcore2.NetworkError, httpx2.NetworkError),
    (httpcore2.ProxyError, httpx2.ProxyError),
    (httpcore2.UnsupportedProtocol, httpx2.UnsupportedProtocol),
    (httpcore2.LocalProtocolError, httpx2.LocalProtocolError),
    (httpcore2.RemoteProtocolError, httpx2.RemoteProtocolError),
    (httpcore2.ProtocolError, httpx2.ProtocolError),
)


@contextmanager
def _as_httpx2() -> Iterator[None]:
    try:
        yield
    except Exception as exc:
        for theirs, ours in _ERRORS:
            if isinstance(exc, theirs):
                raise ours(str(exc)) from exc
        raise


class _Body(httpx2.SyncByteStream):
    def __init__(self, stream: Iterable[bytes]) -> None:
        self.stream = stream

    def __iter__(self) -> Iterator[bytes]:
        with _as_httpx2():
            yield from self.stream

    def close(self) -> None:
        close = getattr(self.stream, "close", None)
        if close is not None:
            close()


class DeadlineTransport(httpx2.BaseTransport):
    """httpx2's transport interface over httpcore2 pools whose sockets keep the calling thread's deadline.

    Proxies come from the environment as urllib reads them (``HTTPS_PROXY``, ``NO_PROXY``...),
    as huggingface_hub's own session would use them; HTTP(S) proxies only.
    """

    def __init__(self, *, trust_env: bool = True, max_connections: int = 100) -> None:
        self._ssl = httpx2.create_ssl_context(trust_env=trust_env)
        self._backend = DeadlineBackend(httpcore2.SyncBackend())
        self._trust_env = trust_env
        self._max_connections = max_connections
        self._direct = httpcore2.ConnectionPool(ssl_context=self._ssl, max_connections=max_connections,
                                                keepalive_expiry=5.0, network_backend=self._backend)
        self._proxied: dict[str, httpcore2.HTTPProxy] = {}
        self._lock = threading.Lock()

    def _pool(self, url: httpx2.URL) -> httpcore2.ConnectionPool | httpcore2.HTTPProxy:
        if not self._trust_env or urllib.request.proxy_bypass(url.host):
            return self._direct
        proxy_url = urllib.request.getproxies().get(url.scheme)
        if not proxy_url:
            return self._direct
        with self._lock:
            pool = self._proxied.get(proxy_url)
            if pool is None:
                proxy = httpx2.Proxy(proxy_url)
                if proxy.url.scheme not in ("http", "https"):
                    raise httpx2.UnsupportedProtocol(f"proxy {proxy.url.scheme}:// is not supported for the Hub")
                pool = httpcore2.HTTPProxy(
                    proxy_url=httpcore2.URL(scheme=proxy.url.raw_scheme, host=proxy.url.raw_host,
                                            port=proxy.url.port, target=proxy.url.raw_path),
                    proxy_auth=proxy.raw_auth, proxy_headers=proxy.headers.raw, ssl_context=self._ssl,
                    max_connections=self._max_connections, keepalive_expiry=5.0, network_backend=self._backend,
                )
                self._proxied[proxy_url] = pool
        return pool

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        assert isinstance(request.stream, httpx2.SyncByteStream)
        core = httpcore2.Request(
            method=request.method,
            url=httpcore2.URL(scheme=request.url.raw_scheme, host=request.url.raw_host, port=request.url.port,
                              target=request.url.raw_path),
            headers=request.headers.raw,
            content=request.stream,
            extensions=request.extensions,
        )
        with _as_httpx2():
            answer = self._pool(request.url).handle_request(core)
        assert isinstance(answer.stream, Iterable)
        return httpx2.Response(status_code=answer.status, headers=answer.headers, stream=_Body(answer.stream),
                               extensions=answer.extensions)

    def close(self) -> None:
        self._direct.close()
        for pool in self._proxied.values():
            pool.close()


_client: httpx2.Client | None = None
_client_lock = threading.Lock()


def shared_client() -> httpx2.Client:
    """The process's one client for the Hub (its connections are reused across requests and threads)."""
    global _client
    with _client_lock:
        if _client is None:
            # No cookies kept between requests, no redirects followed by httpx2 (HubTransport follows
            # them itself, re-checking each hop), no timeout of its own (each request sets one).
            _client = httpx2.Client(transport=DeadlineTransport(), follow_redirects=False, timeout=None,
                                    trust_env=False)
        return _client
