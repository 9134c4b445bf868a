"""Commands for feeds' subscribers: subscribe, subscriptions, unsubscribe, deliveries."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from tracker.core.errors import ConfigError
from tracker.core.escaping import escape_controls
from tracker.core.model import SEVERITY_NAMES
from tracker.services import NewSubscription, Subscriptions, daemon_would_refuse, redacted_url
from tracker.surfaces.cli import (  # the group and the helpers every command shares
    Context,
    emit_json,
    fail_cleanly,
    iso,
    main,
    pass_tracker,
)

if TYPE_CHECKING:
    from tracker.app import Tracker

# -- subscriptions and deliveries ---------------------------------------------------------------


def _subscription_json(sub: Any) -> dict[str, Any]:
    return {"id": sub.id, "target": sub.target, "kind": sub.kind, "url": redacted_url(sub.kind, sub.url),
            "min_severity": sub.min_severity, "categories": list(sub.categories), "created_at": iso(sub.created_at)}


@main.command()
@click.argument("target")
@click.option("--slack", "slack_url", default=None, metavar="URL", help="A Slack incoming-webhook URL.")
@click.option("--webhook", "webhook_url", default=None, metavar="URL",
              help="An HTTPS endpoint; alerts are signed per Standard Webhooks.")
@click.option("--min-severity", default="info", show_default=True,
              type=click.Choice(SEVERITY_NAMES),
              help="Only advisories at least this severe.")
@click.option("--category", "categories", multiple=True, metavar="C",
              help="Only advisories with findings in this category (repeatable).")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output (with the secret).")
@click.pass_obj
@fail_cleanly
def subscribe(obj: Context, target: str, *, slack_url: str | None, webhook_url: str | None,
              min_severity: str, categories: tuple[str, ...], as_json: bool) -> None:
    """Send alerts about TARGET (a repo owner/name, an owner, or '*') to Slack or a signed webhook."""
    try:
        wanted = NewSubscription.to_one_of(target, slack=slack_url, webhook=webhook_url,
                                           min_severity=min_severity, categories=categories)
    except ConfigError as exc:  # not exactly one channel
        raise click.BadParameter(str(exc)) from exc
    kind = wanted.kind
    warning = daemon_would_refuse(obj.config, wanted.url, kind=kind, config_path=obj.settings.config_path)
    if warning:
        click.echo(f"warning: {warning}", err=True)
    try:
        done = Subscriptions(obj.tracker()).subscribe(wanted)  # TargetRefused: one line, exit 1
    except ConfigError as exc:  # the target or a category
        raise click.BadParameter(str(exc)) from exc
    sub = done.subscription
    if as_json:
        emit_json({**_subscription_json(sub), "secret": done.secret})
        return
    scope = f" in {', '.join(sub.categories)}" if sub.categories else ""
    click.echo(f"subscription {sub.id}: {kind} alerts for {sub.target} ({min_severity} and above{scope})")
    if done.secret:
        click.echo(f"signing secret (shown once, keep it safe): {done.secret}")
    if not done.watched:
        _warn_unwatched(sub.target)


def _warn_unwatched(target: str) -> None:
    """A subscription to what nothing watched matches is kept (the watch may come later), with a warning."""
    if "/" in target:
        click.echo(f"warning: {target} is not watched, so no alert comes until you "
                   f"`tracker watch add {target}`", err=True)
    else:
        click.echo(f"warning: no repo of {target} is watched, so no alert comes until you "
                   f"`tracker watch add {target}/NAME`", err=True)


@main.command()
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@pass_tracker
def subscriptions(tracker: Tracker, as_json: bool) -> None:
    """List subscriptions (never their secrets)."""
    rows = Subscriptions(tracker).all()
    if as_json:
        emit_json([_subscription_json(s) for s in rows])
        return
    if not rows:
        click.echo("no subscriptions; add one with `tracker subscribe TARGET --webhook URL`")
        return
    click.echo(f"{'ID':>4}  {'KIND':7}  {'TARGET':40}  SEVERITY [CATEGORIES]  URL")
    for s in rows:
        scope = f" [{', '.join(s.categories)}]" if s.categories else ""
        click.echo(f"{s.id:>4}  {s.kind:7}  {s.target:40}  {s.min_severity}+{scope}  {redacted_url(s.kind, s.url)}")


@main.command()
@click.argument("subscription_id", type=int)
@pass_tracker
def unsubscribe(tracker: Tracker, subscription_id: int) -> None:
    """Remove a subscription; its deliveries not yet sent are dropped."""
    dropped = Subscriptions(tracker).unsubscribe(subscription_id)  # NotFound: one line, exit 1
    click.echo(f"removed subscription {subscription_id}" + (f" ({dropped} pending deliveries dropped)"
                                                             if dropped else ""))


def _delivery_json(d: Any) -> dict[str, Any]:
    return {"id": d.id, "subscription": d.subscription_id, "webhook_id": d.webhook_id, "type": d.event_type,
            "advisory": d.advisory_id, "repo": d.repo_id, "severity": d.severity, "state": d.state,
            "attempts": d.attempts, "last_status": d.last_status, "last_error": d.last_error,
            "next_attempt_at": iso(d.next_attempt_at) if d.state == "pending" else None,
            "created_at": iso(d.created_at), "delivered_at": iso(d.delivered_at)}


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
    rows = Subscriptions(obj.tracker()).deliveries(failed=failed)
    if as_json:
        emit_json([_delivery_json(d) for d in rows])
        return
    if not rows:
        click.echo("no failed deliveries" if failed else "no deliveries")
        return
    click.echo(f"{'ID':>6}  {'STATE':9}  {'SUB':8} {'TYPE':19} ADVISORY  ATTEMPTS  LAST ERROR")
    for d in rows:
        error = f"  {escape_controls(d.last_error)}" if d.last_error and d.state != "delivered" else ""
        click.echo(f"{d.id:>6}  {d.state:9}  sub {d.subscription_id:<4} {d.event_type:19} {d.advisory_id}  "
                   f"attempts {d.attempts}{error}")


@deliveries.command("retry")
@click.argument("delivery_id", type=int, required=False)
@click.option("--all", "--failed", "every", is_flag=True, help="Every dead delivery, oldest first.")
@pass_tracker
def deliveries_retry(tracker: Tracker, delivery_id: int | None, every: bool = False) -> None:
    """Send a dead delivery again (with the same webhook-id), or every dead one (--all)."""
    if every == (delivery_id is not None):
        raise click.UsageError("give a delivery ID, or --all")
    if delivery_id is None:
        queued = Subscriptions(tracker).retry_dead()
        noun = "delivery" if queued == 1 else "deliveries"
        click.echo(f"{queued} dead {noun} queued again; `tracker run` sends them" if queued
                   else "no dead deliveries to retry")
        return
    Subscriptions(tracker).retry(delivery_id)  # NotFound, NotRetried: one line, exit 1
    click.echo(f"delivery {delivery_id} queued again; `tracker run` sends it")
