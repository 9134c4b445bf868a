"""The ``tracker`` command: parse, build a Tracker through ``app``, call, format.

This module holds the group, the shared context, the helpers and the one table of exit codes;
the commands live in the modules beside it, by what they are for (watching, reading,
advisories, delivery, ops). A command that needs a Tracker takes it through :func:`pass_tracker`,
which opens it for the command and closes it when the command ends, however it ends. What a
command does is a service's (:mod:`tracker.services`); the commands parse, call and format. Exit codes:
0 success, 1 a tracker error (one line on stderr), 2 bad usage.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from datetime import datetime
from functools import wraps
from typing import TYPE_CHECKING, Any

import click

from tracker.adapters.settings import Settings, load_settings
from tracker.core.errors import ConfigError, SettingsError, TrackerError, first_line
from tracker.core.escaping import escape_controls
from tracker.core.model import RepoId, validate_repo_id

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
        """The command's Tracker, opened on first use and closed when the command ends (click closes
        the resources of its root context however the command exits: a return, an error, sys.exit)."""
        if self._tracker is None:
            from tracker.app import make_tracker

            tracker = make_tracker(self.settings, auto_upgrade=auto_upgrade)
            self._tracker = click.get_current_context().find_root().with_resource(tracker)
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
            if isinstance(exc, SettingsError):  # the file or environment, not the command line: one line
                click.echo(f"error: {escape_controls(first_line(exc))}", err=True)
                sys.exit(code)
            if code == 2:
                raise click.UsageError(str(exc)) from exc
            click.echo(f"error: {escape_controls(first_line(exc))}", err=True)
            sys.exit(code)

    return wrapper


def pass_tracker(func: Callable[..., Any]) -> Callable[..., Any]:
    """The command gets the Tracker as its first argument, opened for it and closed when it ends; the
    tracker's errors (building it included) become one line and the exit status of EXIT_CODES."""

    @click.pass_obj
    @fail_cleanly
    @wraps(func)
    def wrapper(obj: Context, *args: Any, **kwargs: Any) -> Any:
        return func(obj.tracker(), *args, **kwargs)

    return wrapper


def parse_repo_id(value: str) -> RepoId:
    try:
        return validate_repo_id(value.strip())
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from exc


def iso(value: datetime | None) -> str | None:
    return value.isoformat().replace("+00:00", "Z") if value else None


def minute(value: datetime | None) -> str | None:
    """A time in a table or a listing, to the minute (UTC): 2026-12-01 10:00."""
    return value.strftime("%Y-%m-%d %H:%M") if value else None


def plain_text() -> bool:
    """ASCII arrows: NO_COLOR is set (no-color.org), or stdout cannot encode "→" (LANG=C, an ASCII pipe)."""
    if os.environ.get("NO_COLOR"):
        return True
    encoding: str = getattr(sys.stdout, "encoding", None) or "utf-8"
    try:
        "→".encode(encoding)
    except (UnicodeEncodeError, LookupError):
        return True
    return False


def arrows(text: str) -> str:
    """One arrow everywhere: "→", or "->" where plain_text() says so (the findings hold both)."""
    return text.replace("→", "->") if plain_text() else text.replace(" -> ", " → ")


def emit_json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, ensure_ascii=False, default=str))


def os_error_line(exc: OSError) -> str:
    """An operating-system error as one line naming the path and the cause: ``/proc/nope: No such file or
    directory``."""
    cause = exc.strerror or type(exc).__name__
    paths = [str(p) for p in (exc.filename, exc.filename2) if p is not None]
    return f"{' to '.join(paths)}: {cause}" if paths else f"{cause}: {exc}" if str(exc) != cause else cause


class TrackerGroup(click.Group):
    """The root group: whatever a command meets in the file system (a missing or unreadable path, a special
    file, a full disk) is one line on stderr and exit 1, never a traceback."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except BrokenPipeError:
            raise  # click's own handling: the reader went away (`tracker events | head`)
        except OSError as exc:
            click.echo(f"error: {os_error_line(exc)}", err=True)
            sys.exit(1)


@click.group(cls=TrackerGroup)
@click.option("--config", "config", type=click.Path(dir_okay=False), envvar="TRACKER_CONFIG",
              help="Config file (default: ./config/tracker.toml when present).")
@click.option("-v", "--verbose", count=True, help="More logging (-vv for debug and library internals).")
@click.option("--log-format", type=click.Choice(["text", "json"]), default="text", envvar="TRACKER_LOG_FORMAT",
              show_default=True, help="Log lines as text, or one JSON object per line (for log shippers).")
@click.version_option(package_name="upstream-tracker")
@click.pass_context
def main(ctx: click.Context, config: str | None, verbose: int, log_format: str) -> None:
    """Watch model repos on the Hugging Face Hub and report precisely what changed upstream."""
    from tracker.surfaces.logs import setup_logging

    # The long-running commands say what they do at INFO; the others only warn (tracker/surfaces/logs.py).
    setup_logging(verbose, log_format, talkative=ctx.invoked_subcommand in ("run", "serve"))
    ctx.obj = Context(config)
    ctx.obj.verbose = verbose


# Importing the command modules registers their commands on ``main``.
from tracker.surfaces.cli import advisories, delivery, ops, reading, verify_command, watching  # noqa: E402,F401
