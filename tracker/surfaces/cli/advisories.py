"""Commands about advisories: query, advisories, export, serve, reanalyse, scan, audit."""

from __future__ import annotations

import logging
import os
import sys
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import click

from tracker.core.escaping import escape_controls
from tracker.core.model import OUTPUT_FORMATS, SEVERITY_NAMES
from tracker.services import Advisories, Revisions
from tracker.surfaces.cli import (  # the group and the helpers every command shares
    Context,
    emit_json,
    fail_cleanly,
    main,
    parse_repo_id,
    pass_tracker,
)

if TYPE_CHECKING:
    from tracker.app import Tracker

# -- advisories ---------------------------------------------------------------------------------


@main.command()
@click.option("--repo", "repo_id", required=True, help="The repo (owner/name).")
@click.option("--revision", required=True, help="A commit sha (or prefix), branch or tag.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output, OSV-style {\"vulns\": [...]}.")
@pass_tracker
def query(tracker: Tracker, repo_id: str, revision: str, as_json: bool) -> None:
    """Which advisories affect REVISION of a repo, and how far it is behind the branch head."""
    repo = parse_repo_id(repo_id)
    result = Advisories(tracker).query(repo, revision, argument="--revision")
    if as_json:
        emit_json(result.to_json())
        return
    where = (f"{result.behind} revision(s) behind {(result.head or '')[:12]}" if result.behind is not None
             else "not on the tracked branch" if result.known else "unknown to the tracker and the Hub")
    click.echo(f"{result.repo}@{result.revision[:12]}: {where}")
    if not result.vulns:
        click.echo("no advisories affect this revision")
    for rec in result.vulns:
        click.echo(f"  {rec.id}  [{(rec.record.specific.severity or '').lower()}] "
                   f"{escape_controls(rec.record.summary or '')}")


@main.command()
@click.option("--repo", "repo_id", default=None, help="Only this repo.")
@click.option("--since", default=None, help="Only advisories modified at or after this date (YYYY-MM-DD or ISO).")
@click.option("--json", "as_json", is_flag=True, help="The OSV records, as a JSON list.")
@pass_tracker
def advisories(tracker: Tracker, repo_id: str | None, since: str | None, as_json: bool) -> None:
    """List advisories, oldest first."""
    repo = parse_repo_id(repo_id) if repo_id else None
    since_dt = None
    if since:
        try:
            since_dt = datetime.fromisoformat(since.replace("Z", "+00:00"))
        except ValueError as exc:
            raise click.BadParameter(f"invalid date {since!r}: use YYYY-MM-DD or an ISO timestamp") from exc
        if since_dt.tzinfo is None:
            since_dt = since_dt.replace(tzinfo=UTC)
    rows = Advisories(tracker).find(repo, since=since_dt)
    if as_json:
        emit_json([r.osv for r in rows])
        return
    for r in rows:
        state = " (withdrawn)" if r.withdrawn else " (fixed)" if r.fixed_sha else ""
        click.echo(f"{r.record.modified}  {r.id}  [{r.severity}] {escape_controls(r.record.summary or '')}{state}")


@main.group()
def export() -> None:
    """Export advisories for other tools."""


