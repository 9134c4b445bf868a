"""HTTP to the Hub on the tracker's terms: the plumbing under :class:`tracker.adapters.hub.HubClient`.

It goes through huggingface_hub's own HTTP session, header builder and error mapping, so
``HF_ENDPOINT``, ``HF_TOKEN``, proxies and mirrors behave as users expect, and adds what a
watcher of repos that strangers control needs (issue 9, "hostile upstream"):

* the token goes only to the configured Hub origin (scheme, host, port): redirects are
  followed here, one hop at a time, with the token only on hops to that origin; a listing's
  ``Link`` to another origin is refused; redirects are capped (``max_redirects``);
* every request has a wall-clock deadline (``request_deadline``), enforced on each socket
  operation (:mod:`tracker.adapters.hub.deadline`), and :meth:`HubTransport.deadline` sets one around a
  whole poll, after which every request raises :class:`HubDeadlineExceeded`;
* retries on 408/429/5xx and network errors honour ``Retry-After`` and ``RateLimit``, parsed
  without overflow and capped (``max_defer``);
* API answers are read streaming and refused over ``max_api_bytes``, parsed with depth and
  count bounds; listings stop at ``max_pages`` or at a page already read;
* nothing but :class:`~tracker.core.errors.TrackerError` subclasses leaves it.
"""

from __future__ import annotations

import logging
import random
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import httpx2
from huggingface_hub import constants
from huggingface_hub.errors import (
    DisabledRepoError,
    EntryNotFoundError,
    GatedRepoError,
    HfHubHTTPError,
    OfflineModeIsEnabled,
    RepositoryNotFoundError,
    RevisionNotFoundError,
)
from huggingface_hub.utils import build_hf_headers, hf_raise_for_status
from tenacity import RetryCallState, Retrying, retry_if_exception_type, stop_after_attempt

from tracker import __version__
from tracker.adapters import metrics
from tracker.adapters.hub import deadline
from tracker.adapters.hub.budget import bucket_of
from tracker.adapters.hub.guards import header_int, origin, server_wait
from tracker.adapters.settings import default
from tracker.core.bounded import check_json_shape, loads_json
from tracker.core.errors import (
    ConfigError,
    EntryGone,
    HubDeadlineExceeded,
    HubRateLimited,
    HubUnavailable,
    HubUnreachable,
    RepoDisabled,
    RepoGated,
    RepoGone,
    RevisionGone,
)

log = logging.getLogger("tracker.hub.transport")  # the name operators filter logs by, not the module path

RETRY_STATUS = frozenset({408, 429, 500, 502, 503, 504})
REDIRECT_STATUS = frozenset({301, 302, 303, 307, 308})
MAX_ERROR_BODY = 64 * 1024  # of an error answer, enough for huggingface_hub's message


class _Retryable(Exception):
    """A transient failure; ``wait_hint`` is what the server asked us to wait, if anything."""

    def __init__(self, message: str, wait_hint: float | None = None, status: int | None = None):
        super().__init__(message)
        self.wait_hint = wait_hint
        self.status = status



# After the Hub could not be reached at all, requests to it fail at once for this long, without a connection.
UNREACHABLE_HOLD = 30.0
_NO_NAME = ("name or service not known", "temporary failure in name resolution", "nodename nor servname",
            "no address associated with hostname", "name resolution", "getaddrinfo failed")


def unreachable_reason(exc: BaseException) -> str | None:
    """"its name does not resolve" or "connection refused" when that is why a connection failed, else None."""
    seen: BaseException | None = exc
    for _ in range(8):  # httpx2 wraps httpcore2's error, which wraps the socket's
        if seen is None:
            break
        if isinstance(seen, socket.gaierror):
            return "its name does not resolve"
        if isinstance(seen, ConnectionRefusedError):
            return "connection refused"
        seen = seen.__cause__ or seen.__context__
    if not isinstance(exc, httpx2.ConnectError):
        return None
    text = str(exc).lower()
    if any(words in text for words in _NO_NAME):
        return "its name does not resolve"
    if "connection refused" in text or "errno 111" in text:
        return "connection refused"
    return None


