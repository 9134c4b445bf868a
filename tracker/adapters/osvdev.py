"""OSV.dev client (edge module: HTTP through httpx2): which known vulnerabilities affect a package version.

Shape of the API (``shared/osv/NOTES.md`` §2): ``POST /v1/querybatch`` answers
with ids and ``modified`` only, ``{}`` for a query with no match, and a
``next_page_token`` per query that must be followed by re-sending just those
queries with ``page_token``; ``GET /v1/vulns/{id}`` gives the full record.

A dependency check must never break a poll: transient failures (connection
errors, timeouts, 429, 5xx) are retried with exponential backoff (tenacity),
and when retries run out the lookups are reported in :attr:`BatchResult.failed`
for the caller to retry on a later poll - nothing here raises for a network or
server problem. Results are cached in any ``MutableMapping`` (a dict, a
``shelve``, a store-backed mapping) as JSON-able values with the time fetched,
and reused for ``max_age`` seconds: vulnerabilities get published over time, so
a cached "no vulns" must eventually be asked again.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, MutableMapping
from dataclasses import dataclass, field
from typing import Any

import httpx2
from tenacity import RetryError, Retrying, retry_if_exception, stop_after_attempt, wait_exponential

__all__ = ["DEFAULT_BASE_URL", "BatchResult", "OsvClient", "PackageKey", "VulnResult"]

DEFAULT_BASE_URL = "https://api.osv.dev"
MAX_BATCH = 1000  # OSV.dev rejects larger batches with 400 "too many queries"
MAX_PAGES = 100  # safety net against a server that keeps handing out tokens

PackageKey = tuple[str, str]  # (name, version)


class _Transient(Exception):
    """A failure worth retrying (network error, 429, 5xx)."""


class _Permanent(Exception):
    """A failure retrying will not fix (4xx other than 429, a malformed answer)."""


@dataclass
class BatchResult:
    """What :meth:`OsvClient.querybatch` found.

    ``vulns``: ``(name, version) -> [{"id", "modified"}, ...]`` for every lookup
    that succeeded (an empty list means "no known vulnerability"); ``failed``:
    ``(name, version) -> reason`` for lookups to retry later; ``cached``: the
    keys answered from the cache without a request.
    """

    vulns: dict[PackageKey, list[dict[str, str]]] = field(default_factory=dict)
    failed: dict[PackageKey, str] = field(default_factory=dict)
    cached: set[PackageKey] = field(default_factory=set)

    @property
    def ok(self) -> bool:
        return not self.failed


@dataclass
class VulnResult:
    """What :meth:`OsvClient.get_vuln` found: ``record`` (None when not found or failed), ``error`` when failed."""

    id: str
    record: dict[str, Any] | None = None
    error: str | None = None

    @property
    def found(self) -> bool:
        return self.record is not None


class OsvClient:
    """A small, failure-tolerant client for OSV.dev's v1 API (or a compatible stand-in).

    ``cache`` holds batch results under ``"query:<ecosystem>:<name>:<version>"``
    and full records under ``"vuln:<id>"``; ``max_age`` (seconds) bounds how long
    a batch result is trusted. ``max_attempts``, ``backoff`` and ``backoff_max``
    tune the retries (``backoff=0`` in tests); ``transport`` and ``clock`` are
    injection points for tests.
    """

    # Keyword-only: the bounds by name, and the seams tests use (transport, clock, cache).
    def __init__(  # noqa: PLR0913
        self,
        base_url: str = DEFAULT_BASE_URL,
        *,
        timeout: float = 20.0,
        cache: MutableMapping[str, Any] | None = None,
        max_age: float = 24 * 3600,
        max_attempts: int = 4,
        backoff: float = 0.5,
        backoff_max: float = 8.0,
        transport: httpx2.BaseTransport | None = None,
        clock: Callable[[], float] = time.time,
    ):
        self.base_url = base_url.rstrip("/")
        self.cache = cache
        self.max_age = max_age
        self.max_attempts = max_attempts
        self.backoff = backoff
        self.backoff_max = backoff_max
        self.clock = clock
        self._http = httpx2.Client(
            base_url=self.base_url, timeout=timeout, transport=transport,
            headers={"User-Agent": "upstream-tracker (dependency check)"},
        )

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> OsvClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------- transport

    def _request(self, method: str, path: str, body: dict[str, Any] | None = None) -> httpx2.Response:
        """One request with retries; returns a 2xx or 404 response, raises _Transient/_Permanent."""

        def once() -> httpx2.Response:
            try:
                response = self._http.request(method, path, json=body)
            except httpx2.TransportError as exc:
                raise _Transient(f"{type(exc).__name__}: {exc}") from exc
            if response.status_code == 429 or response.status_code >= 500:
                raise _Transient(f"HTTP {response.status_code}: {response.text[:200]}")
            if response.status_code >= 400 and response.status_code != 404:
                raise _Permanent(f"HTTP {response.status_code}: {response.text[:200]}")
            return response

        retrying = Retrying(
            stop=stop_after_attempt(self.max_attempts),
            wait=wait_exponential(multiplier=self.backoff, max=self.backoff_max),
            retry=retry_if_exception(lambda e: isinstance(e, _Transient)),
            reraise=False,
        )
        try:
            return retrying(once)
        except RetryError as exc:
            cause = exc.last_attempt.exception()
            raise _Transient(f"gave up after {self.max_attempts} attempts: {cause}") from exc

    # --------------------------------------------------------------- queries

    def _fresh(self, key: str) -> Any | None:
        if self.cache is None:
            return None
        entry = self.cache.get(key)
        if not isinstance(entry, dict) or self.clock() - entry.get("fetched_at", 0) > self.max_age:
            return None
        return entry.get("value")

    def _store(self, key: str, value: Any) -> None:
        if self.cache is not None:
            self.cache[key] = {"fetched_at": self.clock(), "value": value}

    def querybatch(self, packages: Iterable[tuple[str, str, str]]) -> BatchResult:
        """Known vulnerabilities of each ``(ecosystem, name, version)``; never raises for network trouble.

        Duplicates are asked once; results are keyed by ``(name, version)`` as given.
        Cached answers younger than ``max_age`` make no request. Batches are
        split at 1000 queries and every ``next_page_token`` is followed.
        """
        result = BatchResult()
        wanted: dict[PackageKey, tuple[str, str, str]] = {}
        for ecosystem, name, version in packages:
            key = (name, version)
            if key in wanted or key in result.vulns:
                continue
            cached = self._fresh(f"query:{ecosystem}:{name}:{version}")
            if cached is not None:
                result.vulns[key] = cached
                result.cached.add(key)
            else:
                wanted[key] = (ecosystem, name, version)
        keys = list(wanted)
        for start in range(0, len(keys), MAX_BATCH):
            self._run_batch({k: wanted[k] for k in keys[start : start + MAX_BATCH]}, result)
        return result

    def _run_batch(self, batch: dict[PackageKey, tuple[str, str, str]], result: BatchResult) -> None:
        found: dict[PackageKey, list[dict[str, str]]] = {k: [] for k in batch}
        tokens: dict[PackageKey, str | None] = {k: None for k in batch}
        for _page in range(MAX_PAGES):
            pending = list(tokens)
            queries = []
            for key in pending:
                ecosystem, name, version = batch[key]
                query: dict[str, Any] = {"package": {"ecosystem": ecosystem, "name": name}, "version": version}
                if tokens[key]:
                    query["page_token"] = tokens[key]
                queries.append(query)
            try:
                response = self._request("POST", "/v1/querybatch", {"queries": queries})
                results = response.json().get("results")
                if not isinstance(results, list) or len(results) != len(pending):
                    raise _Permanent(f"malformed querybatch answer: {response.text[:200]}")
            except (_Transient, _Permanent, ValueError) as exc:
                for key in pending:
                    result.failed[key] = str(exc)
                return
            tokens = {}
            for key, item in zip(pending, results):
                item = item or {}
                found[key].extend(
                    {"id": v["id"], "modified": v.get("modified", "")} for v in item.get("vulns") or []
                )
                if item.get("next_page_token"):
                    tokens[key] = item["next_page_token"]
            for key in pending:
                if key not in tokens:
                    ecosystem, name, version = batch[key]
                    result.vulns[key] = found[key]
                    self._store(f"query:{ecosystem}:{name}:{version}", found[key])
            if not tokens:
                return
        for key in tokens:
            result.failed[key] = f"still paginating after {MAX_PAGES} pages"

    def get_vuln(self, vuln_id: str, modified: str | None = None) -> VulnResult:
        """The full record of ``vuln_id``; never raises for network trouble.

        With ``modified`` (from a batch result), a cached record with that same
        ``modified`` is returned without a request: records are cached by
        (id, modified) as NOTES.md §5 suggests.
        """
        cached = self.cache.get(f"vuln:{vuln_id}") if self.cache is not None else None
        if modified is not None and isinstance(cached, dict) and cached.get("modified") == modified:
            return VulnResult(vuln_id, record=cached)
        try:
            response = self._request("GET", f"/v1/vulns/{vuln_id}")
            if response.status_code == 404:
                return VulnResult(vuln_id)
            record = response.json()
            if not isinstance(record, dict) or record.get("id") != vuln_id:
                raise _Permanent(f"malformed record for {vuln_id}: {json.dumps(record)[:200]}")
        except (_Transient, _Permanent, ValueError) as exc:
            return VulnResult(vuln_id, error=str(exc))
        if self.cache is not None:
            self.cache[f"vuln:{vuln_id}"] = record
        return VulnResult(vuln_id, record=record)
