"""The ``tracker`` command: parse, build a Tracker through ``app``, call, format.

Exit codes: 0 success, 1 a tracker error (message on stderr), 2 bad usage.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from functools import wraps
from typing import TYPE_CHECKING, Any

import click

from tracker.errors import ConfigError, TrackerError
from tracker.model import Finding, PollOutcome, RepoId, RepoRow, sort_findings, validate_repo_id
from tracker.settings import Settings, format_duration, load_settings, parse_interval

if TYPE_CHECKING:
    from tracker.app import Tracker


class Context:
    def __init__(self, config: str | None) -> None:
        self.config = config
        self.verbose = 0
        self._settings: Settings | None = None
        self._tracker: Tracker | None = None

    @property
    def settings(self) -> Settings:
        if self._settings is None:
            self._settings = load_settings(self.config)
        return self._settings

    def tracker(self, *, auto_upgrade: bool | None = None) -> Tracker:
        if self._tracker is None:
            from tracker.app import make_tracker

            self._tracker = make_tracker(self.settings, auto_upgrade=auto_upgrade)
        return self._tracker


# The tracker's errors -> exit status, in one place (the README's "Exit status" lists it).
# Bad usage (ConfigError, a bad repo id or flag) is click's exit 2; anything else the
# tracker raises on purpose is one line on stderr and exit 1.
EXIT_CODES: tuple[tuple[type[TrackerError], int], ...] = (
    (ConfigError, 2),
    (TrackerError, 1),
)


def fail_cleanly(func: Callable[..., Any]) -> Callable[..., Any]:
    """Turn the tracker's own errors into one line on stderr and the exit status of EXIT_CODES."""

    @wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except TrackerError as exc:
            code = next(c for kind, c in EXIT_CODES if isinstance(exc, kind))
            if code == 2:
                raise click.UsageError(str(exc)) from exc
            lines = str(exc).strip().splitlines()
            click.echo(f"error: {lines[0] if lines else type(exc).__name__}", err=True)
            sys.exit(code)

    return wrapper


def _repo_id(value: str) -> RepoId:
    try:
        return validate_repo_id(value.strip())
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from exc


def _iso(value: datetime | None) -> str | None:
    return value.isoformat().replace("+00:00", "Z") if value else None


def _emit_json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, ensure_ascii=False, default=str))


@click.group()
@click.option("--config", "config", type=click.Path(dir_okay=False), envvar="TRACKER_CONFIG",
              help="Config file (default: ./config/tracker.toml when present).")
@click.option("-v", "--verbose", count=True, help="More logging (-vv for debug and library internals).")
@click.option("--log-format", type=click.Choice(["text", "json"]), default="text", envvar="TRACKER_LOG_FORMAT",
              show_default=True, help="Log lines as text, or one JSON object per line (for log shippers).")
@click.version_option(package_name="upstream-tracker")
@click.pass_context
def main(ctx: click.Context, config: str | None, verbose: int, log_format: str) -> None:
    """Watch model repos on the Hugging Face Hub and report precisely what changed upstream."""
    from tracker.logs import setup_logging

    # The long-running commands say what they do at INFO; the others only warn (tracker/logs.py).
    setup_logging(verbose, log_format, talkative=ctx.invoked_subcommand in ("run", "serve"))
    ctx.obj = Context(config)
    ctx.obj.verbose = verbose


# -- init ---------------------------------------------------------------------------------------


@main.command()
@click.pass_obj
@fail_cleanly
def init(obj: Context) -> None:
    """Create or migrate the database schema (needed for PostgreSQL; SQLite does it itself)."""
    from tracker.store.db import make_engine, schema_status, upgrade_schema

    engine = make_engine(obj.settings.database_url)
    before, head = schema_status(engine)
    upgrade_schema(engine)
    where = engine.url.render_as_string(hide_password=True)
    if before == head:
        click.echo(f"{where}: schema already at {head}")
    else:
        click.echo(f"{where}: schema migrated from {before or 'empty'} to {head}")


# -- watch list ---------------------------------------------------------------------------------


@main.group()
def watch() -> None:
    """Manage the repos the tracker watches."""


@watch.command("add")
@click.argument("repo_ids", nargs=-1)
@click.option("--branch", default="main", show_default=True, help="Branch to follow.")
@click.option("--every", default=None, help="Poll interval, e.g. 15m, 1h, 1d (default: from config).")
@click.option("--from", "from_file", type=click.File("r"), help="Read repo ids from a file, one per line ('-': stdin).")
@click.option("--with-base", is_flag=True,
              help="Also watch the base model chain the cards declare (base_model; at most 4 levels, from the Hub).")
