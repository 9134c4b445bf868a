"""The Hub adapter: the only module that talks to the Hub.

It goes through huggingface_hub's own HTTP session, header builder and error
mapping, so ``HF_ENDPOINT``, ``HF_TOKEN``, proxies and mirrors behave as users
expect, but it issues the requests itself because the client (a) sets no
timeout, (b) retries few calls and ignores ``Retry-After`` dates, and (c)
walks the whole commit history where the tracker needs to stop at the last
revision it read (see ``shared/hub-protocol.md`` §2, §7).

Weights are never downloaded: safetensors headers and pickle members are read
by HTTP range requests, and every read is capped.
"""

from __future__ import annotations

import json
import logging
import random
import time
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
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
from huggingface_hub.utils import build_hf_headers, get_session, hf_raise_for_status, parse_ratelimit_headers
from tenacity import RetryCallState, Retrying, retry_if_exception_type, stop_after_attempt

from tracker import __version__
from tracker.errors import (
    EntryGone,
    HubError,
    HubRateLimited,
    HubUnavailable,
    RepoDisabled,
    RepoGated,
    RepoGone,
    RevisionGone,
    UpstreamFileError,
)
from tracker.model import SHA_RE, Commit, CommitSha, FileEntry, RepoId, Snapshot, validate_repo_id

log = logging.getLogger(__name__)

RETRY_STATUS = frozenset({408, 429, 500, 502, 503, 504})


class _Retryable(Exception):
    """A transient failure; ``wait_hint`` is what the server asked us to wait, if anything."""

    def __init__(self, message: str, wait_hint: float | None = None, response: httpx2.Response | None = None):
        super().__init__(message)
        self.wait_hint = wait_hint
        self.response = response


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


def _server_wait(response: httpx2.Response) -> float | None:
    """Seconds the server asked us to wait: RateLimit ``t`` when exhausted, else Retry-After."""
    info = parse_ratelimit_headers(response.headers)
    if info is not None and info.remaining == 0:
        return float(info.reset_in_seconds)
    value = response.headers.get("retry-after")
    if value:
        value = value.strip()
        if value.isdigit():
            return float(value)
        try:  # an HTTP-date, which huggingface_hub ignores
            from email.utils import parsedate_to_datetime

            return max(0.0, (parsedate_to_datetime(value) - datetime.now(UTC)).total_seconds())
        except (TypeError, ValueError):
            return None
    return None


def _parse_date(value: str | None) -> datetime:
    if not value:
        return datetime.fromtimestamp(0, UTC)
    return datetime.fromisoformat(value.replace("Z", "+00:00")).astimezone(UTC)