@export.command("osv")
@click.argument("directory", type=click.Path(file_okay=False))
@pass_tracker
def export_osv(tracker: Tracker, directory: str) -> None:
    """Write one <id>.json per advisory and an all.zip, as OSV offline databases are laid out.

    Streams: records are read a batch at a time, in id order, and each is written to its file and
    to the zip before the next batch is read, so memory stays bounded whatever the history.
    all.zip is written under a temporary name and renamed once complete.
    """
    import zipfile
    from pathlib import Path

    from tracker.core.advisory.export import ALL_ZIP, checked, record_bytes, zip_info

    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    partial = out / (ALL_ZIP + ".partial")
    count = 0
    with zipfile.ZipFile(partial, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for row in Advisories(tracker).every():
            record = row.osv
            record_id = checked(record)
            data = record_bytes(record)
            (out / f"{record_id}.json").write_bytes(data)
            archive.writestr(zip_info(record), data)
            count += 1
    os.replace(partial, out / ALL_ZIP)
    click.echo(f"wrote {count} advisories and all.zip to {out}")


@main.command()
@click.option("--host", default=None, help="Address to listen on (default from config: 127.0.0.1).")
@click.option("--port", default=None, type=click.IntRange(1, 65535), help="Port (default from config: 8080).")
@click.pass_obj
@fail_cleanly
def serve(obj: Context, host: str | None, port: int | None) -> None:
    """Serve the HTTP API without polling (GET /readyz then checks the database only)."""
    from tracker.surfaces.api import create_app
    from tracker.surfaces.cli.listen import check_listen, serve_app
    from tracker.surfaces.logs import start_line

    host, port = host or obj.settings.api.host, port or obj.settings.api.port
    check_listen(host, port)  # a busy port: one line and exit 1, before anything starts

    def opened(tracker: Tracker) -> None:
        logging.getLogger("tracker.serve").info("%s", start_line(tracker, api=(host, port), polling=False))

    # The app's lifespan opens the Tracker when the server starts and closes it when it stops.
    serve_app(create_app(obj.settings, bind_host=host, opened=opened), host, port)


@main.command()
@click.argument("repo_ids", nargs=-1)
@click.pass_obj
@fail_cleanly
def reanalyse(obj: Context, repo_ids: tuple[str, ...]) -> None:
    """Re-run the analysis of every stored revision with the current rules; advisories follow."""
    ids = [parse_repo_id(r) for r in repo_ids]  # bad ids are bad usage, before anything opens
    for done in Revisions(obj.tracker()).reanalyse(ids):
        click.echo(done.line())


# -- scanning a codebase ------------------------------------------------------------------------


@main.command()
@click.argument("path", type=click.Path(exists=True, file_okay=True, dir_okay=True))
@click.option("--format", "output_format", type=click.Choice(OUTPUT_FORMATS),
              default="text", show_default=True,
              help="Report format; sarif is SARIF 2.1.0 for code-scanning UIs, cyclonedx a CycloneDX 1.6 ML-BOM.")
@click.option("--fail-on", "fail_on", multiple=True,
              type=click.Choice([*SEVERITY_NAMES, "floating"]),
              help="Exit 1 when an advisory at or above this severity affects a pin, or (floating) when a "
                   "reference is not pinned to a commit. Repeatable.")
@click.option("--watch", is_flag=True, help="Add the repos found to the watch list.")
@click.pass_obj
@fail_cleanly
def scan(obj: Context, path: str, output_format: str, fail_on: tuple[str, ...], watch: bool) -> None:
    """Find the Hub models a codebase loads and report what changed upstream since each pin."""
    from pathlib import Path

    from tracker import __version__
    from tracker.surfaces.cli.scan_command import run_scan

    if not Path(path).is_dir() and not Path(path).is_file():  # a FIFO or a device: nothing a codebase holds
        raise click.BadParameter(f"{path} is not a regular file or a folder", param_hint="'PATH'")
    output, code = run_scan(Path(path), settings=obj.settings, user_tracker=obj.tracker,
                            output_format=output_format, fail_on=fail_on, watch=watch, version=__version__)
    click.echo(output, nl=False)
    sys.exit(code)


# -- auditing a machine's cache -----------------------------------------------------------------


@main.command()
@click.option("--cache-dir", default=None, metavar="DIR",
              help="The Hugging Face cache to audit (default: HF_HUB_CACHE, else HF_HOME/hub, else "
                   "~/.cache/huggingface/hub).")
@click.option("--format", "output_format", type=click.Choice(OUTPUT_FORMATS),
              default="text", show_default=True,
              help="Report format; cyclonedx is a CycloneDX 1.6 ML-BOM, sarif SARIF 2.1.0.")
@click.option("--fail-on", "fail_on", multiple=True,
              type=click.Choice([*SEVERITY_NAMES, "stale"]),
              help="Exit 1 when an advisory at or above this severity affects a cached revision, or (stale) when "
                   "a cached revision is behind its branch. Repeatable.")
@click.pass_obj
@fail_cleanly
def audit(obj: Context, cache_dir: str | None, output_format: str, fail_on: tuple[str, ...]) -> None:
    """Which model revisions this machine's Hugging Face cache holds, and the advisories affecting them."""
    from pathlib import Path

    from tracker import __version__
    from tracker.pipeline.audit.cache import CacheUnreadable
    from tracker.surfaces.cli.audit_command import run_audit

    try:
        output, code = run_audit(Path(cache_dir).expanduser() if cache_dir else None, settings=obj.settings,
                                 user_tracker=obj.tracker, output_format=output_format, fail_on=fail_on,
                                 version=__version__)
    except CacheUnreadable as exc:  # bad usage: the wrong folder, or none (exit 2, one line)
        click.echo(f"error: {escape_controls(str(exc))}", err=True)
        sys.exit(2)
    click.echo(output, nl=False)
    sys.exit(code)