class HubTransport:
    """Bounded requests to one Hub origin; :class:`~tracker.adapters.hub.HubClient` adds the Hub's operations.

    ``token=None`` lets huggingface_hub resolve ``HF_TOKEN`` and the token file;
    ``False`` disables it. The token is sent only to the Hub origin and never logged.
    """

    # Keyword-only: each of the Hub's bounds by name, as settings.py declares them, and the sleep tests drive.
    def __init__(  # noqa: PLR0913
        self,
        endpoint: str | None = None,
        *,
        token: str | bool | None = None,
        timeout: float = default("hub.timeout"),
        max_retries: int = default("hub.max_retries"),
        max_wait: float = default("hub.max_wait"),
        max_defer: float = default("hub.max_defer"),
        request_deadline: float = default("hub.request_deadline"),
        max_api_bytes: int = default("hub.max_api_bytes"),
        max_pages: int = default("hub.max_pages"),
        max_redirects: int = 10,
        sleep: Callable[[float], None] = time.sleep,
        on_request: Callable[[str], None] | None = None,
        on_rate_limited: Callable[[str, float], None] | None = None,
    ) -> None:
        self.endpoint = (endpoint or constants.ENDPOINT).rstrip("/")
        try:
            base = httpx2.URL(self.endpoint)
        except httpx2.InvalidURL as exc:
            raise ConfigError(f"invalid Hub endpoint {self.endpoint!r:.100}: {exc}") from exc
        if base.scheme not in ("http", "https") or not base.host:
            raise ConfigError(f"invalid Hub endpoint {self.endpoint!r:.100}: expected http(s)://host[:port]")
        self.origin = origin(base)
        # No telemetry, and above all no agent-harness lookup on huggingface.co when the
        # endpoint is a mirror configured here rather than in HF_ENDPOINT (hub-protocol.md §1).
        constants.HF_HUB_DISABLE_TELEMETRY = True
        self.token = token
        self.timeout = timeout
        self.max_retries = max_retries
        self.max_defer = max_defer
        self.max_wait = min(max_wait, max_defer)
        self.request_deadline = request_deadline
        self.max_api_bytes = max_api_bytes
        self.max_pages = max_pages
        self.max_redirects = max_redirects
        self.sleep = sleep
        self.requests_made = 0
        self.requests_by_bucket: dict[str, int] = {}  # per Hub rate-limit bucket (tracker.adapters.hub.budget)
        self.on_request = on_request  # told each request's bucket (the Tracker's budget, from make_tracker)
        self.on_rate_limited = on_rate_limited  # told (bucket, seconds) of each 429
        self._local = threading.local()
        self._down: tuple[float, HubUnreachable] | None = None  # when the Hub last could not be reached at all

    # -- deadlines ----------------------------------------------------------------------------

    @contextmanager
    def deadline(self, seconds: float) -> Iterator[None]:
        """Every request of this thread inside the block ends within ``seconds`` from now.

        Past it, each request raises :class:`HubDeadlineExceeded` (a ``HubUnavailable``),
        including one in flight. Nested blocks keep the earlier deadline. Thread-local:
        concurrent polls in other threads keep their own.
        """
        previous: tuple[float, float] | None = getattr(self._local, "poll", None)
        at = time.monotonic() + seconds
        self._local.poll = (at, seconds) if previous is None or at < previous[0] else previous
        try:
            yield
        finally:
            self._local.poll = previous

    def _poll_deadline(self) -> tuple[float, float] | None:
        poll: tuple[float, float] | None = getattr(self._local, "poll", None)
        return poll

    def _check_poll_deadline(self, what: str) -> None:
        poll = self._poll_deadline()
        if poll is not None and time.monotonic() >= poll[0]:
            raise HubDeadlineExceeded(f"{what}: the poll's deadline of {poll[1]:g}s ran out")

    def _sleep(self, seconds: float) -> None:
        """Back off, unless that would outlast the poll's deadline."""
        poll = self._poll_deadline()
        if poll is not None and time.monotonic() + seconds >= poll[0]:
            raise HubDeadlineExceeded(
                f"retrying in {seconds:.0f}s would pass the poll's deadline of {poll[1]:g}s"
            )
        self.sleep(seconds)

    # -- plumbing -----------------------------------------------------------------------------

    def _headers(self, url: httpx2.URL, extra: dict[str, str] | None = None) -> dict[str, str]:
        """Request headers; the token only when ``url`` is on the Hub's own origin."""
        token = self.token if origin(url) == self.origin else False
        return build_hf_headers(
            token=token, library_name="upstream-tracker", library_version=__version__, headers=extra
        )

    def _session(self) -> httpx2.Client:
        if constants.is_offline_mode():  # what huggingface_hub's own session refuses too
            raise HubUnavailable(f"cannot reach {self.endpoint}: offline mode is enabled (HF_HUB_OFFLINE)")
        return deadline.shared_client()

    def _check_down(self, url: httpx2.URL) -> None:
        """A request to the Hub within UNREACHABLE_HOLD of finding it unreachable fails at once, the same way:
        one cycle over many repos says the outage once instead of trying (and timing out on) each."""
        down = self._down
        if down is not None and origin(url) == self.origin:
            if time.monotonic() - down[0] < UNREACHABLE_HOLD:
                raise down[1]
            self._down = None

    def _raise_if_unreachable(self, target: httpx2.URL, exc: Exception) -> None:
        """A name that does not resolve, or a port that refuses, is not retried: a second later it fails the
        same way. On the Hub's own origin it also holds further requests off for a while (_check_down)."""
        reason = unreachable_reason(exc)
        if reason is None:
            return
        here = origin(target) == self.origin
        error = HubUnreachable(self.endpoint if here else f"{target.scheme}://{target.netloc.decode()}", reason)
        if here:
            self._down = (time.monotonic(), error)
        raise error from exc

    def _wait(self, state: RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome else None
        hint = exc.wait_hint if isinstance(exc, _Retryable) else None
        if hint is not None:
            return hint + random.uniform(0, 0.25)
        # exponential backoff with full jitter, capped
        return random.uniform(0, min(30.0, 0.5 * 2 ** (state.attempt_number - 1)))

    def _attempt(
        self, method: str, url: httpx2.URL, extra: dict[str, str] | None, follow: bool
    ) -> httpx2.Response:
        """One try: send, follow redirects by hand, answer a streaming response (status not retryable)."""
        self._check_poll_deadline(f"{method} {url}")
        self._check_down(url)
        at = time.monotonic() + self.request_deadline
        poll = self._poll_deadline()
        deadline.set_current(min(at, poll[0]) if poll is not None else at)
        self.requests_made += 1
        bucket = bucket_of(url.path)
        self.requests_by_bucket[bucket] = self.requests_by_bucket.get(bucket, 0) + 1
        if self.on_request is not None:
            self.on_request(bucket)
        session = self._session()
        target = url
        for _hop in range(self.max_redirects + 1):
            try:
                request = session.build_request(method, target, headers=self._headers(target, extra),
                                                timeout=self.timeout)
                response = session.send(request, stream=True, follow_redirects=False)
            except httpx2.TimeoutException as exc:
                metrics.hub_answer(None)
                self._check_poll_deadline(f"{method} {url}")
                late = time.monotonic() >= at
                reason = f"no answer within the {self.request_deadline:g}s deadline" if late else type(exc).__name__
                raise _Retryable(f"{method} {url}: {reason}") from exc
            except (httpx2.NetworkError, httpx2.RemoteProtocolError) as exc:
                metrics.hub_answer(None)
                self._raise_if_unreachable(target, exc)
                raise _Retryable(f"{method} {url}: {type(exc).__name__}: {exc}") from exc
            except (httpx2.HTTPError, httpx2.InvalidURL, httpx2.StreamError, OfflineModeIsEnabled) as exc:
                raise HubUnavailable(f"{method} {url}: {type(exc).__name__}: {exc}") from exc
            metrics.hub_answer(response.status_code)  # every answer of the Hub passes here
            if follow and response.status_code in REDIRECT_STATUS and "location" in response.headers:
                response.close()
                target = self._redirect_target(method, target, response.headers["location"])
                continue
            break
        else:
            raise HubUnavailable(f"{method} {url}: more than {self.max_redirects} redirects (a redirect loop?)")
        if response.status_code in RETRY_STATUS:
            wait = server_wait(response.headers, cap=self.max_defer)
            response.close()
            if response.status_code == 429 and self.on_rate_limited is not None:
                self.on_rate_limited(bucket, wait if wait is not None else 1.0)
            if wait is not None and wait > self.max_wait:
                raise HubRateLimited(
                    f"{method} {url}: {response.status_code}, server asks to wait {wait:.0f}s", retry_after=wait
                )
            raise _Retryable(f"{method} {url}: HTTP {response.status_code}", wait_hint=wait,
                             status=response.status_code)
        return response

    @staticmethod
    def _redirect_target(method: str, current: httpx2.URL, location: str) -> httpx2.URL:
        try:
            target = current.join(location)
        except (httpx2.InvalidURL, ValueError) as exc:
            raise HubUnavailable(f"{method} {current}: redirect to a malformed URL {location!r:.200}") from exc
        if target.scheme not in ("http", "https") or not target.host:
            raise HubUnavailable(f"{method} {current}: redirect to a non-HTTP URL {location!r:.200}")
        return target

    @contextmanager
    def _open(
        self,
        method: str,
        url: str | httpx2.URL,
        *,
        extra: dict[str, str] | None = None,
        follow: bool = True,
    ) -> Iterator[httpx2.Response]:
        """A streaming answer with a status below 400, closed after the block.

        Retries 408/429/5xx and network errors, honouring Retry-After and RateLimit. The
        request's deadline stays in force while the block reads the body; transport errors
        raised there become ``HubUnavailable`` (or ``HubDeadlineExceeded``).
        """
        what = f"{method} {str(url)[:300]}"
        try:
            target = url if isinstance(url, httpx2.URL) else httpx2.URL(url)
        except httpx2.InvalidURL as exc:
            raise HubUnavailable(f"{what}: invalid URL: {exc}") from exc
        retrying = Retrying(
            stop=stop_after_attempt(self.max_retries + 1),
            retry=retry_if_exception_type(_Retryable),
            wait=self._wait,
            sleep=self._sleep,
            reraise=True,
        )
        with deadline.active(None):
            try:
                response = retrying(self._attempt, method, target, extra, follow)
            except _Retryable as exc:
                if exc.status == 429:
                    raise HubRateLimited(str(exc), retry_after=exc.wait_hint) from exc
                raise HubUnavailable(f"{exc} (after {self.max_retries} retries)") from exc
            try:
                self._raise_for_status(response)
                yield response
            except httpx2.TimeoutException as exc:
                self._check_poll_deadline(what)
                raise HubUnavailable(f"{what}: body not read within the {self.request_deadline:g}s deadline") from exc
            except (httpx2.HTTPError, httpx2.InvalidURL, httpx2.StreamError) as exc:
                raise HubUnavailable(f"{what}: body cut off: {type(exc).__name__}: {exc}") from exc
            finally:
                response.close()

    def _chunks(self, response: httpx2.Response) -> Iterator[bytes]:
        """The body, checking the deadline between chunks too (in case sockets are not bounded)."""
        at = deadline.current()
        for chunk in response.iter_bytes():
            if at is not None and time.monotonic() >= at:
                raise httpx2.ReadTimeout("deadline reached", request=response.request)
            yield chunk

    def _read_capped(self, response: httpx2.Response, cap: int, what: str) -> bytes:
        declared = header_int(response.headers.get("content-length"))
        if declared is not None and declared > cap:
            raise HubUnavailable(f"{what}: the Hub announced {declared:,} bytes, over the {cap:,}-byte cap")
        out = bytearray()
        for chunk in self._chunks(response):
            out += chunk
            if len(out) > cap:
                raise HubUnavailable(f"{what}: answer over the {cap:,}-byte cap")
        return bytes(out)

    def _raise_for_status(self, response: httpx2.Response) -> None:
        if response.status_code < 400:
            return
        body = b""
        try:
            for chunk in self._chunks(response):
                body += chunk
                if len(body) >= MAX_ERROR_BODY:
                    body = b""  # an error page this large says nothing useful
                    break
            check_json_shape(body)
        except (httpx2.HTTPError, httpx2.StreamError, ValueError):
            body = b""  # unreadable, or JSON too deep for huggingface_hub's recursive parser
        headers = [(k, v) for k, v in response.headers.multi_items()
                   if k.lower() not in ("content-encoding", "content-length", "transfer-encoding")]
        complete = httpx2.Response(response.status_code, headers=headers, content=body, request=response.request)
        try:
            hf_raise_for_status(complete)
        except GatedRepoError as exc:
            raise RepoGated(f"gated: {exc}") from exc
        except RepositoryNotFoundError as exc:
            raise RepoGone(f"repository not found (deleted, private or renamed away): {exc}") from exc
        except RevisionNotFoundError as exc:
            raise RevisionGone(str(exc)) from exc
        except EntryNotFoundError as exc:
            raise EntryGone(str(exc)) from exc
        except DisabledRepoError as exc:
            raise RepoDisabled(str(exc)) from exc
        except HfHubHTTPError as exc:
            if response.status_code in (401, 403):
                raise RepoGone(f"access refused ({response.status_code}): {exc}") from exc
            if response.status_code == 404:
                raise RepoGone(f"not found: {exc}") from exc
            raise HubUnavailable(str(exc)) from exc
        except Exception as exc:  # huggingface_hub choking on a hostile error answer
            raise HubUnavailable(f"HTTP {response.status_code}: unreadable error answer: {exc!r:.200}") from exc
        raise HubUnavailable(f"HTTP {response.status_code} from {response.request.url}")

    def _get_json(self, url: str | httpx2.URL, what: str) -> tuple[Any, httpx2.URL | None]:
        """An API answer parsed with bounds, and the absolute URL of its ``rel="next"`` page, if any."""
        with self._open("GET", url) as response:
            body = self._read_capped(response, self.max_api_bytes, what)
            link = response.headers.get("link")
            base = response.request.url
        try:
            data = loads_json(body)
        except (ValueError, RecursionError) as exc:
            raise HubUnavailable(f"{what}: the Hub answered malformed JSON: {exc}") from exc
        return data, self._next_link(link, base, what) if link else None

    def _next_link(self, header: str, base: httpx2.URL, what: str) -> httpx2.URL | None:
        """The next page; refused (HubUnavailable) unless it is on the Hub's origin."""
        try:
            links = httpx2.Response(200, headers={"link": header}).links
            raw = links.get("next", {}).get("url")
            if not raw:
                return None
            target = base.join(raw)
        except (httpx2.InvalidURL, ValueError, KeyError, IndexError, AttributeError) as exc:
            raise HubUnavailable(f"{what}: malformed Link header {header!r:.200}") from exc
        if origin(target) != self.origin:
            scheme, host, port = origin(target)
            raise HubUnavailable(
                f"{what}: refused a next-page Link to another origin ({scheme}://{host}:{port}); "
                "listings are read from the Hub's origin only"
            )
        return target

    def _pages(self, url: str, what: str, params: dict[str, str] | None = None) -> Iterator[list[Any]]:
        """The pages of a listing, following ``rel="next"`` on the Hub's origin only.

        Ends with HubUnavailable after ``max_pages`` pages, or when a link returns to a page
        already read (a cycle).
        """
        try:
            next_url: httpx2.URL | None = httpx2.URL(url, params=params)
        except httpx2.InvalidURL as exc:
            raise HubUnavailable(f"{what}: invalid URL: {exc}") from exc
        seen: set[str] = set()
        while next_url is not None:
            key = str(next_url)
            if key in seen:
                raise HubUnavailable(
                    f"{what}: the next-page link returns to a page already read (a cycle); "
                    f"stopped after {len(seen)} pages"
                )
            if len(seen) >= self.max_pages:
                raise HubUnavailable(f"{what}: more than {self.max_pages} pages (hub.max_pages); stopped")
            seen.add(key)
            page, next_url = self._get_json(next_url, what)
            if not isinstance(page, list):
                raise HubUnavailable(f"{what}: expected a JSON list")
            yield page
