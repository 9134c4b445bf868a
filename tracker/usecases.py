"""What the CLI and the HTTP API both do: watch, subscribe, tokens, reanalyse.

Each use case takes the :class:`tracker.app.Tracker` and plain arguments, and returns a result or
raises a tracker error; the surfaces only parse and format (text and exit codes in the CLI, JSON
and statuses in the API). The errors, by what the caller did:

- :class:`~tracker.core.errors.ConfigError`: a bad argument (a target, a category, a token name,
  a rule): exit 2 in the CLI, 400 in the API;
- :class:`~tracker.core.errors.NotFound`: no subscription, token, rule or watched repo by that id or
  name: exit 1, 404;
- :class:`~tracker.adapters.delivery.TargetRefused`: a URL the delivery guard refuses: exit 1, 400;
- the store's and the Hub's own errors, as everywhere else.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tracker.adapters.delivery import TargetGuard, new_secret, parse_categories, parse_target
from tracker.adapters.store.tokens import TokenRow, validate_name
from tracker.core.errors import ConfigError, NotFound
from tracker.core.model import RepoId, RepoRow
from tracker.core.watchrules import DEFAULT_MAX, RuleRow, parse_rule

if TYPE_CHECKING:
    from tracker.adapters.store.delivery import SubscriptionRow
    from tracker.app import Tracker

__all__ = [
    "NewSubscription", "Reanalysed", "Subscribed", "Watched", "add_rule", "create_token", "list_tokens", "reanalyse",
    "remove_rule", "revoke_token", "subscribe", "unsubscribe", "unwatch", "watch",
]


# -- the watch list ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Watched:
    """A repo on the watch list, and whether this call added it (else it updated its branch and interval)."""

    repo: RepoRow
    created: bool


def watch(tracker: Tracker, repo_id: RepoId, *, branch: str | None = None, every: float | None = None) -> Watched:
    """Watch ``repo_id`` (a validated id; on ``main`` unless ``branch``); watching it again updates the branch
    and interval given, and never one not given."""
    row, created = tracker.store.repos.add(repo_id, branch=branch, every=every, now=tracker.clock())
    return Watched(repo=row, created=created)


def unwatch(tracker: Tracker, repo_id: RepoId) -> None:
    """Stop watching ``repo_id``: its stored revisions go with it. Raises NotFound when it is not watched."""
    if not tracker.store.repos.remove(repo_id):
        raise NotFound(f"not watched: {repo_id}")


def add_rule(tracker: Tracker, text: str, *, max_repos: int | None = None) -> tuple[RuleRow, bool]:
    """Store a watch rule (ConfigError when ``text`` is not one); the next poll cycle watches its matches.

    Returns the rule and whether it is new (else the same terms' cap was updated).
    """
    rule = parse_rule(text)
    return tracker.store.rules.add(rule, max_repos=max_repos or DEFAULT_MAX, now=tracker.clock())


def remove_rule(tracker: Tracker, rule_id: int) -> list[RepoId]:
    """Remove a watch rule and the repos it watches (returned). Raises NotFound when there is no such rule."""
    removed = tracker.store.rules.remove(rule_id)
    if removed is None:
        raise NotFound(f"no watch rule {rule_id}")
    return removed


@dataclass(frozen=True)
class Reanalysed:
    """What re-analysing one repo changed: its revisions whose findings differ now, and what followed."""

    repo: RepoId
    revisions: int  # revisions read again
    changed: int  # of them, those whose findings changed
    advisories_new: int = 0
    advisories_updated: int = 0
    advisories_withdrawn: int = 0
    alerts: int = 0  # deliveries queued for the advisories it changed

    def line(self) -> str:
        return (f"{self.repo}: {self.revisions} revision(s) re-analysed, {self.changed} changed; advisories: "
                f"{self.advisories_new} new, {self.advisories_updated} updated, {self.advisories_withdrawn} withdrawn; "
                f"{self.alerts} alert(s) queued")


def reanalyse(tracker: Tracker, repo_ids: Sequence[RepoId] = ()) -> Iterator[Reanalysed]:
    """Re-run the analysis of each repo's stored revisions (every watched repo when none is named).

    Yields what each repo's re-analysis changed as it is done, so a long run reports as it goes;
    a repo that is not watched raises NotWatched when its turn comes.
    """
    ids = list(repo_ids) or [r.repo_id for r in tracker.store.repos.all()]
    for repo_id in ids:
        repo = tracker.repo(repo_id)
        before = _advisory_states(tracker, repo.pk)
        queued = sum(1 for d in tracker.store.outbox.list_deliveries() if d.repo_id == repo_id)
        read = len([r for r in tracker.store.revisions.of_repo(repo.pk, status="done") if r.snapshot is not None])
        changed = tracker.reanalyse(repo_id)
        after = _advisory_states(tracker, repo.pk)
        yield Reanalysed(
            repo=repo_id, revisions=read, changed=changed,
            advisories_new=sum(1 for i in after if i not in before),
            advisories_updated=sum(1 for i, state in after.items() if i in before and state != before[i]
                                   and not state[1]),
            advisories_withdrawn=sum(1 for i, state in after.items() if state[1] and not before.get(i, state)[1]),
            alerts=sum(1 for d in tracker.store.outbox.list_deliveries() if d.repo_id == repo_id) - queued)


def _advisory_states(tracker: Tracker, repo_pk: int) -> dict[str, tuple[object, bool]]:
    """Each advisory of a repo: (when last modified, withdrawn)."""
    return {a.id: (a.modified, a.withdrawn) for a in tracker.store.advisories.find(repo_pk=repo_pk, versions=False)}


# -- subscriptions ----------------------------------------------------------------------------


@dataclass(frozen=True)
class NewSubscription:
    """A subscription as asked for: ``kind`` is ``slack`` or ``webhook``, ``url`` where alerts go."""

    target: str  # a repo id, an owner, or "*"
    kind: str
    url: str
    min_severity: str = "info"
    categories: Sequence[str] = ()


@dataclass(frozen=True)
class Subscribed:
    """The subscription stored, its signing secret (webhooks only: shown once), and whether any
    watched repo is covered by its target (an alert needs one; the watch may come later)."""

    subscription: SubscriptionRow
    secret: str | None
    watched: bool


def subscribe(tracker: Tracker, wanted: NewSubscription) -> Subscribed:
    """Store a subscription. Raises ConfigError for a bad target or category, TargetRefused for a URL the
    delivery guard refuses (a private address, not http(s))."""
    try:
        target = parse_target(wanted.target)
        categories = parse_categories(wanted.categories)
    except ValueError as exc:
        raise ConfigError(str(exc)) from exc
    # A Slack webhook is Slack's own host: one that does not resolve now (a subscription made offline) is
    # kept, and resolved and checked at every send like any target.
    TargetGuard(tracker.settings.delivery.allow_hosts).check(wanted.url, unresolved_ok=wanted.kind == "slack")
    secret = new_secret() if wanted.kind == "webhook" else None
    row = tracker.store.outbox.add_subscription(target=target, kind=wanted.kind, url=wanted.url, secret=secret,
                                         min_severity=wanted.min_severity, categories=categories,
                                         now=tracker.clock())
    return Subscribed(subscription=row, secret=secret, watched=_covers_a_watched_repo(tracker, target))


def _covers_a_watched_repo(tracker: Tracker, target: str) -> bool:
    if target == "*":
        return True
    watched = [r.repo_id.lower() for r in tracker.store.repos.all()]
    if "/" in target:
        return target.lower() in watched
    return any(r.startswith(target.lower() + "/") for r in watched)


def unsubscribe(tracker: Tracker, subscription_id: int) -> int:
    """Remove a subscription; how many of its deliveries not yet sent were dropped. Raises NotFound."""
    dropped = tracker.store.outbox.remove_subscription(subscription_id)
    if dropped is None:
        raise NotFound(f"no subscription {subscription_id}")
    return dropped


# -- API tokens -------------------------------------------------------------------------------


def create_token(tracker: Tracker, name: str) -> str:
    """A new token called ``name``, the only time its text exists (a salted hash of it is stored).

    Raises ConfigError for a bad name, TokenExists when one of that name exists.
    """
    try:
        validate_name(name)
    except ValueError as exc:
        raise ConfigError(str(exc)) from exc
    return tracker.tokens.create(name, now=tracker.clock())


def list_tokens(tracker: Tracker) -> list[TokenRow]:
    """The tokens by name (names and dates; the tokens themselves are not stored)."""
    return tracker.tokens.list()


def revoke_token(tracker: Tracker, name: str) -> None:
    """Revoke the token called ``name``: requests with it are refused from now on. Raises NotFound."""
    if not tracker.tokens.revoke(name):
        raise NotFound(f"no token named {name!r}")