@click.pass_obj
@fail_cleanly
def watch_add(obj: Context, repo_ids: tuple[str, ...], branch: str, every: str | None, from_file: Any,
              with_base: bool = False) -> None:
    """Watch one or more repos (owner/name)."""
    ids = list(repo_ids)
    if from_file is not None:
        for line in from_file:
            line = line.split("#", 1)[0].strip()
            if line:
                ids.append(line)
    if not ids:
        raise click.UsageError("give at least one repo id, or --from FILE")
    errors = []
    valid: list[RepoId] = []
    for value in ids:
        try:
            valid.append(validate_repo_id(value))
        except ValueError as exc:
            errors.append(str(exc))
    if errors:
        for message in errors:
            click.echo(f"error: {message}", err=True)
        click.echo("nothing added: fix the ids above and run again", err=True)
        sys.exit(2)
    seconds = parse_interval(every) if every else None
    tracker = obj.tracker()
    for repo_id in dict.fromkeys(valid):
        _, created = tracker.store.add_watch(repo_id, branch=branch, every=seconds, now=tracker.clock())
        click.echo(f"{'watching' if created else 'updated'} {repo_id} ({branch}, every "
                   f"{format_duration(seconds or obj.settings.poll_every)})")
    if with_base and not _watch_bases(tracker, list(dict.fromkeys(valid)), branch=branch, every=seconds):
        sys.exit(1)


def _watch_bases(tracker: Tracker, repo_ids: list[RepoId], *, branch: str, every: float | None) -> bool:
    """``watch add --with-base``: watch each repo's base chain (tracker/lineage.py); False if one was refused."""
    from tracker.lineage import watch_base_chain

    ok = True
    for repo_id in repo_ids:
        chain = watch_base_chain(tracker.store, tracker.hub, repo_id, branch=branch, every=every, now=tracker.clock())
        for child, base, created in chain.links:
            click.echo(f"{'watching' if created else 'already watching'} {base} as the base of {child}")
        if chain.note:
            click.echo(f"note: {chain.note}", err=True)
        if chain.problem:
            click.echo(f"error: {chain.problem}", err=True)
            ok = False
    return ok


@watch.command("list")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.pass_obj
@fail_cleanly
def watch_list(obj: Context, as_json: bool) -> None:
    """List watched repos."""
    tracker = obj.tracker()
    tracker.sync_config_watches()
    rows = tracker.store.list_watches()
    if as_json:
        _emit_json([
            {
                "repo": r.repo_id, "branch": r.branch,
                "every": format_duration(r.every_seconds or obj.settings.poll_every),
                "every_seconds": r.every_seconds or obj.settings.poll_every,
                "state": r.state, "last_seen_sha": r.last_seen_sha, "renamed_to": r.renamed_to,
                "last_polled_at": _iso(r.last_polled_at), "last_error": r.last_error,
            }
            for r in rows
        ])
        return
    if not rows:
        click.echo("no repos watched; add some with `tracker watch add OWNER/NAME`")
        return
    click.echo(f"{'REPO':45} {'BRANCH':10} {'EVERY':6} {'STATE':9} {'HEAD READ':13} LAST POLLED")
    for r in rows:
        click.echo(
            f"{r.repo_id:45} {r.branch:10} {format_duration(r.every_seconds or obj.settings.poll_every):6} "
            f"{r.state:9} {(r.last_seen_sha or '-')[:12]:13} {_iso(r.last_polled_at) or 'never'}"
        )


@watch.command("remove")
@click.argument("repo_id")
@click.pass_obj
@fail_cleanly
def watch_remove(obj: Context, repo_id: str) -> None:
    """Stop watching a repo (its stored revisions are deleted with it)."""
    repo = _repo_id(repo_id)
    if not obj.tracker().store.remove_watch(repo):
        click.echo(f"error: not watched: {repo}", err=True)
        sys.exit(1)
    click.echo(f"removed {repo}")
    if any(spec.repo == repo for spec in obj.settings.watch):
        click.echo(f"note: {repo} is listed in {obj.settings.config_path}; remove it there too, "
                   "or the next start watches it again", err=True)


# -- polling ------------------------------------------------------------------------------------


@main.command()
@click.argument("repo_ids", nargs=-1)
@click.option("--backfill", default=0, type=click.IntRange(min=0),
              help="On a repo's first poll, also read its last N revisions.")
