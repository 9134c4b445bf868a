"""The Hub adapter: the Hub operations the tracker needs, on :class:`~tracker.adapters.hub.transport.HubTransport`.

It issues the requests itself, rather than through ``HfApi``, because the client (a) sets
no timeout, (b) retries few calls and ignores ``Retry-After`` dates, and (c) walks the whole
commit history where the tracker needs to stop at the last revision it read (see
``shared/hub-protocol.md`` §2, §7). The transport under it bounds every request (token
origin, redirects, deadlines, waits, sizes, pages: see its docstring).

Weights are never downloaded: safetensors headers and pickle members are read by HTTP range
requests, and every read is capped. What the Hub answers is checked before it is used: commit
ids, repo ids, dates, sizes, and file paths before any URL is built with them.
"""

from __future__ import annotations

import logging
from collections.abc import Collection
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlencode, urlsplit

import httpx2
from huggingface_hub.errors import HfHubHTTPError

from tracker.adapters.hub.guards import header_int, origin, unsafe_path_reason
from tracker.adapters.hub.transport import REDIRECT_STATUS, HubTransport
from tracker.core.bounded import read_safetensors_header
from tracker.core.errors import (
    ConfigError,
    EntryGone,
    HubError,
    HubUnavailable,
    UpstreamFileError,
)
from tracker.core.hub_types import (
    ChangeListing,
    CommitListing,
    Head,
    ListedModel,
    MatchListing,
    OwnerListing,
    RejectedPath,
    RepoInfo,
)
from tracker.core.model import SHA_RE, Commit, CommitSha, FileEntry, RepoId, Snapshot, validate_repo_id

if TYPE_CHECKING:
    from tracker.adapters.settings import Settings

log = logging.getLogger("tracker.hub.client")  # the name operators filter logs by, not the module path


def _parse_date(value: object) -> datetime:
    if not value:
        return datetime.fromtimestamp(0, UTC)
    if not isinstance(value, str):
        raise TypeError("date is not a string")
    return datetime.fromisoformat(value.replace("Z", "+00:00")).astimezone(UTC)


def _gated(item: dict[str, Any]) -> bool:
    """Whether a listed model says it is gated (``"auto"``, ``"manual"``, or ``true`` from an older Hub)."""
    value = item.get("gated")
    return value is True or value in ("auto", "manual")


# What an identity check asks ``/api/models/{repo}`` for, by ``expand=``: never the siblings list, which
# is the whole file list (a repo with a million files answers 48 MB). ``_id`` and ``id`` come back always;
# ``_id`` is no ``expand`` property (huggingface_hub's ExpandModelProperty_T has no such value).
IDENTITY_EXPAND = ("sha", "gated", "private")
# What the listings ask for (docs/scaling.md): the head and its date, and whether the model is gated.
# ``private`` is asked only with a token: without one, a private model is not listed at all.
LISTING_EXPAND = ("sha", "lastModified", "gated")


def _is_sha(value: object) -> bool:
    return isinstance(value, str) and SHA_RE.fullmatch(value) is not None

class _ChangeWalk:
    """The models read so far from the change listing's pages, newest first, each listed once."""

    def __init__(self, what: str) -> None:
        self.what = what
        self.models: list[ListedModel] = []
        self.seen: set[str] = set()
        self.repeated = 0
        self.disorder = False  # a model newer than the one listed before it
        self.previous: datetime | None = None

    def read_page(self, page: list[Any]) -> tuple[int, datetime | None]:
        """Add the page's models not listed before; how many were new, and the page's oldest date."""
        fresh = 0
        oldest: datetime | None = None
        for item in page:
            if not isinstance(item, dict):
                continue
            try:
                when = _parse_date(item.get("lastModified"))
            except (TypeError, ValueError, OverflowError) as exc:
                raise HubUnavailable(f"{self.what}: malformed lastModified {item.get('lastModified')!r:.80}") from exc
            oldest = when if oldest is None else min(oldest, when)
            valid = _valid_repo_id(item.get("id"))
            if valid is None:
                continue
            if valid.lower() in self.seen:
                self.repeated += 1
                continue
            self.seen.add(valid.lower())
            fresh += 1
            if self.previous is not None and when > self.previous:
                self.disorder = True
            self.previous = when
            sha = item.get("sha")
            self.models.append(ListedModel(repo_id=valid, sha=CommitSha(str(sha)) if _is_sha(sha) else None,
                                           last_modified=when, gated=_gated(item)))
        return fresh, oldest


