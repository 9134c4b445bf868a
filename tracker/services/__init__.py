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

from rapidfuzz import fuzz, process

from tracker.adapters.delivery import TargetGuard, parse_categories, parse_target
from tracker.adapters.delivery.channels import channel
from tracker.adapters.store.tokens import validate_name
from tracker.core.errors import (
    ConfigError,
    HubError,
    NotFound,
    RepoDisabled,
    RepoGated,
    RepoGone,
    first_line,
)
from tracker.core.model import ChannelKind, RepoId, RepoRow
from tracker.core.store_types import TokenRow
from tracker.core.watchrules import DEFAULT_MAX, RuleRow, parse_rule
from tracker.pipeline.ports import HubReader

if TYPE_CHECKING:
    from tracker.app import Tracker
    from tracker.core.store_types import SubscriptionRow

__all__ = [
    "Existence", "NewSubscription", "Reanalysed", "Subscribed", "Watched", "add_rule", "close_matches", "existence",
    "missing_message", "redacted_url", "require_on_hub", "create_token", "list_tokens", "reanalyse",
    "remove_rule", "revoke_token", "subscribe", "unsubscribe", "unwatch", "watch",
]


# -- the watch list ---------------------------------------------------------------------------


CHECK_SECONDS = 15.0  # a check never holds a command longer than this, whatever the Hub does
CLOSE_MATCHES = 3
CLOSE_SCORE = 75  # rapidfuzz ratio (0-100) from which an id counts as a likely intended one


@dataclass(frozen=True)
class Existence:
    found: bool
    missing: bool  # the Hub answered: no such repo (or private without a token)
    reason: str = ""  # why the Hub could not be asked, when neither found nor missing
    close: tuple[RepoId, ...] = ()


def close_matches(hub: HubReader, repo_id: RepoId) -> tuple[RepoId, ...]:
    """Ids like ``repo_id`` the Hub has: its owner's models and a search for its name, best first.

    Suggestions are a courtesy: a failed search gives none, never an error.
    """
    owner, name = repo_id.split("/", 1)
    candidates: dict[str, RepoId] = {}
    for search, author in ((name[: max(3, len(name) * 2 // 3)], None), ("", owner)):
        try:
            for found in hub.search_models(search, author=author, limit=100):
                candidates.setdefault(found.lower(), found)
        except HubError:
            continue
    candidates.pop(repo_id.lower(), None)
    ranked = process.extract(repo_id.lower(), list(candidates), scorer=fuzz.ratio, limit=CLOSE_MATCHES,
                             score_cutoff=CLOSE_SCORE)
    return tuple(candidates[key] for key, _score, _index in ranked)


def existence(hub: HubReader, repo_id: RepoId) -> Existence:
    """Whether the Hub has ``repo_id`` (gated and disabled repos exist), within CHECK_SECONDS."""
    with hub.deadline(CHECK_SECONDS):
        try:
            hub.repo_info(repo_id)
        except (RepoGated, RepoDisabled):
            return Existence(found=True, missing=False)
        except RepoGone:
            return Existence(found=False, missing=True, close=close_matches(hub, repo_id))
        except HubError as exc:
            return Existence(found=False, missing=False, reason=first_line(exc))
    return Existence(found=True, missing=False)


def missing_message(repo_id: RepoId, endpoint: str, close: tuple[RepoId, ...]) -> str:
    """Why a repo id is refused: the Hub does not have it, and the ids it has that look like it."""
    hint = f"; did you mean {', '.join(close)}?" if close else " (misspelt, deleted, or private: set HF_TOKEN)"
    return f"{repo_id} is not on the Hub at {endpoint}{hint}"



def require_on_hub(tracker: Tracker, repo_id: RepoId) -> str | None:
    """NotFound (with the close matches) when the Hub says it has no ``repo_id``.

    Returns why the Hub could not be asked (the caller warns and goes on: a watch may precede
    the repo, or the Hub may be away), None when it has the repo.
    """
    there = existence(tracker.hub, repo_id)
    if there.missing:
        raise NotFound(missing_message(repo_id, tracker.hub.endpoint, there.close))
    return None if there.found else there.reason



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

    @classmethod
    def to_one_of(cls, target: str, *, slack: str | None, webhook: str | None, min_severity: str = "info",
                  categories: Sequence[str] = ()) -> NewSubscription:
        """The subscription to whichever of ``slack`` and ``webhook`` is given; ConfigError unless exactly one."""
        if (slack is None) == (webhook is None):
            raise ConfigError(ONE_CHANNEL)
        kind, url = (ChannelKind.SLACK.value, slack) if slack is not None else (ChannelKind.WEBHOOK.value, webhook)
        assert url is not None
        return cls(target=target, kind=kind, url=url, min_severity=min_severity, categories=categories)


ONE_CHANNEL = "give exactly one of slack or webhook: the URL alerts go to (--slack URL or --webhook URL)"


def redacted_url(kind: str, url: str) -> str:
    """A subscription's URL as shown: a Slack webhook URL is a credential (only its host is shown), and a
    webhook's query string may hold a token (dropped)."""
    return channel(kind).shown_url(url)


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
    TargetGuard(tracker.settings.delivery.allow_hosts).check(wanted.url, unresolved_ok=wanted.kind == ChannelKind.SLACK)
    secret = channel(wanted.kind).new_secret()
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
