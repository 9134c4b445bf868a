"""Latency of ``POST /v1/query`` over a store of 100,000 advisories (goal: p99 < 20 ms on SQLite and PostgreSQL).

Run: python bench/bench_query.py [--repos 1000] [--advisories 100000] [--queries 2000] [--profile] [--postgres]

The database's size per advisory (indexes, commit graph and index rows included) is printed too.

Builds, in a temporary directory, an SQLite store migrated like a real one and
filled in bulk (executemany on the tracker's own tables; build time is not what
is measured) with realistic OSV records: a few records made by
``tracker.core.advisory.build_revision_advisory`` (an eos fix, a chat-template change
with a rendered-prompt diff, a pickle added, the same pickle later undone, an
auto_map change) are used as templates, re-targeted at each repo, revision and
id, stored as the tracker stores them (``versions`` empty: computed when read), with
the commit graph (``commits``), its reachability index (``commit_labels``, one
``commit_chains`` row per repo) and each advisory's span (``advisory_spans``: an
update ``0..i-1``, a risk ``i..j-1`` or ``i..``) that the store would have written.

Then it times, in-process through ``fastapi.testclient.TestClient``:

* ``commit-hit``: ``{"commit": SHA}`` for a tracked commit affected by >= 1 advisory;
* ``commit-miss``: ``{"commit": SHA}`` for a sha nobody knows;
* ``package``: ``{"package": {"name": REPO}, "version": SHA}`` for a tracked commit;

and two baselines in the same process: ``GET /healthz`` (one ``SELECT 1``) and
``GET /bench/noop``, a route added by this script that does nothing, i.e. the
cost of the TestClient + ASGI round trip alone.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import random
import statistics
import sys
import tempfile
import time
from contextlib import ExitStack
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from fastapi.testclient import TestClient
from sqlalchemy import insert

from tracker.adapters.settings import Settings
from tracker.adapters.store.tables import commit_chains, commits, repos
from tracker.app import make_tracker
from tracker.core.advisory import (
    advisory_id,
    build_revision_advisory,
    mark_fixed,
    validate,
    withdraw,
)
from tracker.core.advisory.reach import OPEN
from tracker.core.model import Finding, Severity
from tracker.surfaces.api import create_app

GOAL_P99_MS = 20.0
ENDPOINT = "https://huggingface.co"
T_REPO = "templateowner/template-model"
T_REV, T_PARENT, T_FIX = "1" * 40, "2" * 40, "3" * 40
NOW = datetime(2026, 1, 15, 12, 0, 0, tzinfo=UTC)


# ------------------------------------------------------------------------------------ templates

def _templates() -> dict[str, tuple[str, str, str]]:
    """name -> (kind, severity, record JSON with placeholder repo/revision/parent/fix/id)."""
    eos = Finding("generation.eos_token_id_changed", "generation", Severity.MODERATE,
                  "eos_token_id: 128001 → [128001, 128009]", path="generation_config.json",
                  before=128001, after=[128001, 128009])
    diff = "\n".join(["--- before", "+++ after", "@@ -1,6 +1,7 @@", " <|begin_of_text|><|start_header_id|>system",
                      "-You are a helpful assistant.", "+You are a helpful, honest assistant.",
                      " <|eot_id|><|start_header_id|>user<|end_header_id|>", "+<|reserved_special_token_3|>"] * 4)
    template = Finding("chat_template.rendered_prompt_changed", "chat_template", Severity.MODERATE,
                       "chat template renders a different prompt for 3 of 12 probe conversations",
                       path="tokenizer_config.json", evidence={"rendered_prompt_diff": diff, "probes": 12})
    config = Finding("config.rope_scaling_changed", "config", Severity.LOW, "rope_scaling.factor: 8.0 → 32.0",
                     path="config.json", before={"factor": 8.0}, after={"factor": 32.0})
    pickle = Finding("weights.pickle_added", "weights", Severity.HIGH,
                     "pytorch_model.bin added: a pickle, which runs code on load", path="pytorch_model.bin",
                     evidence={"imports": ["collections.OrderedDict", "torch._utils._rebuild_tensor_v2"]})
    automap = Finding("config.auto_map_changed", "config", Severity.HIGH,
                      "auto_map.AutoModel now points at modeling_custom.CustomModel", path="config.json",
                      before={"AutoModel": "modeling_a.A"}, after={"AutoModel": "modeling_custom.CustomModel"})
    common = {"repo_id": T_REPO, "revision": T_REV, "parent": T_PARENT, "revision_date": NOW - timedelta(days=3),
              "endpoint": ENDPOINT, "tracker_url": "https://tracker.example.org", "related": [],
              "affected_commits": [], "now": NOW}
    out: dict[str, tuple[str, str, str]] = {}
    specs = {
        "update-eos": ("update", [eos], {"eos_token_id": {"before": 128001, "after": [128001, 128009]}}),
        "update-template": ("update", [template, config], None),
        "risk-pickle": ("risk", [pickle], {"checkpoint_params": {"before": 7.2e9, "after": 7.2e9}}),
        "risk-automap": ("risk", [automap], None),
    }
    for name, (kind, findings, delta) in specs.items():
        record = build_revision_advisory(kind=kind, findings=findings, estimate_delta=delta, **common)
        assert record is not None
        validate(record)
        out[name] = (kind, record["database_specific"]["severity"].lower(), json.dumps(record))
        if kind == "risk":
            fixed = mark_fixed(record, T_FIX, NOW + timedelta(days=1), affected_commits=[])
            validate(fixed)
            out[name + "-fixed"] = (kind, record["database_specific"]["severity"].lower(), json.dumps(fixed))
    return out


def _retarget(text: str, *, repo: str, rev: str, parent: str, fix: str | None, new_id: str, template_id: str) -> str:
    text = text.replace(template_id, new_id).replace(T_REPO, repo)
    text = text.replace(T_REV, rev).replace(T_PARENT, parent)
    text = text.replace(T_REV[:12], rev[:12]).replace(T_PARENT[:12], parent[:12])
    if fix:
        text = text.replace(T_FIX, fix).replace(T_FIX[:12], fix[:12])
    return text


def _sha(rng: random.Random) -> str:
    return f"{rng.getrandbits(160):040x}"


# ------------------------------------------------------------------------------------ building

def build_store(url: str, *, n_repos: int, n_advisories: int, seed: int = 7) -> dict:
    """Fill a fresh store; returns what the queries need (tracked commits, hit list, repo names)."""
    tracker = make_tracker(Settings(database={"url": url}, hub={"endpoint": "http://127.0.0.1:9"}),
                           auto_upgrade=True)
    store = tracker.store
    templates = _templates()
    template_ids = {name: json.loads(t)["id"] for name, (_, _, t) in templates.items()}
    rng = random.Random(seed)
    per_repo = n_advisories // n_repos
    n_commits = per_repo + per_repo // 5  # not every revision makes an advisory (cosmetic edits)
    repo_rows, commit_rows, adv_rows, label_rows, chain_rows, span_rows = [], [], [], [], [], []
    tracked: list[tuple[str, str, int]] = []  # (repo_id, sha, advisories affecting it)
    sampled: list[str] = []
    dialect = store.db.engine.dialect
    postgres = dialect.name == "postgresql"
    bind = commits.c.created_at.type.dialect_impl(dialect).bind_processor(dialect)
    stamp = NOW if postgres or bind is None else bind(NOW)  # as SQLAlchemy stores it
    reach = json.dumps({"reach": {}, "merges": []})
    for pk in range(1, n_repos + 1):
        repo_id = f"org{pk % 97}/model-{pk:05d}"
        chain = [_sha(rng) for _ in range(n_commits)]
        repo_rows.append({"id": pk, "repo_id": repo_id, "branch": "main", "every_seconds": None,
                          "state": "active", "hub_uid": f"{pk:024x}", "last_seen_sha": chain[-1],
                          "created_at": NOW})
        commit_rows += [(pk, s, chain[i - 1] if i else None, stamp) for i, s in enumerate(chain)]
        label_rows += [(pk, s, 1, i) for i, s in enumerate(chain)]  # one first-parent chain per repo
        chain_rows.append((pk, 1, 1, n_commits - 1, True, reach))
        hits = [0] * n_commits
        for i in sorted(rng.sample(range(1, n_commits), per_repo)):
            rev, parent = chain[i], chain[i - 1]
            fix = None
            if rng.random() < 0.6:  # an update: affects every tracked revision that lacks it
                name = rng.choice(["update-eos", "update-template"])
                span = (0, i - 1)
            else:  # a risk: affects its revision and descendants, until undone (70 %) a few commits later
                base = rng.choice(["risk-pickle", "risk-automap"])
                j = i + rng.randint(1, 8)
                if j < n_commits and rng.random() < 0.7:
                    name, fix, span = base + "-fixed", chain[j], (i, j - 1)
                else:
                    name, span = base, (i, OPEN)
            kind, severity, text = templates[name]
            new_id = advisory_id(repo_id, rev, kind)
            text = _retarget(text, repo=repo_id, rev=rev, parent=parent, fix=fix, new_id=new_id,
                             template_id=template_ids[name])
            withdrawn = rng.random() < 0.01  # re-analysis withdrew it: no spans
            if withdrawn:
                text = json.dumps(withdraw(json.loads(text), NOW + timedelta(days=2)))
            if len(sampled) < 200 and rng.random() < 0.01:
                sampled.append(text)
            adv_rows.append((new_id, pk, rev, kind, severity, text, stamp, stamp, int(withdrawn), fix))
            if not withdrawn:
                span_rows.append((new_id, 1, pk, span[0], span[1]))
                for k in range(span[0], min(span[1], n_commits - 1) + 1):
                    hits[k] += 1
        tracked += [(repo_id, chain[k], hits[k]) for k in range(n_commits)]
    for text in sampled:
        validate(json.loads(text))
    # Bulk load through the engine's own DBAPI connection: rows as SQLAlchemy would bind them
    # (JSON as text, datetimes as SQLite's text format), the secondary indexes built once at the end.
    with store.db.engine.begin() as conn:
        conn.execute(insert(repos), repo_rows)
        conn.execute(insert(commit_chains), [
            {"repo_pk": r[0], "chain": r[1], "root": r[2], "tip": r[3], "starts_at_root": r[4],
             "reach": json.loads(r[5])} for r in chain_rows])
    built = {"tracker": tracker, "tracked": tracked, "advisories": len(adv_rows), "spans": len(span_rows),
             "commits": len(commit_rows), "repos": len(repo_rows)}
    if postgres:
        _copy_postgres(store.db.engine, commit_rows, adv_rows, label_rows, span_rows)
        return built
    raw = store.db.engine.raw_connection()
    try:
        cur = raw.cursor()
        cur.execute("PRAGMA synchronous=OFF")
        for index in SECONDARY:
            cur.execute(f"DROP INDEX {index[0]}")
        cur.executemany("INSERT INTO commits (repo_pk, sha, parent_sha, created_at) VALUES (?, ?, ?, ?)",
                        commit_rows)
        cur.executemany("INSERT INTO commit_labels (repo_pk, sha, chain, pos) VALUES (?, ?, ?, ?)", label_rows)
        cur.executemany("INSERT INTO advisories (id, repo_pk, revision_sha, kind, severity, record, published,"
                        " modified, withdrawn, fixed_sha) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", adv_rows)
        cur.executemany("INSERT INTO advisory_spans (advisory_id, chain, repo_pk, lo, hi) VALUES (?, ?, ?, ?, ?)",
                        span_rows)
        for index in SECONDARY:
            cur.execute(f"CREATE INDEX {index[0]} ON {index[1]}")
        raw.commit()
        cur.execute("ANALYZE")
        raw.commit()
        cur.execute("PRAGMA synchronous=FULL")
    finally:
        raw.close()
    return built


# Built once after the bulk load, as a migration would: (name, table (columns)).
SECONDARY = (
    ("ix_commit_labels_sha", "commit_labels (sha)"),
    ("ix_advisory_spans_repo_chain_hi", "advisory_spans (repo_pk, chain, hi)"),
    ("ix_advisories_repo_revision", "advisories (repo_pk, revision_sha)"),
    ("ix_advisories_repo_kind", "advisories (repo_pk, kind, withdrawn)"),
)


def _copy_postgres(engine, commit_rows: list, adv_rows: list, label_rows: list, span_rows: list) -> None:
    """The same bulk load on PostgreSQL, with COPY; the secondary indexes built once at the end, then ANALYZE."""
    raw = engine.raw_connection()
    try:
        cur = raw.cursor()
        for index in SECONDARY:
            cur.execute(f"DROP INDEX {index[0]}")
        for table, columns, rows in (
            ("commits", "repo_pk, sha, parent_sha, created_at", commit_rows),
            ("commit_labels", "repo_pk, sha, chain, pos", label_rows),
            ("advisories", "id, repo_pk, revision_sha, kind, severity, record, published, modified, withdrawn, "
                           "fixed_sha", [(*r[:8], bool(r[8]), r[9]) for r in adv_rows]),
            ("advisory_spans", "advisory_id, chain, repo_pk, lo, hi", span_rows),
        ):
            with cur.copy(f"COPY {table} ({columns}) FROM STDIN") as copy:
                for row in rows:
                    copy.write_row(row)
        for index in SECONDARY:
            cur.execute(f"CREATE INDEX {index[0]} ON {index[1]}")
        raw.commit()
        cur.execute("ANALYZE")
        raw.commit()
    finally:
        raw.close()


# ------------------------------------------------------------------------------------ timing

def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * len(ordered)) - 1))]


def _time(client: TestClient, requests: list[tuple[str, str, dict | None]]
          ) -> tuple[list[float], list[int], list[int]]:
    """Per request: (milliseconds, vulns answered, response bytes)."""
    times, counts, sizes = [], [], []
    for method, path, body in requests:
        t0 = time.perf_counter()
        answer = client.post(path, json=body) if method == "POST" else client.get(path)
        times.append((time.perf_counter() - t0) * 1000)
        assert answer.status_code == 200, (path, body, answer.status_code, answer.text[:200])
        counts.append(len(answer.json().get("vulns", [])) if method == "POST" else 0)
        sizes.append(len(answer.content))
    return times, counts, sizes


def _in_transaction(dbapi_connection) -> bool:
    info = getattr(dbapi_connection, "info", None)  # psycopg: the server's transaction status
    if info is not None and hasattr(info, "transaction_status"):
        return info.transaction_status.name != "IDLE"
    return bool(getattr(dbapi_connection, "in_transaction", False))  # sqlite3


def _round_trips(tracker, client: TestClient, body: dict) -> list[str]:
    """What one request sends the database driver: the pool's pre-ping, each statement, and the BEGIN
    and COMMIT / ROLLBACK the driver sends (psycopg sends BEGIN before the first statement outside a
    transaction unless in autocommit; sqlite3 begins none for a SELECT, and commits only an open one).
    On PostgreSQL each is a round trip to the server process; on SQLite a call into the library.
    """
    from sqlalchemy import event

    engine = tracker.store.db.engine
    sent: list[str] = []
    ping = engine.dialect.do_ping

    def driver_begins(dbapi_connection) -> None:
        if engine.dialect.name == "postgresql" and not dbapi_connection.autocommit \
                and not _in_transaction(dbapi_connection):
            sent.append("BEGIN")

    def counted_ping(dbapi_connection) -> bool:  # an empty statement outside any transaction
        sent.append("pre-ping")
        return ping(dbapi_connection)

    def on_statement(conn, _cursor, statement, *_args) -> None:
        driver_begins(conn.connection.dbapi_connection)
        sent.append(" ".join(statement.split())[:40])

    def ending(word):
        def on_end(conn) -> None:
            if _in_transaction(conn.connection.dbapi_connection):
                sent.append(word)
        return on_end

    def on_reset(dbapi_connection, _record, _state) -> None:
        if _in_transaction(dbapi_connection):
            sent.append("ROLLBACK (pool reset)")

    listeners = [(engine, "commit", ending("COMMIT")), (engine, "rollback", ending("ROLLBACK")),
                 (engine, "before_cursor_execute", on_statement), (engine.pool, "reset", on_reset)]
    engine.dialect.do_ping = counted_ping
    for target, name, fn in listeners:
        event.listen(target, name, fn)
    try:
        assert client.post("/v1/query", json=body).status_code == 200
    finally:
        for target, name, fn in listeners:
            event.remove(target, name, fn)
        engine.dialect.do_ping = ping
    return sent


def _profile_server_side(app, requests: list[tuple[str, str, dict | None]]) -> str:
    """cProfile of what the server does for these requests."""
    prof = cProfile.Profile()

    async def profiled(scope, receive, send):
        prof.enable()
        try:
            await app(scope, receive, send)
        finally:
            prof.disable()

    with TestClient(profiled) as client:
        _time(client, requests)
    out = io.StringIO()
    stats = pstats.Stats(prof, stream=out)
    stats.sort_stats("tottime").print_stats(25)
    stats.sort_stats("cumulative").print_stats(40)
    return out.getvalue()


def _database_size(tracker, sqlite_file: Path) -> int:
    """Bytes the database takes: the SQLite file (after a checkpoint), or PostgreSQL's pg_database_size."""
    from sqlalchemy import text

    engine = tracker.store.db.engine
    with engine.connect() as conn:
        if engine.dialect.name == "postgresql":
            return int(conn.execute(text("select pg_database_size(current_database())")).scalar())
        conn.execute(text("PRAGMA wal_checkpoint(TRUNCATE)"))
    return sqlite_file.stat().st_size


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repos", type=int, default=2000)
    parser.add_argument("--advisories", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=2000)
    parser.add_argument("--profile", action="store_true", help="cProfile the server side of 600 queries")
    parser.add_argument("--round-trips", action="store_true",
                        help="print what one query of each kind sends the database")
    parser.add_argument("--postgres", action="store_true",
                        help="PostgreSQL (TRACKER_TEST_POSTGRES_URL, or a throwaway cluster) instead of SQLite")
    args = parser.parse_args()

    with ExitStack() as stack:
        tmp = stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-query-"))
        if args.postgres:
            from tests.postgres import fresh_database, postgres_server

            url = fresh_database(stack.enter_context(postgres_server()))
        else:
            url = f"sqlite:///{tmp}/tracker.sqlite3"
        database = "PostgreSQL" if args.postgres else "SQLite"
        t0 = time.perf_counter()
        built = build_store(url, n_repos=args.repos, n_advisories=args.advisories)
        size = _database_size(built["tracker"], Path(tmp, "tracker.sqlite3"))
        print(f"store ({database}): {built['advisories']:,} advisories, {built['repos']:,} repos, "
              f"{built['commits']:,} commits, {built['spans']:,} advisory_spans rows, {size / 1e6:.0f} MB "
              f"({size / built['advisories'] / 1024:.1f} KiB per advisory, indexes included); built in "
              f"{time.perf_counter() - t0:.1f} s")

        tracker = built["tracker"]
        app = create_app(tracker)

        @app.get("/bench/noop")
        def _noop() -> dict[str, str]:
            return {"status": "ok"}

        rng = random.Random(11)
        n, n_base = args.queries, max(1, args.queries // 8)  # /healthz lists every watch: slow, fewer
        hit_pool = [t for t in built["tracked"] if t[2] > 0]
        hits = [rng.choice(hit_pool) for _ in range(n)]
        packs = [rng.choice(hit_pool) for _ in range(n)]
        kinds = {
            "commit-hit": [("POST", "/v1/query", {"commit": sha}) for _, sha, _ in hits],
            "commit-miss": [("POST", "/v1/query", {"commit": _sha(rng)}) for _ in range(n)],
            "package": [("POST", "/v1/query", {"package": {"name": repo}, "version": sha}) for repo, sha, _ in packs],
            "GET /healthz": [("GET", "/healthz", None)] * n_base,
            "GET /bench/noop": [("GET", "/bench/noop", None)] * (n // 2),
        }
        expected = {"commit-hit": [c for _, _, c in hits], "package": [c for _, _, c in packs]}
        load_before = os.getloadavg()[0]
        with TestClient(app) as client:
            for reqs in kinds.values():  # warm up: connections, caches, code paths
                _time(client, reqs[:30])
            if args.round_trips:
                for name in ("commit-hit", "commit-miss", "package"):
                    sent = _round_trips(tracker, client, kinds[name][0][2])
                    print(f"{name}: {len(sent)} sent to the database: " + "; ".join(sent))
            results = {}
            for name, reqs in kinds.items():
                times, counts, sizes = _time(client, reqs)
                if name in expected:
                    assert counts == expected[name], f"{name}: wrong answers"
                if name == "commit-miss":
                    assert not any(counts), "a random sha matched"
                results[name] = (times, counts, sizes)

        print(f"\nin-process TestClient, {database} (one request at a time; load average "
              f"{load_before:.1f} before, {os.getloadavg()[0]:.1f} after):")
        print(f"{'kind':<18}{'requests':>9}{'p50 ms':>9}{'p99 ms':>9}{'max ms':>9}{'mean vulns':>12}{'mean KB':>9}")
        for name, (times, counts, sizes) in results.items():
            print(f"{name:<18}{len(times):>9}{statistics.median(times):>9.2f}{_pct(times, 99):>9.2f}"
                  f"{max(times):>9.2f}{statistics.fmean(counts):>12.1f}{statistics.fmean(sizes) / 1024:>9.1f}")
        base_h = statistics.median(results["GET /healthz"][0])
        base_n = statistics.median(results["GET /bench/noop"][0])
        print()
        for name in ("commit-hit", "commit-miss", "package"):
            p50 = statistics.median(results[name][0])
            print(f"{name:<12} p50 / healthz p50 = {p50 / base_h:5.2f}x   p50 / noop p50 = {p50 / base_n:5.2f}x")
        worst = max(_pct(results[k][0], 99) for k in ("commit-hit", "commit-miss", "package"))
        met = worst < GOAL_P99_MS
        print(f"\ngoal p99 < {GOAL_P99_MS:.0f} ms on {database} (POST /v1/query as shipped): "
              f"{'MET' if met else 'MISSED'} (worst p99 {worst:.2f} ms)")
        if args.profile:
            print(_profile_server_side(app, kinds["commit-hit"][:300] + kinds["package"][:300]))
        tracker.store.close()
    return 0 if met else 1


if __name__ == "__main__":
    raise SystemExit(main())