class _PageGuard:
    """Tells a listing's page seen before: the same link, or the same models (a cursor that repeats a page).

    A page seen twice ends the listing as incomplete: following such a cursor to the page cap would
    spend the whole cap on one page.
    """

    def __init__(self) -> None:
        self._links: set[str] = set()
        self._pages: set[tuple[str, ...]] = set()

    def repeated(self, link: httpx2.URL | None, page: list[Any]) -> bool:
        """Whether ``page`` (read from ``link``) was read before; remembers it."""
        ids = tuple(str(item.get("id")) for item in page if isinstance(item, dict))
        key = str(link) if link is not None else ""
        seen = (ids in self._pages if ids else False) or key in self._links
        self._pages.add(ids)
        self._links.add(key)
        return seen


def _valid_repo_id(value: object) -> RepoId | None:
    try:
        return validate_repo_id(value) if isinstance(value, str) else None
    except ValueError:
        return None


class HubClient(HubTransport):
    """Read-only access to model repos on a Hub (or a mirror, or the stand-in).

    ``token=None`` lets huggingface_hub resolve ``HF_TOKEN`` and the token file;
    ``False`` disables it. The token is sent only to the Hub origin and never logged.
    """

    @classmethod
    def from_settings(cls, settings: Settings, **overrides: Any) -> HubClient:
        """The client ``[hub]`` describes (``overrides``: e.g. ``sleep`` in tests)."""
        options: dict[str, Any] = {
            "timeout": settings.hub.timeout,
            "max_retries": settings.hub.max_retries,
            "max_wait": settings.hub.max_wait,
            "max_defer": settings.hub.max_defer,
            "request_deadline": settings.hub.request_deadline,
            "max_api_bytes": settings.hub.max_api_bytes,
            "max_pages": settings.hub.max_pages,
        }
        options.update(overrides)
        return cls(settings.hub.endpoint, **options)

    # -- URLs ---------------------------------------------------------------------------------

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
        EntryNotFound too. A same-origin redirect means the repo was renamed. A redirect to
        another origin is not followed (nothing there can vouch for a commit of this Hub):
        the head is asked of the API instead.
        """
        target = httpx2.URL(self._resolve_url(repo, branch, "config.json"))
        renamed_to: RepoId | None = None
        for _ in range(3):  # at most a couple of rename hops
            response = self._head_once(target)
            if response.status_code in REDIRECT_STATUS and "x-repo-commit" not in response.headers:
                target = self._redirect_target("HEAD", target, response.headers.get("location", ""))
                if origin(target) != self.origin:
                    break
                moved = self._repo_from_resolve_path(target.path)
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

    def _listing_expand(self) -> list[tuple[str, str]]:
        """``expand=`` pairs for a listing: :data:`LISTING_EXPAND`, and ``private`` when a token goes with it."""
        names = [*LISTING_EXPAND, *(("private",) if self.has_token() else ())]
        return [("expand", name) for name in names]

    def has_token(self) -> bool:
        """Whether requests to the Hub carry a token (this client's, or ``HF_TOKEN`` and the token file)."""
        if self.token is False:
            return False
        if isinstance(self.token, str):
            return bool(self.token)
        from huggingface_hub import get_token

        return get_token() is not None

    def repo_info(self, repo: RepoId, revision: str | None = None) -> RepoInfo:
        """Who the repo is (its ``_id``, id, head, gated, private): ``expand=`` those only, never the siblings list."""
        url = self._api(repo, "revision", revision) if revision else self._api(repo)
        url += "?" + urlencode([("expand", name) for name in IDENTITY_EXPAND])
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
    def owner_heads(self, owner: str, *, max_pages: int) -> OwnerListing:
        """The head sha of every model of ``owner``: ``GET /api/models?author=…&expand=sha&expand=lastModified``.

        One request per page (the ``api`` bucket) for all of an owner's models, where a HEAD per
        repo costs one ``resolvers`` request each. Stops after ``max_pages`` pages (``complete``
        is then False). Items of another owner, malformed ids and malformed shas are ignored (a
        watched repo missing from the answer is polled on its own).
        """
        try:
            validate_repo_id(f"{owner}/x")
        except ValueError as exc:
            raise ConfigError(f"invalid owner {owner!r:.100}: {exc}") from exc
        url = f"{self.endpoint}/api/models?" + urlencode([("author", owner), *self._listing_expand()])
        heads: dict[str, CommitSha | None] = {}
        gated: set[str] = set()
        prefix = owner.lower() + "/"
        what = f"models of {owner}"
        next_url: httpx2.URL | None = httpx2.URL(url)
        pages = 0
        guard = _PageGuard()
        repeated = False
        while next_url is not None and pages < max_pages:
            link = next_url
            page, next_url = self._get_json(next_url, what)
            pages += 1
            if not isinstance(page, list):
                raise HubUnavailable(f"{what}: expected a JSON list")
            if guard.repeated(link, page):
                repeated = True  # the cursor answered a page already read: incomplete, whatever follows
                break
            for item in page:
                repo_id = item.get("id") if isinstance(item, dict) else None
                if not isinstance(repo_id, str) or not repo_id.lower().startswith(prefix):
                    continue
                sha = item.get("sha")
                heads[repo_id.lower()] = CommitSha(sha) if _is_sha(sha) else None
                if _gated(item):
                    gated.add(repo_id.lower())
        complete = next_url is None and not repeated
        return OwnerListing(heads=heads, complete=complete, pages=pages, gated=frozenset(gated))

    def recent_models(self, *, stop_before: datetime | None, max_pages: int) -> ChangeListing:
        """Page through the Hub-wide change listing until a page's oldest model is older than ``stop_before``.

        ``GET /api/models?sort=lastModified&direction=-1&expand=sha&expand=lastModified``, following
        the ``Link`` cursor (``shared/hub-protocol.md`` §2; ``direction`` is the Hub's default, sent
        to be explicit). ``stop_before=None``: the first page only (a first watermark). At most
        ``max_pages`` pages; a walk that stops there has ``reached`` False. Models listed twice
        count in ``repeated``; two pages in a row with nothing new end the walk (``reached`` False).
        Malformed ids and shas are left out (a watched repo missing from the answer is checked on
        its own); a malformed ``lastModified`` makes the listing unusable (HubUnavailable).
        """
        url = f"{self.endpoint}/api/models?" + urlencode(
            [("sort", "lastModified"), ("direction", "-1"), *self._listing_expand()])
        what = "the Hub's change listing"
        walk = _ChangeWalk(what)
        pages = page_size = stale_pages = 0
        reached = False
        next_url: httpx2.URL | None = httpx2.URL(url)
        guard = _PageGuard()
        while next_url is not None and pages < max_pages:
            link = next_url
            page, next_url = self._get_json(next_url, what)
            pages += 1
            if not isinstance(page, list):
                raise HubUnavailable(f"{what}: expected a JSON list")
            page_size = max(page_size, len(page))
            if guard.repeated(link, page):
                walk.repeated += len(page)
                stale_pages = 1
                break  # the cursor answered a page already read: the walk ends short of its watermark
            fresh, oldest = walk.read_page(page)
            stale_pages = stale_pages + 1 if page and not fresh else 0
            if stale_pages >= 2:
                break  # the cursor keeps answering models listed already, in other pages
            if stop_before is None or next_url is None or (oldest is not None and oldest < stop_before):
                reached = stale_pages == 0
                break
        return ChangeListing(models=tuple(walk.models), pages=pages, reached=reached, repeated=walk.repeated,
                             disorder=walk.disorder, page_size=page_size)

    def models_matching(self, query: list[tuple[str, str]], *, downloads_min: int | None,
                        max_items: int) -> MatchListing:
        """Models ``GET /api/models?<query>`` lists, up to ``max_items``.

        With ``downloads_min`` the query sorts by downloads (highest first): the walk stops at the
        first model below it. Malformed ids are left out.
        """
        url = f"{self.endpoint}/api/models?" + urlencode(query)
        what = "models matching a watch rule"
        found: list[RepoId] = []
        pages = 0
        next_url: httpx2.URL | None = httpx2.URL(url)
        complete = True
        guard = _PageGuard()
        while next_url is not None:
            if pages >= self.max_pages:
                raise HubUnavailable(f"{what}: more than {self.max_pages} pages")
            link = next_url
            page, next_url = self._get_json(next_url, what)
            pages += 1
            if not isinstance(page, list):
                raise HubUnavailable(f"{what}: expected a JSON list")
            if guard.repeated(link, page):
                # The cursor answered a page already read: what was listed is not all the rule matches.
                return MatchListing(repo_ids=tuple(found), pages=pages, complete=False)
            for item in page:
                if not isinstance(item, dict) or not isinstance(item.get("id"), str):
                    continue
                if downloads_min is not None:
                    downloads = item.get("downloads")
                    if not isinstance(downloads, int) or downloads < downloads_min:
                        return MatchListing(repo_ids=tuple(found), pages=pages, complete=True)
                try:
                    found.append(validate_repo_id(item["id"]))
                except ValueError:
                    continue
                if len(found) >= max_items:
                    return MatchListing(repo_ids=tuple(found), pages=pages, complete=next_url is None)
        return MatchListing(repo_ids=tuple(found), pages=pages, complete=complete)

    def search_models(self, search: str, *, author: str | None = None, limit: int = 50) -> list[RepoId]:
        """Model ids the Hub's search finds (``GET /api/models?search=…``): one page, at most ``limit``.

        For suggestions only (``watch add`` offers close matches to an id the Hub does not have);
        malformed ids in the answer are skipped.
        """
        params = [("search", search[:96]), ("limit", str(limit))]
        if author:
            params.append(("author", author))
        data, _ = self._get_json(f"{self.endpoint}/api/models?" + urlencode(params), f"search for {search!r:.100}")
        if not isinstance(data, list):
            raise HubUnavailable("model search: expected a JSON list")
        found: list[RepoId] = []
        for item in data[:limit]:
            try:
                found.append(validate_repo_id(str(item.get("id") if isinstance(item, dict) else "")))
            except ValueError:
                continue
        return found

    def commits_since(
        self, repo: RepoId, branch: str, since: str | Collection[str] | None, *, limit: int | None = None
    ) -> CommitListing:
        """Commits newer than ``since`` on ``branch``, oldest first.

        Stops paging as soon as ``since`` (a sha, or any of a set of shas) is met
        (the client's ``list_repo_commits`` would walk the whole history). With ``since=None`` it returns the newest
        ``limit`` commits. ``reached_since`` is False when ``since`` was given but is
        not in the branch history any more: history was rewritten. With ``since`` and
        ``limit`` both given, it stops after ``limit`` commits that did not meet ``since``
        (``truncated``: a flood of new commits, or a long rewrite).
        """
        newest_first: list[Commit] = []
        pages = 0
        reached = truncated = False
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
                if limit is not None and len(newest_first) >= limit:
                    reached = since is None
                    truncated = since is not None
                    break
            if reached or truncated:
                break
        commits = tuple(reversed(newest_first))
        # Each commit's parent is the one listed after it (the Hub lists first-parent history).
        linked = []
        for i, c in enumerate(commits):
            parent = commits[i - 1].sha if i > 0 else (CommitSha(met) if met else None)
            linked.append(Commit(c.sha, c.date, c.title, c.message, c.authors, (parent,) if parent else ()))
        return CommitListing(commits=tuple(linked), reached_since=reached or since is None, pages=pages,
                             truncated=truncated)

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
        return read_safetensors_header(
            lambda offset, length: self.read_range(repo, sha, path, offset, offset + length - 1), path,
            max_bytes=max_bytes)


__all__ = ["ChangeListing", "CommitListing", "Head", "ListedModel", "MatchListing", "HubClient", "HubError", "OwnerListing", "RejectedPath", "RepoInfo"]