@click.pass_obj
@fail_cleanly
def poll(obj: Context, repo_ids: tuple[str, ...], backfill: int) -> None:
    """Run one poll cycle over the given (or all watched) repos and exit."""
    from tqdm import tqdm

    ids = [_repo_id(r) for r in repo_ids] or None
    tracker = obj.tracker()
    tracker.sync_config_watches()
    bar = tqdm(desc="revisions", unit="rev", disable=not backfill or not sys.stderr.isatty(), leave=False)
    try:
        results = tracker.poll(ids, backfill=backfill, progress=bar.update)
    finally:
        bar.close()
    for result in results:
        click.echo(result.line())
    failed = [r for r in results if r.status in (PollOutcome.ERROR, PollOutcome.NOT_FOUND)]
    if len(results) > 1:
        changed = sum(1 for r in results if r.new_revisions)
        busy = sum(1 for r in results if r.status == PollOutcome.BUSY)
        click.echo(f"polled {len(results)} repos: {changed} with new revisions, {len(failed)} failed"
                   + (f", {busy} skipped (busy)" if busy else ""))
    if failed:
        sys.exit(1)


@main.command()
@click.option("--host", default=None, help="Address for the HTTP API (default from config: 127.0.0.1).")
@click.option("--port", default=None, type=int, help="Port for the HTTP API (default from config: 8080).")
@click.option("--no-api", is_flag=True, help="Poll only; do not serve the HTTP API.")
@click.option("--log-format", type=click.Choice(["text", "json"]), default=None,
              help="Log lines as text or JSON (the same as `tracker --log-format`).")
@click.pass_obj
@fail_cleanly
def run(obj: Context, host: str | None, port: int | None, no_api: bool, log_format: str | None) -> None:
    """The daemon: poll every watched repo on its schedule until SIGTERM or SIGINT."""
    from tracker.daemon import run_daemon

    if log_format:
        from tracker.logs import setup_logging

        setup_logging(obj.verbose, log_format, talkative=True)
    tracker = obj.tracker(auto_upgrade=obj.settings.is_sqlite)
    run_daemon(tracker, host=host or obj.settings.api_host, port=port or obj.settings.api_port, api=not no_api)


# -- reading back -------------------------------------------------------------------------------


def _require_repo(tracker: Tracker, repo_id: str) -> RepoRow:
    return tracker.repo(_repo_id(repo_id))


def _revision_json(rev: Any) -> dict[str, Any]:
    findings = rev.findings or []
    return {
        "sha": rev.sha,
        "date": _iso(rev.date),
        "title": rev.title,
        "status": rev.status,
        "baseline": rev.baseline,
        "parent": rev.parent_sha,
        "summary": rev.summary,
        "worst_severity": rev.worst_severity,
        "findings": len(findings),
        "top_findings": [
            {"code": f["code"], "severity": f["severity"], "summary": f["summary"]} for f in findings[:3]
        ],
        "files": {k: [e["path"] for e in v] for k, v in (rev.diff or {}).get("files", {}).items()},
    }


@main.command()
@click.argument("repo_id")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.option("--branch", default="main", show_default=True, help="For a repo not watched: the branch to list.")
@click.option("--limit", default=30, show_default=True, type=click.IntRange(min=1, max=1000),
              help="For a repo not watched: how many of the newest commits to list.")
@click.pass_obj
@fail_cleanly
def revisions(obj: Context, repo_id: str, as_json: bool, branch: str, limit: int) -> None:
    """List the revisions read for a repo, oldest first, with what changed in each.

    A repo that is not watched is listed from the Hub (its newest commits; nothing is analysed or stored).
    """
    tracker = obj.tracker()
    repo = tracker.store.get_repo(_repo_id(repo_id))
    if repo is None:
        _upstream_revisions(tracker, _repo_id(repo_id), branch=branch, limit=limit, as_json=as_json)
        return
    rows = tracker.store.revisions(repo.pk)
    if as_json:
        _emit_json([_revision_json(r) for r in rows])
        return
    if not rows:
        click.echo(f"{repo.repo_id}: no revisions read yet; run `tracker poll {repo.repo_id}`")
        return
    for r in rows:
        date = r.date.strftime("%Y-%m-%d %H:%M") if r.date else "-"
        worst = f"[{r.worst_severity}] " if r.worst_severity else ""
        status = "" if r.status == "done" else f" ({r.status})"
        click.echo(f"{date}  {r.sha[:12]}  {worst}{r.title}{status}")
        if r.summary:
            click.echo(f"    {r.summary}")
        for f in (r.findings or [])[1:3]:
            click.echo(f"    - [{f['severity']}] {f['summary']}")