class HubClient:
    """Read-only access to model repos on a Hub (or a mirror, or the stand-in).

    ``token=None`` lets huggingface_hub resolve ``HF_TOKEN`` and the token file;
    ``False`` disables it. The token is sent only to the Hub origin (httpx drops
    it on cross-origin redirects) and never logged.
    """

    def __init__(
        self,
        endpoint: str | None = None,
        *,
        token: str | bool | None = None,
        timeout: float = 30.0,
        max_retries: int = 5,
        max_wait: float = 120.0,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.endpoint = (endpoint or constants.ENDPOINT).rstrip("/")
        # No telemetry, and above all no agent-harness lookup on huggingface.co when the
        # endpoint is a mirror configured here rather than in HF_ENDPOINT (hub-protocol.md §1).
        constants.HF_HUB_DISABLE_TELEMETRY = True
        self.token = token
        self.timeout = timeout
        self.max_retries = max_retries
        self.max_wait = max_wait
        self.sleep = sleep
        self.requests_made = 0

    # -- plumbing -----------------------------------------------------------------------------

    def _headers(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        return build_hf_headers(
            token=self.token, library_name="upstream-tracker", library_version=__version__, headers=extra
        )

    def _wait(self, state: RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome else None
        hint = exc.wait_hint if isinstance(exc, _Retryable) else None
        if hint is not None:
            return hint + random.uniform(0, 0.25)
        # exponential backoff with full jitter, capped
        return random.uniform(0, min(30.0, 0.5 * 2 ** (state.attempt_number - 1)))

    def _send_once(self, method: str, url: str, *, stream: bool, **kwargs: Any) -> httpx2.Response:
        self.requests_made += 1
        session = get_session()
        try:
            follow = kwargs.pop("follow_redirects", True)
            request = session.build_request(method, url, timeout=self.timeout, **kwargs)
            response = session.send(request, stream=stream, follow_redirects=follow)
        except (httpx2.TimeoutException, httpx2.NetworkError, httpx2.RemoteProtocolError) as exc:
            raise _Retryable(f"{method} {url}: {type(exc).__name__}: {exc}") from exc
        if response.status_code in RETRY_STATUS:
            wait = _server_wait(response)
            if stream:
                response.close()
            if wait is not None and wait > self.max_wait:
                raise HubRateLimited(
                    f"{method} {url}: {response.status_code}, server asks to wait {wait:.0f}s", retry_after=wait
                )
            raise _Retryable(f"{method} {url}: HTTP {response.status_code}", wait_hint=wait, response=response)
        return response

    def _send(self, method: str, url: str, *, stream: bool = False, **kwargs: Any) -> httpx2.Response:
        """Send with retries on 408/429/5xx and network errors, honouring Retry-After and RateLimit."""
        follow = kwargs.pop("follow_redirects", True)
        retrying = Retrying(
            stop=stop_after_attempt(self.max_retries + 1),
            retry=retry_if_exception_type(_Retryable),
            wait=self._wait,
            sleep=self.sleep,
            reraise=True,
        )
        try:
            response = retrying(self._send_once, method, url, stream=stream, follow_redirects=follow, **kwargs)
        except _Retryable as exc:
            if exc.response is not None and exc.response.status_code == 429:
                raise HubRateLimited(str(exc), retry_after=exc.wait_hint) from exc
            raise HubUnavailable(f"{exc} (after {self.max_retries} retries)") from exc
        self._raise_for_status(response)
        return response

    @staticmethod
    def _raise_for_status(response: httpx2.Response) -> None:
        if response.status_code < 400:
            return
        if not response.is_stream_consumed:
            try:
                response.read()
            except httpx2.HTTPError:
                pass
        try:
            hf_raise_for_status(response)
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

    def _json(self, response: httpx2.Response, what: str) -> Any:
        try:
            return response.json()
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise HubUnavailable(f"{what}: the Hub answered malformed JSON: {exc}") from exc

    def _api(self, repo: str, *parts: str) -> str:
        tail = "/".join(quote(p, safe="") for p in parts)
        return f"{self.endpoint}/api/models/{repo}" + (f"/{tail}" if tail else "")

    def _resolve_url(self, repo: str, revision: str, path: str) -> str:
        return f"{self.endpoint}/{repo}/resolve/{quote(revision, safe='')}/{quote(path)}"

    # -- revisions ----------------------------------------------------------------------------

    def head(self, repo: RepoId, branch: str = "main") -> Head:
        """The branch head, by one HEAD on ``/resolve/`` (the larger rate-limit bucket).

        ``config.json`` need not exist: the Hub sends ``X-Repo-Commit`` on
        EntryNotFound too. A same-origin redirect means the repo was renamed.
        """
        url = self._resolve_url(repo, branch, "config.json")
        renamed_to: RepoId | None = None
        for _ in range(3):  # at most a couple of rename hops
            response = self._head_once(url)
            if response.status_code in (301, 302, 303, 307, 308) and "x-repo-commit" not in response.headers:
                location = response.headers.get("location", "")
                target = httpx2.URL(url).join(location)
                moved = self._repo_from_resolve_path(target.path)
                if moved and moved != repo:
                    try:
                        renamed_to = validate_repo_id(moved)
                    except ValueError as exc:
                        raise HubUnavailable(f"{repo}: the Hub redirected to a malformed repo id: {exc}") from exc
                url = str(target)
                continue
            sha = response.headers.get("x-repo-commit")
            if sha:
                if not SHA_RE.match(sha):
                    raise HubUnavailable(f"{repo}: the Hub answered a malformed commit id {sha[:80]!r}")
                return Head(sha=CommitSha(sha), renamed_to=renamed_to)
            self._raise_for_status(response)
            break
        # No X-Repo-Commit (an old mirror?): fall back to the API.
        info = self.repo_info(renamed_to or repo, revision=branch)
        if not info.sha:
            raise HubUnavailable(f"{repo}: the Hub reported no head revision for {branch!r}")
        return Head(sha=info.sha, renamed_to=renamed_to or (info.repo_id if info.repo_id != repo else None))

    def _head_once(self, url: str) -> httpx2.Response:
        """A HEAD whose 404 we inspect ourselves (EntryNotFound still names the commit)."""
        try:
            return self._send("HEAD", url, headers=self._headers({"Accept-Encoding": "identity"}),
                              follow_redirects=False)
        except EntryGone as exc:
            response = exc.__cause__.response if isinstance(exc.__cause__, HfHubHTTPError) else None
            if response is not None and response.headers.get("x-repo-commit"):
                return response
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
        data = self._json(self._send("GET", url, headers=self._headers()), f"{repo} info")
        if not isinstance(data, dict) or "id" not in data:
            raise HubUnavailable(f"{repo} info: unexpected answer shape")
        return RepoInfo(
            repo_id=RepoId(data["id"]),
            uid=data.get("_id"),
            sha=data.get("sha"),
            private=bool(data.get("private", False)),
            gated=data.get("gated", False),
        )

    def _pages(self, url: str, params: dict[str, str] | None = None) -> Iterator[list[Any]]:
        next_url: str | None = url
        first = True
        while next_url:
            response = self._send("GET", next_url, headers=self._headers(), params=params if first else None)
            first = False
            page = self._json(response, next_url)
            if not isinstance(page, list):
                raise HubUnavailable(f"{next_url}: expected a JSON list")
            yield page
            next_url = response.links.get("next", {}).get("url")

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
        for page in self._pages(self._api(repo, "commits", branch)):
            pages += 1
            for item in page:
                try:
                    sha = item["id"]
                    if not isinstance(sha, str) or not SHA_RE.match(sha):
                        raise TypeError("commit id is not 40 hex digits")
                    commit = Commit(
                        sha=CommitSha(sha),
                        date=_parse_date(item.get("date")),
                        title=item.get("title") or "",
                        message=item.get("message") or "",
                        authors=tuple(a.get("user", "") for a in item.get("authors") or [] if isinstance(a, dict)),
                    )
                except (KeyError, TypeError, AttributeError) as exc:
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
        """The file list of a revision, with blob ids, sizes, LFS sha256 and Xet hashes."""
        files: list[FileEntry] = []
        url = self._api(repo, "tree", sha)
        for page in self._pages(url, params={"recursive": "true", "expand": "false"}):
            for item in page:
                if not isinstance(item, dict) or item.get("type") != "file":
                    continue
                try:
                    lfs = item.get("lfs") or None
                    files.append(
                        FileEntry(
                            path=item["path"],
                            size=int(lfs["size"] if lfs else item["size"]),
                            blob_id=item["oid"],
                            lfs_sha256=lfs["oid"] if lfs else None,
                            xet_hash=item.get("xetHash"),
                        )
                    )
                except (KeyError, TypeError, ValueError) as exc:
                    raise HubUnavailable(f"{repo}@{sha[:12]} tree: malformed entry {item!r:.200}") from exc
        return Snapshot(files=tuple(sorted(files, key=lambda f: f.path)))

    # -- file content -------------------------------------------------------------------------

    def read_file(self, repo: RepoId, sha: str, path: str, *, max_bytes: int) -> bytes:
        """The whole content of a small file, refusing anything over ``max_bytes``."""
        url = self._resolve_url(repo, sha, path)
        response = self._send("GET", url, headers=self._headers(), stream=True)
        try:
            declared = response.headers.get("content-length")
            if declared and declared.isdigit() and int(declared) > max_bytes:
                raise UpstreamFileError(path, f"{int(declared):,} bytes is over the {max_bytes:,}-byte cap")
            chunks: list[bytes] = []
            total = 0
            try:
                for chunk in response.iter_bytes():
                    total += len(chunk)
                    if total > max_bytes:
                        raise UpstreamFileError(path, f"over the {max_bytes:,}-byte cap")
                    chunks.append(chunk)
            except (httpx2.HTTPError, httpx2.StreamError) as exc:
                raise HubUnavailable(f"{repo}@{sha[:12]}/{path}: body cut off: {exc}") from exc
            body = b"".join(chunks)
            if declared and declared.isdigit() and len(body) != int(declared):
                raise HubUnavailable(f"{repo}@{sha[:12]}/{path}: got {len(body)} of {declared} bytes")
            return body
        finally:
            response.close()

    def read_range(self, repo: RepoId, sha: str, path: str, start: int, end: int) -> bytes:
        """Bytes ``start..end`` inclusive, by an HTTP range request (never more, even if Range is ignored)."""
        want = end - start + 1
        url = self._resolve_url(repo, sha, path)
        response = self._send("GET", url, headers=self._headers({"Range": f"bytes={start}-{end}"}), stream=True)
        try:
            skip = start if response.status_code == 200 else 0  # server ignored Range: skip, then stop
            out = bytearray()
            try:
                for chunk in response.iter_bytes():
                    if skip:
                        drop = min(skip, len(chunk))
                        chunk, skip = chunk[drop:], skip - drop
                    out += chunk
                    if len(out) >= want:
                        break
            except (httpx2.HTTPError, httpx2.StreamError) as exc:
                raise HubUnavailable(f"{repo}@{sha[:12]}/{path}: range read cut off: {exc}") from exc
            return bytes(out[:want])
        finally:
            response.close()

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
            header = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise UpstreamFileError(path, f"safetensors header is not valid JSON: {exc}") from exc
        if not isinstance(header, dict):
            raise UpstreamFileError(path, "safetensors header is not a JSON object")
        return header


__all__ = ["CommitListing", "Head", "HubClient", "HubError", "RepoInfo"]
