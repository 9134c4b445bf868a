"""The Hub adapter: the only module that talks to the Hub.

It goes through huggingface_hub's own HTTP session, header builder and error
mapping, so ``HF_ENDPOINT``, ``HF_TOKEN``, proxies and mirrors behave as users
expect, but it issues the requests itself because the client (a) sets no
timeout, (b) retries few calls and ignores ``Retry-After`` dates, and (c)
walks the whole commit history where the tracker needs to stop at the last
revision it read (see ``shared/hub-protocol.md`` §2, §7).

Weights are never downloaded: safetensors headers and pickle members are read
by HTTP range requests, and every read is capped.

The Hub is also treated as a stranger (issue 9, "hostile upstream"); every answer is bounded:

* the token goes only to the configured Hub origin (scheme, host, port): redirects are
  followed here, one hop at a time, with the token only on hops to that origin; a listing's
  ``Link`` to another origin is refused; redirects are capped (``max_redirects``);
* every request has a wall-clock deadline (``request_deadline``), enforced on each socket
  operation (:mod:`tracker.hub.deadline`), and :meth:`HubClient.deadline` sets one around a
  whole poll, after which every request raises :class:`HubDeadlineExceeded`;
* wait hints (``Retry-After``, ``RateLimit``) are parsed without overflow and capped
  (``max_defer``); API answers are read streaming and refused over ``max_api_bytes``;
  listings stop at ``max_pages`` or at a page already seen; JSON is parsed with depth and
  count bounds; file paths from a tree listing are checked before any URL is built with them;
* nothing but :class:`~tracker.errors.TrackerError` subclasses leaves this module.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlsplit

import httpx2
from huggingface_hub import constants
from huggingface_hub.errors import (
    DisabledRepoError,
    EntryNotFoundError,
    GatedRepoError,
    HfHubHTTPError,
    RepositoryNotFoundError,
    RevisionNotFoundError,
)
from huggingface_hub.utils import build_hf_headers, get_session, hf_raise_for_status
from tenacity import RetryCallState, Retrying, retry_if_exception_type, stop_after_attempt

from tracker import __version__
from tracker.bounded import check_json_shape, loads_json
from tracker.errors import (
    ConfigError,
    EntryGone,
    HubDeadlineExceeded,
    HubError,
    HubRateLimited,
    HubUnavailable,
    RepoDisabled,
    RepoGated,
    RepoGone,
    RevisionGone,
    UpstreamFileError,
)
from tracker.hub import deadline
from tracker.hub.guards import header_int, origin, server_wait, unsafe_path_reason
from tracker.model import SHA_RE, Commit, CommitSha, FileEntry, RepoId, Snapshot, validate_repo_id

if TYPE_CHECKING:
    from tracker.settings import Settings

log = logging.getLogger(__name__)

RETRY_STATUS = frozenset({408, 429, 500, 502, 503, 504})
REDIRECT_STATUS = frozenset({301, 302, 303, 307, 308})
MAX_ERROR_BODY = 64 * 1024  # of an error answer, enough for huggingface_hub's message


class _Retryable(Exception):
    """A transient failure; ``wait_hint`` is what the server asked us to wait, if anything."""

    def __init__(self, message: str, wait_hint: float | None = None, status: int | None = None):
        super().__init__(message)
        self.wait_hint = wait_hint
        self.status = status


@dataclass(frozen=True)
class Head:
    """A branch head as the cheapest request reports it."""

    sha: CommitSha
    renamed_to: RepoId | None = None  # the Hub redirected the request to this id


@dataclass(frozen=True)
class RepoInfo:
    repo_id: RepoId  # as the Hub answers it (differs from the asked id after a rename)
    uid: str | None  # the Hub's internal id: a repo deleted and created again gets a new one
    sha: CommitSha | None
    private: bool
    gated: bool | str


@dataclass(frozen=True)
class CommitListing:
    """New commits on a branch, oldest first, and whether the walk met ``since``."""

    commits: tuple[Commit, ...]
    reached_since: bool
    pages: int


@dataclass(frozen=True)
class RejectedPath:
    """A tree entry left out of a snapshot because its path is unsafe to request."""

    path: str
    reason: str


def _parse_date(value: object) -> datetime:
    if not value:
        return datetime.fromtimestamp(0, UTC)
    if not isinstance(value, str):
        raise TypeError("date is not a string")
    return datetime.fromisoformat(value.replace("Z", "+00:00")).astimezone(UTC)


def _is_sha(value: object) -> bool:
    return isinstance(value, str) and SHA_RE.fullmatch(value) is not None


class HubClient:
    """Read-only access to model repos on a Hub (or a mirror, or the stand-in).

    ``token=None`` lets huggingface_hub resolve ``HF_TOKEN`` and the token file;
    ``False`` disables it. The token is sent only to the Hub origin and never logged.
    """

    def __init__(
        self,
        endpoint: str | None = None,
        *,
        token: str | bool | None = None,
        timeout: float = 30.0,
        max_retries: int = 5,
        max_wait: float = 120.0,
        max_defer: float = 86400.0,
        request_deadline: float = 60.0,
        max_api_bytes: int = 32 * 1024 * 1024,
        max_pages: int = 1000,
        max_redirects: int = 10,
        sleep: Callable[[float], None] = time.sleep,
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
        self._local = threading.local()
        self._installed_on: int | None = None

    @classmethod
    def from_settings(cls, settings: Settings, **overrides: Any) -> HubClient:
        """The client ``[hub]`` describes (``overrides``: e.g. ``sleep`` in tests)."""
        options: dict[str, Any] = {
            "timeout": settings.hub_timeout,
            "max_retries": settings.hub_max_retries,
            "max_wait": settings.hub_max_wait,
            "max_defer": settings.hub_max_defer,
            "request_deadline": settings.hub_request_deadline,
            "max_api_bytes": settings.hub_max_api_bytes,
            "max_pages": settings.hub_max_pages,
        }
        options.update(overrides)
        return cls(settings.hub_endpoint, **options)

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
        session = get_session()
        if self._installed_on != id(session):
            if not deadline.install(session):
                log.warning("hub: could not bound socket reads of the HTTP session (httpx2 changed?); "
                            "deadlines are checked between body chunks only")
            self._installed_on = id(session)
        return session

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
        at = time.monotonic() + self.request_deadline
        poll = self._poll_deadline()
        deadline.set_current(min(at, poll[0]) if poll is not None else at)
        self.requests_made += 1
        session = self._session()
        target = url
        for _hop in range(self.max_redirects + 1):
            try:
                request = session.build_request(method, target, headers=self._headers(target, extra),
                                                timeout=self.timeout)
                response = session.send(request, stream=True, follow_redirects=False)
            except httpx2.TimeoutException as exc:
                self._check_poll_deadline(f"{method} {url}")
                late = time.monotonic() >= at
                reason = f"no answer within the {self.request_deadline:g}s deadline" if late else type(exc).__name__
                raise _Retryable(f"{method} {url}: {reason}") from exc
            except (httpx2.NetworkError, httpx2.RemoteProtocolError) as exc:
                raise _Retryable(f"{method} {url}: {type(exc).__name__}: {exc}") from exc
            except (httpx2.HTTPError, httpx2.InvalidURL, httpx2.StreamError) as exc:
                raise HubUnavailable(f"{method} {url}: {type(exc).__name__}: {exc}") from exc
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

    def _api(self, repo: str, *parts: str) -> str:
        self._check_repo(repo)
        tail = "/".join(quote(p, safe="") for p in parts)
        return f"{self.endpoint}/api/models/{repo}" + (f"/{tail}" if tail else "")

    def _resolve_url(self, repo: str, revision: str, path: str) -> str:
        self._check_repo(repo)
        reason = unsafe_path_reason(path)
        if reason is not None:
            raise UpstreamFileError(str(path)[:200], f"{reason}: not requested")
        return f"{self.endpoint}/{repo}/resolve/{quote(revision, safe='')}/{quote(path)}"

    @staticmethod
    def _check_repo(repo: str) -> None:
        try:
            validate_repo_id(repo)
        except ValueError as exc:
            raise ConfigError(str(exc)) from exc

    # -- revisions ----------------------------------------------------------------------------

    def head(self, repo: RepoId, branch: str = "main") -> Head:
        """The branch head, by one HEAD on ``/resolve/`` (the larger rate-limit bucket).

        ``config.json`` need not exist: the Hub sends ``X-Repo-Commit`` on
        EntryNotFound too. A same-origin redirect means the repo was renamed; a redirect
        elsewhere is followed without the token.
        """
        target = httpx2.URL(self._resolve_url(repo, branch, "config.json"))
        renamed_to: RepoId | None = None
        for _ in range(3):  # at most a couple of rename hops
            response = self._head_once(target)
            if response.status_code in REDIRECT_STATUS and "x-repo-commit" not in response.headers:
                target = self._redirect_target("HEAD", target, response.headers.get("location", ""))
                moved = self._repo_from_resolve_path(target.path) if origin(target) == self.origin else None
                if moved and moved != repo:
                    try:
                        renamed_to = validate_repo_id(moved)
                    except ValueError as exc:
                        raise HubUnavailable(f"{repo}: the Hub redirected to a malformed repo id: {exc}") from exc
                continue
            sha = response.headers.get("x-repo-commit")
            if sha:
                if not _is_sha(sha):
                    raise HubUnavailable(f"{repo}: the Hub answered a malformed commit id {sha[:80]!r}")
                return Head(sha=CommitSha(sha), renamed_to=renamed_to)
            break
        # No X-Repo-Commit (an old mirror?): fall back to the API.
        info = self.repo_info(renamed_to or repo, revision=branch)
        if not info.sha:
            raise HubUnavailable(f"{repo}: the Hub reported no head revision for {branch!r}")
        return Head(sha=info.sha, renamed_to=renamed_to or (info.repo_id if info.repo_id != repo else None))

    def _head_once(self, url: httpx2.URL) -> httpx2.Response:
        """A HEAD whose redirects and 404 we inspect ourselves (EntryNotFound still names the commit)."""
        try:
            with self._open("HEAD", url, extra={"Accept-Encoding": "identity"}, follow=False) as response:
                return response
        except EntryGone as exc:
            answer = exc.__cause__.response if isinstance(exc.__cause__, HfHubHTTPError) else None
            if answer is not None and answer.headers.get("x-repo-commit"):
                return answer
            raise

    def _repo_from_resolve_path(self, path: str) -> str | None:
        base = urlsplit(self.endpoint).path.rstrip("/")
        if base and path.startswith(base):
            path = path[len(base):]
        parts = path.strip("/").split("/")
        if "resolve" in parts:
            i = parts.index("resolve")
            return "/".join(parts[:i]) or None
        return None

    def repo_info(self, repo: RepoId, revision: str | None = None) -> RepoInfo:
        url = self._api(repo, "revision", revision) if revision else self._api(repo)
        data, _ = self._get_json(url, f"{repo} info")
        if not isinstance(data, dict) or not isinstance(data.get("id"), str):
            raise HubUnavailable(f"{repo} info: unexpected answer shape")
        try:
            repo_id = validate_repo_id(data["id"])
        except ValueError as exc:
            raise HubUnavailable(f"{repo} info: the Hub answered a malformed repo id: {exc}") from exc
        sha = data.get("sha")
        if sha is not None and not _is_sha(sha):
            raise HubUnavailable(f"{repo} info: the Hub answered a malformed commit id {str(sha)[:80]!r}")
        uid = data.get("_id")
        gated = data.get("gated", False)
        return RepoInfo(
            repo_id=repo_id,
            uid=uid if isinstance(uid, str) else None,
            sha=CommitSha(sha) if sha else None,
            private=bool(data.get("private", False)),
            gated=gated if isinstance(gated, (bool, str)) else bool(gated),
        )

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

    def commits_since(
        self, repo: RepoId, branch: str, since: str | Collection[str] | None, *, limit: int | None = None
    ) -> CommitListing:
        """Commits newer than ``since`` on ``branch``, oldest first.

        Stops paging as soon as ``since`` (a sha, or any of a set of shas) is met
        (the client's ``list_repo_commits`` would walk the whole history). With ``since=None`` it returns the newest
        ``limit`` commits. ``reached_since`` is False when ``since`` was given but is
        not in the branch history any more: history was rewritten.
        """
        newest_first: list[Commit] = []
        pages = 0
        reached = False
        stops = {since} if isinstance(since, str) else set(since) if since is not None else None
        met: str | None = None
        for page in self._pages(self._api(repo, "commits", branch), f"{repo} commits"):
            pages += 1
            for item in page:
                try:
                    sha = item["id"]
                    if not _is_sha(sha):
                        raise TypeError("commit id is not 40 hex digits")
                    title, message = item.get("title"), item.get("message")
                    commit = Commit(
                        sha=CommitSha(sha),
                        date=_parse_date(item.get("date")),
                        title=title if isinstance(title, str) else "",
                        message=message if isinstance(message, str) else "",
                        authors=tuple(str(a.get("user", "")) for a in item.get("authors") or []
                                      if isinstance(a, dict)),
                    )
                except (KeyError, TypeError, AttributeError, ValueError, OverflowError) as exc:
                    raise HubUnavailable(f"{repo} commits: malformed entry {item!r:.200}") from exc
                if stops is not None and sha in stops:
                    reached, met = True, sha
                    break
                newest_first.append(commit)
                if since is None and limit is not None and len(newest_first) >= limit:
                    reached = True
                    break
            if reached:
                break
        commits = tuple(reversed(newest_first))
        # Each commit's parent is the one listed after it (the Hub lists first-parent history).
        linked = []
        for i, c in enumerate(commits):
            parent = commits[i - 1].sha if i > 0 else (CommitSha(met) if met else None)
            linked.append(Commit(c.sha, c.date, c.title, c.message, c.authors, (parent,) if parent else ()))
        return CommitListing(commits=tuple(linked), reached_since=reached or since is None, pages=pages)

    def snapshot(self, repo: RepoId, sha: str) -> Snapshot:
        """The file list of a revision, with blob ids, sizes, LFS sha256 and Xet hashes.

        Entries whose path is unsafe to request are left out and logged; use
        :meth:`snapshot_checked` to get them as problems to report.
        """
        snapshot, rejected = self.snapshot_checked(repo, sha)
        for item in rejected:
            log.warning("hub: %s@%s: tree entry %r left out: %s", repo, sha[:12], item.path, item.reason)
        return snapshot

    def snapshot_checked(self, repo: RepoId, sha: str) -> tuple[Snapshot, tuple[RejectedPath, ...]]:
        """The snapshot, and the tree entries left out of it because their path is unsafe."""
        files: list[FileEntry] = []
        rejected: list[RejectedPath] = []
        url = self._api(repo, "tree", sha)
        for page in self._pages(url, f"{repo}@{sha[:12]} tree", params={"recursive": "true", "expand": "false"}):
            for item in page:
                if not isinstance(item, dict) or item.get("type") != "file":
                    continue
                path = item.get("path")
                reason = unsafe_path_reason(path)
                if reason is not None or not isinstance(path, str):
                    rejected.append(RejectedPath(path=str(path)[:300], reason=reason or "path is not a string"))
                    continue
                try:
                    lfs = item.get("lfs") or None
                    size = int(lfs["size"] if lfs else item["size"])
                    blob_id, lfs_sha = item["oid"], lfs["oid"] if lfs else None
                    xet = item.get("xetHash")
                    if size < 0 or not isinstance(blob_id, str) or not isinstance(lfs_sha, (str, type(None))):
                        raise ValueError("negative size or non-string id")
                    files.append(FileEntry(path=path, size=size, blob_id=blob_id, lfs_sha256=lfs_sha,
                                           xet_hash=xet if isinstance(xet, str) else None))
                except (KeyError, TypeError, ValueError, OverflowError) as exc:
                    raise HubUnavailable(f"{repo}@{sha[:12]} tree: malformed entry {item!r:.200}") from exc
        return Snapshot(files=tuple(sorted(files, key=lambda f: f.path))), tuple(rejected)

    # -- file content -------------------------------------------------------------------------

    def read_file(self, repo: RepoId, sha: str, path: str, *, max_bytes: int) -> bytes:
        """The whole content of a small file, refusing anything over ``max_bytes``."""
        url = self._resolve_url(repo, sha, path)
        with self._open("GET", url, extra={"Accept-Encoding": "identity"}) as response:
            declared = header_int(response.headers.get("content-length"))
            if declared is not None and declared > max_bytes:
                raise UpstreamFileError(path, f"{declared:,} bytes is over the {max_bytes:,}-byte cap")
            body = bytearray()
            for chunk in self._chunks(response):
                body += chunk
                if len(body) > max_bytes:
                    raise UpstreamFileError(path, f"over the {max_bytes:,}-byte cap")
        if declared is not None and len(body) != declared:
            raise HubUnavailable(f"{repo}@{sha[:12]}/{path}: got {len(body)} of {declared} bytes")
        return bytes(body)

    def read_range(self, repo: RepoId, sha: str, path: str, start: int, end: int) -> bytes:
        """Bytes ``start..end`` inclusive, by an HTTP range request (never more, even if Range is ignored)."""
        want = end - start + 1
        url = self._resolve_url(repo, sha, path)
        extra = {"Range": f"bytes={start}-{end}", "Accept-Encoding": "identity"}
        with self._open("GET", url, extra=extra) as response:
            skip = start if response.status_code == 200 else 0  # server ignored Range: skip, then stop
            out = bytearray()
            for chunk in self._chunks(response):
                if skip:
                    drop = min(skip, len(chunk))
                    chunk, skip = chunk[drop:], skip - drop
                out += chunk
                if len(out) >= want:
                    break
        return bytes(out[:want])

    def safetensors_header(self, repo: RepoId, sha: str, path: str, *, max_bytes: int) -> dict[str, Any]:
        """The JSON header of a safetensors file, in one range read (two if it is over 100 kB)."""
        first = self.read_range(repo, sha, path, 0, 100_000 - 1)
        if len(first) < 8:
            raise UpstreamFileError(path, "not a safetensors file (shorter than 8 bytes)")
        length = int.from_bytes(first[:8], "little")
        if length > max_bytes:
            raise UpstreamFileError(path, f"safetensors header of {length:,} bytes is over the {max_bytes:,}-byte cap")
        raw = first[8 : 8 + length] if 8 + length <= len(first) else self.read_range(repo, sha, path, 8, 8 + length - 1)
        if len(raw) != length:
            raise UpstreamFileError(path, f"safetensors header truncated ({len(raw)} of {length} bytes)")
        try:
            header = loads_json(raw)
        except ValueError as exc:  # UnicodeDecodeError, JSONDecodeError and UntrustedInput alike
            raise UpstreamFileError(path, f"safetensors header is unreadable: {exc}") from exc
        if not isinstance(header, dict):
            raise UpstreamFileError(path, "safetensors header is not a JSON object")
        return header


__all__ = ["CommitListing", "Head", "HubClient", "HubError", "RejectedPath", "RepoInfo"]