def _upstream_revisions(tracker: Tracker, repo_id: RepoId, *, branch: str, limit: int, as_json: bool) -> None:
    """The newest commits of a repo that is not watched, read from the Hub, oldest first."""
    from tracker.errors import RepoGone

    try:
        commits = tracker.hub.commits_since(repo_id, branch, None, limit=limit).commits
    except RepoGone as exc:
        raise TrackerError(f"{repo_id} is not watched, and not found on the Hub (check the id; private and gated "
                           "repos need HF_TOKEN)") from exc
    if as_json:
        _emit_json([{"sha": c.sha, "date": _iso(c.date), "title": c.title, "status": "not_read", "baseline": False,
                     "parent": c.parents[0] if c.parents else None, "summary": None, "worst_severity": None,
                     "findings": None, "top_findings": [], "files": {}} for c in commits])
        return
    click.echo(f"{repo_id} is not watched: its newest {len(commits)} commit(s) on {branch}, from the Hub "
               "(nothing analysed or stored; `tracker diff` compares two of them)", err=True)
    for c in commits:
        click.echo(f"{c.date.strftime('%Y-%m-%d %H:%M')}  {c.sha[:12]}  {c.title}")


def format_findings(findings: list[Finding]) -> list[str]:
    """Findings grouped by category, categories ordered by their worst finding."""
    groups: dict[str, list[Finding]] = {}
    for finding in sort_findings(findings):
        groups.setdefault(finding.category, []).append(finding)
    lines = []
    for category, items in groups.items():
        lines.append(f"{category}:")
        for f in items:
            lines.append(f"  [{f.severity.value:8}] {f.summary}  ({f.code})")
    return lines


@main.command()
@click.argument("repo_id")
@click.argument("old")
@click.argument("new")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.pass_obj
@fail_cleanly
def diff(obj: Context, repo_id: str, old: str, new: str, as_json: bool) -> None:
    """Show what changed between two revisions of any repo (stored when watched, else read from the Hub)."""
    tracker = obj.tracker()
    repo_id = _repo_id(repo_id)
    old_side = tracker.snapshot_of(repo_id, old)
    new_side = tracker.snapshot_of(repo_id, new)
    repo = tracker.store.get_repo(repo_id)
    stored_old = tracker.store.get_revision(repo.pk, old_side[0]) if repo is not None else None
    analysis = tracker.analyse(repo_id, old_side, new_side,
                               old_estimate=stored_old.estimate if stored_old else None)
    raw, findings = analysis.raw, analysis.findings
    if as_json:
        _emit_json({
            "from": old_side[0], "to": new_side[0],
            "findings": [f.to_json() for f in findings],
            "files": raw.files, "texts": raw.texts,
        })
        return
    click.echo(f"{repo_id}: {old_side[0][:12]} -> {new_side[0][:12]}")
    if findings:
        for line in format_findings(findings):
            click.echo(line)
    files = raw.files
    for label in ("added", "removed", "changed"):
        for item in files[label]:
            click.echo(f"{label:8} {item['path']}")
    if not findings and not any(files.values()):
        click.echo("no changes")


@main.command()
@click.argument("repo_id", required=False)
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.pass_obj
@fail_cleanly
def events(obj: Context, repo_id: str | None, as_json: bool) -> None:
    """Upstream surprises: history rewritten, renamed, deleted, re-created, gated, disabled."""
    tracker = obj.tracker()
    repo_pk = _require_repo(tracker, repo_id).pk if repo_id else None
    rows = tracker.store.events(repo_pk)
    if as_json:
        _emit_json([{"repo": e.repo_id, "kind": e.kind, "revision": e.revision_sha, "detail": e.detail,
                     "created_at": _iso(e.created_at)} for e in rows])
        return
    for e in rows:
        click.echo(f"{_iso(e.created_at)}  {e.repo_id}  {e.kind}  {json.dumps(e.detail, default=str)}")


# -- advisories ---------------------------------------------------------------------------------


