"""Commands for operators: status, the configuration, API tokens, the offline demo."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import click

from tracker.core.errors import ConfigError
from tracker.services import ApiTokens
from tracker.surfaces.cli import (  # the group and the helpers every command shares
    Context,
    emit_json,
    fail_cleanly,
    iso,
    main,
    minute,
    pass_tracker,
)

if TYPE_CHECKING:
    from tracker.app import Tracker

# -- status and API tokens ----------------------------------------------------------------------


@main.command()
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.option("--max-cycles", default=3, show_default=True, type=click.IntRange(min=1),
              help="A repo not polled, or a backlog waiting, for more than this many poll intervals is unhealthy.")
@pass_tracker
def status(tracker: Tracker, as_json: bool, max_cycles: int) -> None:
    """Per repo: state, last poll, errors, next due, lag; the backlogs. Exits 1 when something is unhealthy."""
    from tracker.surfaces.status import gather, render

    report = gather(tracker, max_cycles=max_cycles)
    if as_json:
        emit_json(report.to_json())
    else:
        click.echo(render(report))
    if not report.healthy:
        sys.exit(1)


@main.group("config")
def config_group() -> None:
    """The configuration: file, environment and defaults."""


@config_group.command("check")
@click.pass_obj
@fail_cleanly
def config_check(obj: Context) -> None:
    """Validate the configuration and print the effective one (secrets masked); exit 2 naming a bad key."""
    from tracker.adapters.settings import describe, load_with_sources

    settings, sources = load_with_sources(obj.config)
    where = settings.config_path or "no config file: defaults and environment"
    click.echo(f"# {where}")
    click.echo("\n".join(describe(settings, sources)).rstrip())


@main.group()
def token() -> None:
    """Bearer tokens for the API's writes (watch list, subscriptions)."""


@token.command("create")
@click.argument("name")
@pass_tracker
def token_create(tracker: Tracker, name: str) -> None:
    """Make a token called NAME and print it, once (only a salted hash of it is stored)."""
    try:
        text = ApiTokens(tracker).create(name)
    except ConfigError as exc:  # the name
        raise click.BadParameter(str(exc)) from exc
    click.echo(text)
    click.echo(f"token {name!r} created; it is shown only now: send it as `Authorization: Bearer <token>`",
               err=True)


@token.command("list")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@pass_tracker
def token_list(tracker: Tracker, as_json: bool) -> None:
    """List tokens (names and dates; the tokens themselves are not stored)."""
    rows = ApiTokens(tracker).all()
    if as_json:
        emit_json([{"name": r.name, "id": r.key_id, "created_at": iso(r.created_at),
                     "last_used_at": iso(r.last_used_at)} for r in rows])
        return
    if not rows:
        click.echo("no tokens; make one with `tracker token create NAME`")
        return
    for r in rows:
        click.echo(f"{r.name:30} trk_{r.key_id}_…  created {minute(r.created_at)}  "
                   f"last used {minute(r.last_used_at) or 'never'}")


@token.command("revoke")
@click.argument("name")
@pass_tracker
def token_revoke(tracker: Tracker, name: str) -> None:
    """Revoke the token called NAME: requests with it are refused (401) from now on."""
    ApiTokens(tracker).revoke(name)  # NotFound: one line, exit 1
    click.echo(f"revoked {name}")


@main.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to serve the pages on.")
@click.option("--port", default=8080, show_default=True, type=click.IntRange(0, 65535),
              help="Port to serve the pages on (0: any free port).")
@click.option("--keep", type=click.Path(file_okay=False), default=None,
              help="Keep the stand-in's repos and the database in this directory (default: a temporary one).")
def demo(host: str, port: int, keep: str | None) -> None:
    """Offline demo: a scripted upstream history on a local Hub stand-in, polled, and the pages served."""
    from pathlib import Path

    from tracker.surfaces.web.demo import DemoUnavailable, run_demo

    try:
        run_demo(host=host, port=port, keep=Path(keep) if keep else None, say=lambda line: click.echo(line))
    except DemoUnavailable as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(1)
