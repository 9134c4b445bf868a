"""Commands that set the tracker up and run it: init, watch, poll, run."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

import click

from tracker.adapters.settings import format_duration, parse_interval
from tracker.core.errors import NotFound, TrackerError
from tracker.core.escaping import escape_controls
from tracker.core.model import PollOutcome, RepoId, validate_repo_id
from tracker.pipeline.polling import NOT_POLLED_INTERRUPTED, PollResult
from tracker.services import Polling, Watching
from tracker.services.revisions import checked_revision
from tracker.surfaces.cli import (  # the group and the helpers every command shares
    Context,
    emit_json,
    fail_cleanly,
    iso,
    main,
    minute,
    parse_repo_id,
    pass_tracker,
)

if TYPE_CHECKING:
    from tracker.app import Tracker

# -- init ---------------------------------------------------------------------------------------


@main.command()
@click.pass_obj
@fail_cleanly
def init(obj: Context) -> None:
    """Create or migrate the database schema (needed for PostgreSQL; SQLite does it itself)."""
    from tracker.services.database import migrate

    done = migrate(obj.settings.database.url)
    if not done.changed:
        click.echo(f"{done.where}: schema already at {done.head}")
    else:
        click.echo(f"{done.where}: schema migrated from {done.before or 'empty'} to {done.head}")


# -- watch list ---------------------------------------------------------------------------------


@main.group()
def watch() -> None:
    """Manage the repos the tracker watches."""


@watch.command("add")
@click.argument("repo_ids", nargs=-1)
@click.option("--branch", default=None, help="Branch to follow (default: main; a repo watched already keeps its own).")
@click.option("--every", default=None, help="Poll interval, e.g. 15m, 1h, 1d (default: from config).")
@click.option("--from", "from_file", type=click.File("r"), help="Read repo ids from a file, one per line ('-': stdin).")
@click.option("--rule", "rule_text", default=None,
              help="Watch every model a rule matches, e.g. 'author=intfloat' or "
                   "'library=sentence-transformers downloads>=10000' (terms: author, library, pipeline_tag, downloads>=N).")
@click.option("--max", "max_repos", default=None, type=click.IntRange(1, 100_000),
              help="With --rule: the most repos the rule watches (default 1000).")
@click.option("--with-base", is_flag=True,
              help="Also watch the base model chain the cards declare (base_model; at most 4 levels, from the Hub).")
@click.option("--no-check", is_flag=True, help="Add without asking the Hub whether each repo exists (offline).")
@click.pass_obj
@fail_cleanly
# click passes each option by name: one keyword-only parameter per option.
def watch_add(  # noqa: PLR0913
    obj: Context, repo_ids: tuple[str, ...], *, branch: str | None, every: str | None, from_file: Any,
    with_base: bool = False, no_check: bool = False, rule_text: str | None = None, max_repos: int | None = None,
) -> None:
    """Watch one or more repos (owner/name), or every model a rule matches (--rule)."""
    if rule_text is not None:
        if repo_ids or from_file is not None or with_base:
            raise click.UsageError("--rule watches what the rule matches: give no repo ids, --from or --with-base")
        _add_rule(obj, rule_text, max_repos)
        return
    if max_repos is not None:
        raise click.UsageError("--max goes with --rule")
    valid = _valid_ids(_listed_ids(repo_ids, from_file))
    seconds = parse_interval(every) if every else None
    branch = checked_revision(branch, "branch") if branch is not None else None  # before the Hub is asked
    tracker = obj.tracker()
    if not no_check and not _on_hub(tracker, list(dict.fromkeys(valid))):
        click.echo("nothing added: fix the ids above (or pass --no-check to add them anyway)", err=True)
        sys.exit(1)
    for repo_id in dict.fromkeys(valid):
        watched = Watching(tracker).add(repo_id, branch=branch, every=seconds)
        verb = "watching" if watched.created else "updated" if branch or seconds else "already watching"
        row = watched.repo
        click.echo(f"{verb} {repo_id} ({row.branch}, every "
                   f"{format_duration(row.every_seconds or obj.settings.poll.every)})")
    if with_base and not _watch_bases(tracker, list(dict.fromkeys(valid)), branch=branch or "main", every=seconds):
        sys.exit(1)


def _listed_ids(repo_ids: tuple[str, ...], from_file: Any) -> list[str]:
    """The ids given as arguments, then those of ``--from`` (one per line, ``#`` comments); bad usage if none."""
    ids = list(repo_ids)
    if from_file is not None:
        for line in from_file:
            line = line.split("#", 1)[0].strip()
            if line:
                ids.append(line)
    if not ids:
        raise click.UsageError("give at least one repo id, or --from FILE")
    return ids


def _valid_ids(ids: list[str]) -> list[RepoId]:
    """Every id validated, or each bad one said and exit 2 with nothing added."""
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
    return valid


def _add_rule(obj: Context, text: str, max_repos: int | None) -> None:
    """``watch add --rule``: store the rule; the next cycle (`tracker poll`, `tracker run`) watches its matches."""
    added = Watching(obj.tracker()).add_rule(text, max_repos=max_repos)  # a ConfigError: bad usage, exit 2
    row = added.rule
    click.echo(f"{'rule' if added.created else 'updated rule'} {row.id}: {row.text} (at most {row.max_repos} repos); "
               "the next poll cycle watches what it matches")


def _on_hub(tracker: Tracker, repo_ids: list[RepoId]) -> bool:
    """Each id exists on the Hub (False and an error per missing one); an unreachable Hub only warns."""
    ok = True
    for repo_id in repo_ids:
        try:
            unasked = Watching(tracker).require_on_hub(repo_id)
        except NotFound as exc:
            click.echo(f"error: {exc}", err=True)
            ok = False
            continue
        if unasked is not None:
            click.echo(f"warning: could not ask the Hub whether {repo_id} exists ({unasked}); "
                       "adding it anyway", err=True)
    return ok


def _watch_bases(tracker: Tracker, repo_ids: list[RepoId], *, branch: str, every: float | None) -> bool:
    """``watch add --with-base``: watch each repo's base chain (tracker/pipeline/lineage.py); False if one was refused."""
    ok = True
    for repo_id in repo_ids:
        chain = Watching(tracker).add_bases(repo_id, branch=branch, every=every)
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
@pass_tracker
def watch_list(tracker: Tracker, as_json: bool) -> None:
    """List watched repos."""
    watching = Watching(tracker)
    rows = watching.repos(with_config=True)
    rules = watching.rules()
    if as_json:
        terms = {rule.id: rule.text for rule in rules}
        emit_json([
            {
                "repo": r.repo_id, "branch": r.branch,
                "every": format_duration(r.every_seconds or tracker.settings.poll.every),
                "every_seconds": r.every_seconds or tracker.settings.poll.every,
                "state": r.state, "last_seen_sha": r.last_seen_sha, "renamed_to": r.renamed_to,
                "last_polled_at": iso(r.last_polled_at), "last_error": r.last_error, "rule": r.rule_id,
                "rule_terms": terms.get(r.rule_id) if r.rule_id is not None else None,
            }
            for r in rows
        ])
        return
    if not rows and not rules:
        click.echo("no repos watched; add some with `tracker watch add OWNER/NAME`")
        return
    click.echo(f"{'REPO':45} {'BRANCH':10} {'EVERY':6} {'STATE':9} {'HEAD READ':13} LAST POLLED")
    for r in rows:
        click.echo(
            f"{r.repo_id:45} {r.branch:10} {format_duration(r.every_seconds or tracker.settings.poll.every):6} "
            f"{r.state:9} {(r.last_seen_sha or '-')[:12]:13} {minute(r.last_polled_at) or 'never'}"
            + (f"  (rule {r.rule_id})" if r.rule_id is not None else "")
        )
    if rules:
        click.echo("")
        click.echo(f"{'RULE':5} {'REPOS':>11} {'EVALUATED':21} TERMS")
        by_rule: dict[int, list[str]] = {}
        for r in rows:
            if r.rule_id is not None:
                by_rule.setdefault(r.rule_id, []).append(r.repo_id)
        for rule in rules:
            held = by_rule.get(rule.id, [])
            note = " (cap reached)" if rule.capped else ""
            click.echo(f"{rule.id:<5} {f'{len(held)}/{rule.max_repos}':>11} {minute(rule.evaluated_at) or 'not yet':21} "
                       f"{rule.text}{note}")
            for repo_id in held:
                click.echo(f"      {repo_id}")


@watch.command("remove")
@click.argument("repo_id", required=False)
@click.option("--rule", "rule_id", type=int, default=None, help="Remove watch rule ID and the repos it watches.")
@click.pass_obj
@fail_cleanly
def watch_remove(obj: Context, repo_id: str | None, rule_id: int | None = None) -> None:
    """Stop watching a repo (its stored revisions are deleted with it), or a rule (--rule ID)."""
    if rule_id is not None:
        if repo_id is not None:
            raise click.UsageError("give a repo id or --rule ID, not both")
        removed = Watching(obj.tracker()).remove_rule(rule_id)  # NotFound: one line, exit 1
        click.echo(f"removed rule {rule_id} and the {len(removed)} repo(s) it watched")
        return
    if repo_id is None:
        raise click.UsageError("give a repo id, or --rule ID")
    repo = parse_repo_id(repo_id)
    Watching(obj.tracker()).remove(repo)  # NotFound, ListedInConfig: one line, exit 1
    click.echo(f"removed {repo}")


# -- polling ------------------------------------------------------------------------------------


@main.command()
@click.argument("repo_ids", nargs=-1)
@click.option("--backfill", default=0, type=click.IntRange(min=0),
              help="Also read N revisions older than the first one read (on a first poll, or any later one).")
@click.pass_obj
@fail_cleanly
def poll(obj: Context, repo_ids: tuple[str, ...], backfill: int) -> None:
    """Run one poll cycle over the given (or all watched) repos and exit."""
    from tqdm import tqdm

    from tracker.surfaces.entry import EXIT_INTERRUPTED, graceful_stop

    ids = [parse_repo_id(r) for r in repo_ids] or None  # bad ids are bad usage, before anything opens
    tracker = obj.tracker()
    tracker.sync_config_watches()
    bar = tqdm(desc="revisions", unit="rev", disable=not backfill or not sys.stderr.isatty(), leave=False)

    def stop() -> None:  # the first Ctrl-C (tracker/surfaces/entry.py): the polls in hand stop between revisions
        tracker.poller.stopping.set()
        click.echo("interrupted: finishing the revisions in hand (Ctrl-C again exits at once)", err=True)

    try:
        with graceful_stop(stop):
            results = tracker.poll(ids, backfill=backfill, progress=bar.update)
    finally:
        bar.close()
    outage = next((r.error for r in results if r.hub_unreachable), None)
    if outage:  # said once, not once per repo
        click.echo(f"error: {outage}", err=True)
    for result in results:
        click.echo(f"{result.repo}: error: the Hub is unreachable" if result.hub_unreachable
                   else escape_controls(result.line()))  # its error may quote the Hub
    failed = [r for r in results if r.status in (PollOutcome.ERROR, PollOutcome.NOT_FOUND)]
    if tracker.poller.stopping.is_set():
        click.echo(_interrupted_summary(tracker, results))
        sys.exit(EXIT_INTERRUPTED)
    if len(results) > 1:
        changed = sum(1 for r in results if r.new_revisions)
        busy = sum(1 for r in results if r.status == PollOutcome.BUSY)
        click.echo(f"polled {len(results)} repos: {changed} with new revisions, {len(failed)} failed"
                   + (f", {busy} skipped (busy)" if busy else ""))
    if failed:
        sys.exit(1)


def _interrupted_summary(tracker: Tracker, results: list[PollResult]) -> str:
    """What an interrupted `tracker poll` did and what it left for the next one."""
    left = [r for r in results if r.error == NOT_POLLED_INTERRUPTED]
    analysed = sum(r.processed for r in results)
    try:
        pending: int | str = Polling(tracker).pending_revisions()
    except TrackerError:
        pending = "?"
    return (f"interrupted: polled {len(results) - len(left)} of {len(results)} repo(s), {analysed} revision(s) "
            f"analysed; left for the next poll: {len(left)} repo(s) not polled, {pending} revision(s) waiting to "
            "be read")


@main.command()
@click.option("--host", default=None, help="Address for the HTTP API (default from config: 127.0.0.1).")
@click.option("--port", default=None, type=click.IntRange(1, 65535), help="Port for the HTTP API (default from config: 8080).")
@click.option("--no-api", is_flag=True, help="Poll only; do not serve the HTTP API.")
@click.option("--log-format", type=click.Choice(["text", "json"]), default=None,
              help="Log lines as text or JSON (the same as `tracker --log-format`).")
@click.pass_obj
@fail_cleanly
def run(obj: Context, host: str | None, port: int | None, no_api: bool, log_format: str | None) -> None:
    """The daemon: poll every watched repo on its schedule until SIGTERM or SIGINT."""
    from tracker.app import make_scheduler
    from tracker.surfaces.daemon import run_daemon

    if log_format:
        from tracker.surfaces.logs import setup_logging

        setup_logging(obj.verbose, log_format, talkative=True)
    host, port = host or obj.settings.api.host, port or obj.settings.api.port
    if not no_api:
        from tracker.surfaces.cli.listen import check_listen

        check_listen(host, port)  # a busy port: one line and exit 1, before anything starts
    tracker = obj.tracker(auto_upgrade=obj.settings.is_sqlite)
    run_daemon(tracker, make_scheduler(), host=host, port=port, api=not no_api)