@main.command()
@click.option("--repo", "repo_id", required=True, help="The repo (owner/name).")
@click.option("--revision", required=True, help="A commit sha (or prefix), branch or tag.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output, OSV-style {\"vulns\": [...]}.")
@click.pass_obj
@fail_cleanly
def query(obj: Context, repo_id: str, revision: str, as_json: bool) -> None:
    """Which advisories affect REVISION of a repo, and how far it is behind the branch head."""
    result = obj.tracker().query(_repo_id(repo_id), revision)
    if as_json:
        _emit_json(result.to_json())
        return
    where = (f"{result.behind} revision(s) behind {(result.head or '')[:12]}" if result.behind is not None
             else "not on the tracked branch" if result.known else "unknown to the tracker and the Hub")
    click.echo(f"{result.repo}@{result.revision[:12]}: {where}")
    if not result.vulns:
        click.echo("no advisories affect this revision")
    for rec in result.vulns:
        severity = rec.get("database_specific", {}).get("severity", "").lower()
        click.echo(f"  {rec['id']}  [{severity}] {rec.get('summary', '')}")


@main.command()
@click.option("--repo", "repo_id", default=None, help="Only this repo.")
@click.option("--since", default=None, help="Only advisories modified at or after this date (YYYY-MM-DD or ISO).")
@click.option("--json", "as_json", is_flag=True, help="The OSV records, as a JSON list.")
@click.pass_obj
@fail_cleanly
def advisories(obj: Context, repo_id: str | None, since: str | None, as_json: bool) -> None:
    """List advisories, oldest first."""
    tracker = obj.tracker()
    repo_pk = _require_repo(tracker, repo_id).pk if repo_id else None
    since_dt = None
    if since:
        try:
            since_dt = datetime.fromisoformat(since.replace("Z", "+00:00"))
        except ValueError as exc:
            raise click.BadParameter(f"invalid date {since!r}: use YYYY-MM-DD or an ISO timestamp") from exc
        if since_dt.tzinfo is None:
            since_dt = since_dt.replace(tzinfo=UTC)
    rows = tracker.store.advisories_for(repo_pk=repo_pk, since=since_dt)
    if as_json:
        _emit_json([r.record for r in rows])
        return
    for r in rows:
        state = " (withdrawn)" if r.withdrawn else " (fixed)" if r.fixed_sha else ""
        click.echo(f"{r.record['modified']}  {r.id}  [{r.severity}] {r.record.get('summary', '')}{state}")


@main.group()
def export() -> None:
    """Export advisories for other tools."""


@export.command("osv")
@click.argument("directory", type=click.Path(file_okay=False))
@click.pass_obj
@fail_cleanly
def export_osv(obj: Context, directory: str) -> None:
    """Write one <id>.json per advisory and an all.zip, as OSV offline databases are laid out."""
    from pathlib import Path

    from tracker.advisory import build_all_zip, export_files

    records = [r.record for r in obj.tracker().store.advisories_for()]
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    for name, data in export_files(records).items():
        (out / name).write_bytes(data)
    (out / "all.zip").write_bytes(build_all_zip(records))
    click.echo(f"wrote {len(records)} advisories and all.zip to {out}")


@main.command()
@click.option("--host", default=None, help="Address to listen on (default from config: 127.0.0.1).")
@click.option("--port", default=None, type=int, help="Port (default from config: 8080).")
@click.pass_obj
@fail_cleanly
def serve(obj: Context, host: str | None, port: int | None) -> None:
    """Serve the HTTP API without polling (GET /readyz then checks the database only)."""
    import uvicorn

    from tracker.api import create_app
    from tracker.logs import start_line

    tracker = obj.tracker()
    app = create_app(tracker, webhook_secret=os.environ.get("TRACKER_WEBHOOK_SECRET"))
    host, port = host or obj.settings.api_host, port or obj.settings.api_port
    logging.getLogger("tracker.serve").info("%s", start_line(tracker, api=(host, port), polling=False))
    uvicorn.run(app, host=host, port=port, log_config=None, log_level=None)  # logging is ours (tracker/logs.py)


@main.command()
@click.argument("repo_ids", nargs=-1)
@click.pass_obj
@fail_cleanly
def reanalyse(obj: Context, repo_ids: tuple[str, ...]) -> None:
    """Re-run the analysis of every stored revision with the current rules; advisories follow."""
    tracker = obj.tracker()
    ids = [_repo_id(r) for r in repo_ids] or [r.repo_id for r in tracker.store.list_watches()]
    for repo_id in ids:
        changed = tracker.reanalyse(repo_id)
        click.echo(f"{repo_id}: {changed} revision(s) re-analysed")


# -- subscriptions and deliveries ---------------------------------------------------------------


def _redacted(kind: str, url: str) -> str:
    """A subscription's URL as listed: a Slack webhook URL is a credential, so only its host is shown."""
    import httpx

    parsed = httpx.URL(url)
    return f"{parsed.scheme}://{parsed.netloc.decode()}/…" if kind == "slack" else str(parsed.copy_with(query=None))


def _subscription_json(sub: Any) -> dict[str, Any]:
    return {"id": sub.id, "target": sub.target, "kind": sub.kind, "url": _redacted(sub.kind, sub.url),
            "min_severity": sub.min_severity, "categories": list(sub.categories), "created_at": _iso(sub.created_at)}


@main.command()
@click.argument("target")
@click.option("--slack", "slack_url", default=None, metavar="URL", help="A Slack incoming-webhook URL.")
@click.option("--webhook", "webhook_url", default=None, metavar="URL",
              help="An HTTPS endpoint; alerts are signed per Standard Webhooks.")
@click.option("--min-severity", default="info", show_default=True,
              type=click.Choice(["critical", "high", "moderate", "low", "info"]),
              help="Only advisories at least this severe.")
@click.option("--category", "categories", multiple=True, metavar="C",
              help="Only advisories with findings in this category (repeatable).")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output (with the secret).")
@click.pass_obj
@fail_cleanly
def subscribe(obj: Context, target: str, slack_url: str | None, webhook_url: str | None, min_severity: str,
              categories: tuple[str, ...], as_json: bool) -> None:
    """Send alerts about TARGET (a repo owner/name, an owner, or '*') to Slack or a signed webhook."""
    from tracker.delivery import TargetGuard, new_secret, parse_categories, parse_target

    if (slack_url is None) == (webhook_url is None):
        raise click.UsageError("give exactly one of --slack URL or --webhook URL")
    try:
        target = parse_target(target)
        wanted = parse_categories(categories)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from exc
    kind, url = ("slack", slack_url) if slack_url is not None else ("webhook", webhook_url)
    assert url is not None
    TargetGuard(obj.settings.delivery.allow_hosts).check(url)  # TargetRefused: one line, exit 1
    secret = new_secret() if kind == "webhook" else None
    tracker = obj.tracker()
    sub = tracker.store.add_subscription(target=target, kind=kind, url=url, secret=secret,
                                         min_severity=min_severity, categories=wanted, now=tracker.clock())
    if as_json:
        _emit_json({**_subscription_json(sub), "secret": secret})
        return
    scope = f" in {', '.join(wanted)}" if wanted else ""
    click.echo(f"subscription {sub.id}: {kind} alerts for {target} ({min_severity} and above{scope})")
    if secret:
        click.echo(f"signing secret (shown once, keep it safe): {secret}")


@main.command()
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.pass_obj
@fail_cleanly
def subscriptions(obj: Context, as_json: bool) -> None:
    """List subscriptions (never their secrets)."""
    rows = obj.tracker().store.list_subscriptions()
    if as_json:
        _emit_json([_subscription_json(s) for s in rows])
        return
    if not rows:
        click.echo("no subscriptions; add one with `tracker subscribe TARGET --webhook URL`")
        return
    for s in rows:
        scope = f" [{', '.join(s.categories)}]" if s.categories else ""
        click.echo(f"{s.id:>4}  {s.kind:7}  {s.target:40}  {s.min_severity}+{scope}  {_redacted(s.kind, s.url)}")


@main.command()
@click.argument("subscription_id", type=int)
@click.pass_obj
@fail_cleanly
def unsubscribe(obj: Context, subscription_id: int) -> None:
    """Remove a subscription; its deliveries not yet sent are dropped."""
    dropped = obj.tracker().store.remove_subscription(subscription_id)
    if dropped is None:
        click.echo(f"error: no subscription {subscription_id}", err=True)
        sys.exit(1)
    click.echo(f"removed subscription {subscription_id}" + (f" ({dropped} pending deliveries dropped)"
                                                             if dropped else ""))


def _delivery_json(d: Any) -> dict[str, Any]:
    return {"id": d.id, "subscription": d.subscription_id, "webhook_id": d.webhook_id, "type": d.event_type,
            "advisory": d.advisory_id, "repo": d.repo_id, "severity": d.severity, "state": d.state,
            "attempts": d.attempts, "last_status": d.last_status, "last_error": d.last_error,
            "next_attempt_at": _iso(d.next_attempt_at) if d.state == "pending" else None,
            "created_at": _iso(d.created_at), "delivered_at": _iso(d.delivered_at)}


@main.group(invoke_without_command=True)
@click.option("--failed", is_flag=True, help="Only dead letters and deliveries being retried.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.pass_context
def deliveries(ctx: click.Context, failed: bool, as_json: bool) -> None:
    """Alerts queued, sent, being retried and dead, oldest first (`deliveries retry ID` resends a dead one)."""
    if ctx.invoked_subcommand is None:
        _list_deliveries(ctx.obj, failed, as_json)


@fail_cleanly
def _list_deliveries(obj: Context, failed: bool, as_json: bool) -> None:
    rows = obj.tracker().store.list_deliveries(failed=failed)
    if as_json:
        _emit_json([_delivery_json(d) for d in rows])
        return
    if not rows:
        click.echo("no failed deliveries" if failed else "no deliveries")
        return
    for d in rows:
        error = f"  {d.last_error}" if d.last_error and d.state != "delivered" else ""
        click.echo(f"{d.id:>6}  {d.state:9}  sub {d.subscription_id:<4} {d.event_type:19} {d.advisory_id}  "
                   f"attempts {d.attempts}{error}")


@deliveries.command("retry")
@click.argument("delivery_id", type=int)
@click.pass_obj
@fail_cleanly
def deliveries_retry(obj: Context, delivery_id: int) -> None:
    """Send a dead delivery again (with the same webhook-id)."""
    tracker = obj.tracker()
    row = tracker.store.get_delivery(delivery_id)
    if row is None:
        click.echo(f"error: no delivery {delivery_id}", err=True)
        sys.exit(1)
    if not tracker.store.retry_delivery(delivery_id, now=tracker.clock()):
        click.echo(f"error: delivery {delivery_id} is {row.state}, not dead: only a dead delivery is retried",
                   err=True)
        sys.exit(1)
    click.echo(f"delivery {delivery_id} queued again; `tracker run` sends it")


# -- status and API tokens ----------------------------------------------------------------------


@main.command()
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.option("--max-cycles", default=3, show_default=True, type=click.IntRange(min=1),
              help="A repo not polled, or a backlog waiting, for more than this many poll intervals is unhealthy.")
@click.pass_obj
@fail_cleanly
def status(obj: Context, as_json: bool, max_cycles: int) -> None:
    """Per repo: state, last poll, errors, next due, lag; the backlogs. Exits 1 when something is unhealthy."""
    from tracker.status import gather, render

    report = gather(obj.tracker(), max_cycles=max_cycles)
    if as_json:
        _emit_json(report.to_json())
    else:
        click.echo(render(report))
    if not report.healthy:
        sys.exit(1)


@main.group()
def token() -> None:
    """Bearer tokens for the API's writes (watch list, subscriptions)."""


@token.command("create")
@click.argument("name")
@click.pass_obj
@fail_cleanly
def token_create(obj: Context, name: str) -> None:
    """Make a token called NAME and print it, once (only a salted hash of it is stored)."""
    from tracker.store.tokens import TokenStore, validate_name

    try:
        validate_name(name)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from exc
    tracker = obj.tracker()
    text = TokenStore(tracker.store).create(name, now=tracker.clock())
    click.echo(text)
    click.echo(f"token {name!r} created; it is shown only now: send it as `Authorization: Bearer <token>`",
               err=True)


@token.command("list")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.pass_obj
@fail_cleanly
def token_list(obj: Context, as_json: bool) -> None:
    """List tokens (names and dates; the tokens themselves are not stored)."""
    from tracker.store.tokens import TokenStore

    rows = TokenStore(obj.tracker().store).list()
    if as_json:
        _emit_json([{"name": r.name, "id": r.key_id, "created_at": _iso(r.created_at),
                     "last_used_at": _iso(r.last_used_at)} for r in rows])
        return
    if not rows:
        click.echo("no tokens; make one with `tracker token create NAME`")
        return
    for r in rows:
        click.echo(f"{r.name:30} trk_{r.key_id}_…  created {_iso(r.created_at)}  "
                   f"last used {_iso(r.last_used_at) or 'never'}")


@token.command("revoke")
@click.argument("name")
@click.pass_obj
@fail_cleanly
def token_revoke(obj: Context, name: str) -> None:
    """Revoke the token called NAME: requests with it are refused (401) from now on."""
    from tracker.store.tokens import TokenStore

    if not TokenStore(obj.tracker().store).revoke(name):
        click.echo(f"error: no token named {name!r}", err=True)
        sys.exit(1)
    click.echo(f"revoked {name}")


# -- scanning a codebase ------------------------------------------------------------------------


@main.command()
@click.argument("path", type=click.Path(exists=True, file_okay=True, dir_okay=True))
@click.option("--format", "output_format", type=click.Choice(["text", "json", "sarif"]), default="text",
              show_default=True, help="Report format; sarif is SARIF 2.1.0 for code-scanning UIs.")
@click.option("--fail-on", "fail_on", multiple=True,
              type=click.Choice(["critical", "high", "moderate", "low", "info", "floating"]),
              help="Exit 1 when an advisory at or above this severity affects a pin, or (floating) when a "
                   "reference is not pinned to a commit. Repeatable.")
@click.option("--watch", is_flag=True, help="Add the repos found to the watch list.")
@click.pass_obj
@fail_cleanly
def scan(obj: Context, path: str, output_format: str, fail_on: tuple[str, ...], watch: bool) -> None:
    """Find the Hub models a codebase loads and report what changed upstream since each pin."""
    from pathlib import Path

    from tracker import __version__
    from tracker.scan.command import run_scan

    output, code = run_scan(Path(path), settings=obj.settings, user_tracker=obj.tracker,
                            output_format=output_format, fail_on=fail_on, watch=watch, version=__version__)
    click.echo(output, nl=False)
    sys.exit(code)


# -- estimator ----------------------------------------------------------------------------------


@main.command()
@click.argument("target")
@click.option("--revision", default=None, help="For a repo: the revision (default: the branch head).")
@click.option("--seq-len", type=click.IntRange(min=1, max=1 << 30), default=None,
              help="Training/serving sequence length.")  # max: tracker.estimate.plausible.MAX_CONTEXT
@click.option("--lora-rank", type=click.IntRange(min=1, max=65_536), default=16, show_default=True)  # MAX_RANK
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.pass_obj
@fail_cleanly
def estimate(obj: Context, target: str, revision: str | None, seq_len: int | None, lora_rank: int,
             as_json: bool) -> None:
    """Parameters, GPU memory to fine-tune and serve, per card: TARGET is a repo id, a config.json or a folder."""
    from pathlib import Path

    from tracker.estimate import estimate as run_estimate
    from tracker.estimate import render_card

    path = Path(target)
    headers = None
    if path.exists():
        config_path = path / "config.json" if path.is_dir() else path
        from tracker.findings.config import DEFAULT_MAX_BYTES, load_json_object

        try:  # bounded like polling: size, depth and element count; one line on failure
            with config_path.open("rb") as f:
                config = load_json_object(f.read(DEFAULT_MAX_BYTES + 1))
        except (OSError, ValueError) as exc:
            raise click.BadParameter(f"{config_path}: {exc}") from exc
        if path.is_dir():
            headers = _local_headers(path)
    else:
        repo = _repo_id(target)
        tracker = obj.tracker()
        config, headers = tracker.config_and_headers(repo, revision or "main")
    if not isinstance(config, dict):
        raise click.BadParameter("config.json must hold a JSON object")
    result = run_estimate(config, seq_len=seq_len, lora_rank=lora_rank, checkpoint_headers=headers or None)
    if as_json:
        _emit_json(result.to_json())
    else:
        click.echo(render_card(result))


def _local_headers(folder: Any) -> dict[str, Any]:
    """Safetensors headers of the files in a local folder (the header only, never the weights)."""
    from tracker.bounded import loads_json

    headers = {}
    for file in sorted(folder.glob("*.safetensors")):
        with file.open("rb") as f:
            length = int.from_bytes(f.read(8), "little")
            if 0 < length <= 100 * 1024 * 1024:
                try:
                    headers[file.name] = loads_json(f.read(length))
                except ValueError:
                    continue
    return headers


@main.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to serve the pages on.")
@click.option("--port", default=8080, show_default=True, type=click.IntRange(0, 65535),
              help="Port to serve the pages on (0: any free port).")
@click.option("--keep", type=click.Path(file_okay=False), default=None,
              help="Keep the stand-in's repos and the database in this directory (default: a temporary one).")
def demo(host: str, port: int, keep: str | None) -> None:
    """Offline demo: a scripted upstream history on a local Hub stand-in, polled, and the pages served."""
    from pathlib import Path

    from tracker.web.demo import DemoUnavailable, run_demo

    try:
        run_demo(host=host, port=port, keep=Path(keep) if keep else None, say=lambda line: click.echo(line))
    except DemoUnavailable as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(1)


if __name__ == "__main__":  # pragma: no cover
    main()
