"""Tables. Alembic migrations in ``migrations/`` create exactly these.

Revisions are rows keyed ``(repo, sha)`` and ordered by ``seq``; they are
inserted ``pending`` when listed and become ``done`` in the same transaction
that stores their snapshot, diff and findings, which is what makes every
revision processed exactly once in effect, whatever crashes in between.
"""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import (
    JSON,
    Boolean,
    Column,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
    false,
)
from sqlalchemy.engine import Dialect
from sqlalchemy.types import TypeDecorator


class UTCDateTime(TypeDecorator[datetime]):
    """A timestamp that is UTC and timezone-aware both ways, on every backend.

    PostgreSQL keeps the zone (``timestamptz``); SQLite keeps text without one and hands naive
    datetimes back. Values are converted to UTC when written and marked UTC when read, so no
    caller ever sees a naive datetime. The column underneath is ``DateTime(timezone=True)``,
    what the migrations create.
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


metadata = MetaData(
    naming_convention={
        "ix": "ix_%(column_0_label)s",
        "uq": "uq_%(table_name)s_%(column_0_name)s",
        "ck": "ck_%(table_name)s_%(constraint_name)s",
        "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
        "pk": "pk_%(table_name)s",
    }
)

repos = Table(
    "repos",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("repo_id", String(200), nullable=False, unique=True),
    Column("branch", String(200), nullable=False, default="main"),
    Column("every_seconds", Float, nullable=True),  # None: the configured default
    Column("state", String(20), nullable=False, default="active"),  # active|gone|gated|disabled|renamed
    Column("hub_uid", String(64), nullable=True),  # the Hub's internal id: tells a re-created repo apart
    Column("renamed_to", String(200), nullable=True),
    Column("last_seen_sha", String(40), nullable=True),  # newest revision listed (pending or done)
    Column("defer_until", UTCDateTime(), nullable=True),  # rate limited: skip until then
    Column("last_polled_at", UTCDateTime(), nullable=True),
    Column("last_error", Text, nullable=True),
    Column("created_at", UTCDateTime(), nullable=False),
    # One worker polls a repo at a time (migration 0004): the holder and until when; an expired
    # lease is free, so a crashed worker's repos are taken over.
    Column("lease_owner", String(100), nullable=True),
    Column("lease_until", UTCDateTime(), nullable=True),
    Column("last_outcome", String(20), nullable=True),  # PollOutcome of the last poll (migration 0005)
    # The schedule replicas share (migration 0006, tracker/pipeline/cycle.py): due once next_poll_at has
    # passed (NULL: now); a Hub webhook bumps poll_requests, a poll records the count it served.
    Column("next_poll_at", UTCDateTime(), nullable=True),
    Column("poll_requests", Integer, nullable=False, default=0, server_default="0"),
    Column("poll_served", Integer, nullable=False, default=0, server_default="0"),
    # The base model the repo's card declares (migration 0007, tracker/core/inherit.py): a base's update
    # advisories are compared with its watched derivatives' content.
    Column("base_repo_id", String(200), nullable=True),
    # The chain of Hub-wide change listings this repo was last known current in (migration 0008,
    # tracker/pipeline/changes.py): while that chain is unbroken, a repo missing from the listing is unchanged.
    Column("listing_epoch", Integer, nullable=True),
    # The watch rule that added the repo (migration 0009, tracker/pipeline/watchrules.py), and since when the
    # rule no longer matches it: it is dropped after the rule's grace. No foreign key: adding one
    # makes SQLite rebuild the table, and the rebuild's drop would cascade to every revision;
    # removing a rule removes its repos itself.
    Column("rule_id", Integer, nullable=True),
    Column("rule_missing_since", UTCDateTime(), nullable=True),
    # Since when every poll failed with the Hub unreachable (migration 0012): NULL once the Hub answers.
    Column("unreachable_since", UTCDateTime(), nullable=True),
    # When a poll last succeeded (migration 0013): last_polled_at moves on failures too. /metrics serves its age.
    Column("last_success_at", UTCDateTime(), nullable=True),
    # When the repo was last checked on its own (migration 0014): a HEAD, or an owner listing that listed it.
    # The Hub-wide change listing vouches for content only between such checks (tracker/pipeline/cycle.py).
    Column("last_checked", UTCDateTime(), nullable=True),
)
Index("ix_repos_rule_id", repos.c.rule_id)
Index("ix_repos_next_poll_at", repos.c.next_poll_at)
Index("ix_repos_base_repo_id", repos.c.base_repo_id)

# Watch rules (migration 0009, tracker/pipeline/watchrules.py): the rule as written, its Hub listing filters,
# its cap, and what its last evaluation found.
watch_rules = Table(
    "watch_rules",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("text", String(300), nullable=False, unique=True),
    Column("filters", JSON, nullable=False),  # {"author", "library", "pipeline_tag", "downloads_min"}
    Column("max_repos", Integer, nullable=False),
    Column("grace_seconds", Float, nullable=False),
    Column("created_at", UTCDateTime(), nullable=False),
    Column("evaluated_at", UTCDateTime(), nullable=True),
    Column("matched", Integer, nullable=True),  # models the last evaluation matched (more than max: capped)
    Column("capped", Boolean, nullable=False, default=False),
    Column("last_error", Text, nullable=True),
)

# The Hub-wide change listing's watermarks (one row; migration 0008, tracker/pipeline/changes.py): the chain
# epoch, the newest ``lastModified`` of the last two complete walks (Hub clock) with when they ran
# (our clock), and the change rate seen, from which the next walk's cost is estimated.
hub_listing = Table(
    "hub_listing",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("epoch", Integer, nullable=False, default=0),
    Column("marks", JSON, nullable=False, default=list),  # [{"top": iso (Hub), "at": iso (ours)}], oldest first
    Column("rate", Float, nullable=False, default=0.0),  # listed changes per second, last seen
    Column("page_size", Integer, nullable=False, default=1000),  # the most models one page held
    Column("updated_at", UTCDateTime(), nullable=True),
)

revisions = Table(
    "revisions",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("repo_pk", Integer, ForeignKey("repos.id", ondelete="CASCADE"), nullable=False),
    Column("sha", String(40), nullable=False),
    Column("seq", Integer, nullable=False),
    Column("parent_sha", String(40), nullable=True),  # the revision read before this one
    Column("date", UTCDateTime(), nullable=True),
    Column("title", Text, nullable=False, default=""),
    Column("message", Text, nullable=False, default=""),
    Column("authors", JSON, nullable=False, default=list),
    Column("status", String(10), nullable=False, default="pending"),  # pending|done
    Column("baseline", Boolean, nullable=False, default=False),  # first revision read: not diffed
    Column("snapshot", JSON, nullable=True),  # [{path,size,blob_id,lfs_sha256,xet_hash}]
    Column("diff", JSON, nullable=True),  # raw structured diff against parent_sha
    Column("findings", JSON, nullable=True),
    Column("worst_severity", String(10), nullable=True),
    Column("summary", Text, nullable=True),
    Column("estimate", JSON, nullable=True),
    Column("analysed_at", UTCDateTime(), nullable=True),
    Column("dependencies_pending", Boolean, nullable=False, default=False, server_default=false()),  # OSV.dev lookup to retry
    # Transient Hub failures while reading this revision (migration 0004); past the limit it is
    # completed with what could be read, so a hostile file cannot keep it pending forever.
    Column("attempts", Integer, nullable=False, default=0, server_default="0"),
    Column("last_error", Text, nullable=True),
    Column("libraries", JSON, nullable=True),  # what it is loaded with (migration 0010)
    # One of a flood's intermediate revisions (migration 0011): read after the others, a few per poll.
    Column("backlog", Boolean, nullable=False, default=False, server_default=false()),
    UniqueConstraint("repo_pk", "sha", name="uq_revisions_repo_sha"),
    UniqueConstraint("repo_pk", "seq", name="uq_revisions_repo_seq"),
)
Index("ix_revisions_sha", revisions.c.sha)

# Content-addressed cache of small tracked files: each version is fetched once.
blobs = Table(
    "blobs",
    metadata,
    Column("content_id", String(64), primary_key=True),
    Column("size", Integer, nullable=False),
    Column("data", LargeBinary, nullable=False),
    Column("fetched_at", UTCDateTime(), nullable=False),
)

# What happened to a repo rather than inside a revision: rewrites, renames, deletion, gating.
events = Table(
    "events",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("repo_pk", Integer, ForeignKey("repos.id", ondelete="CASCADE"), nullable=False),
    Column("kind", String(40), nullable=False),
    Column("dedupe_key", String(200), nullable=False),  # the same event seen twice is stored once
    Column("revision_sha", String(40), nullable=True),
    Column("detail", JSON, nullable=False, default=dict),
    Column("created_at", UTCDateTime(), nullable=False),
    UniqueConstraint("repo_pk", "kind", "dedupe_key", name="uq_events_repo_kind_key"),
)

# -- advisories (migration 0002) ------------------------------------------------------------------

# The commit graph of each repo as far as the tracker knows it: every listed commit, plus
# older commits looked up when someone queries a revision the tracker had not seen.
commits = Table(
    "commits",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("repo_pk", Integer, ForeignKey("repos.id", ondelete="CASCADE"), nullable=False),
    Column("sha", String(40), nullable=False),
    Column("parent_sha", String(40), nullable=True),
    Column("created_at", UTCDateTime(), nullable=False),
    UniqueConstraint("repo_pk", "sha", name="uq_commits_repo_sha"),
)

advisories = Table(
    "advisories",
    metadata,
    Column("id", String(64), primary_key=True),
    Column("repo_pk", Integer, ForeignKey("repos.id", ondelete="CASCADE"), nullable=False),
    Column("revision_sha", String(40), nullable=True),  # None for advisories about the repo itself
    Column("kind", String(30), nullable=False),  # update|risk|<repo event kind>
    Column("severity", String(10), nullable=False),
    Column("record", JSON, nullable=False),  # the OSV record, as served
    Column("published", UTCDateTime(), nullable=False),
    Column("modified", UTCDateTime(), nullable=False),
    Column("withdrawn", Boolean, nullable=False, default=False),
    Column("fixed_sha", String(40), nullable=True),
)
Index("ix_advisories_repo_modified", advisories.c.repo_pk, advisories.c.modified)
# What processing a revision reads: its own advisories, and the open ones of a kind (migration 0011).
Index("ix_advisories_repo_revision", advisories.c.repo_pk, advisories.c.revision_sha)
Index("ix_advisories_repo_kind", advisories.c.repo_pk, advisories.c.kind, advisories.c.withdrawn)

# Commits a repo-event advisory names one by one (renamed, deleted, gated, history rewritten): the
# revisions read when it happened. Advisories with GIT ranges are indexed by their spans instead.
advisory_commits = Table(
    "advisory_commits",
    metadata,
    Column("advisory_id", String(64), ForeignKey("advisories.id", ondelete="CASCADE"), primary_key=True),
    Column("sha", String(40), primary_key=True),
    Column("repo_pk", Integer, ForeignKey("repos.id", ondelete="CASCADE"), nullable=False),
)
Index("ix_advisory_commits_sha", advisory_commits.c.sha)


# -- the reachability index (migration 0011, tracker/core/advisory/reach.py) ---------------------------

# One row per commit of the graph (a parent never listed included): its first-parent chain and
# position. ``id`` is the order commits were indexed in: "newest" when ``versions`` are bounded.
commit_labels = Table(
    "commit_labels",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("repo_pk", Integer, ForeignKey("repos.id", ondelete="CASCADE"), nullable=False),
    Column("sha", String(40), nullable=False),
    Column("chain", Integer, nullable=False),
    Column("pos", Integer, nullable=False),
    UniqueConstraint("repo_pk", "sha", name="uq_commit_labels_repo_sha"),
    UniqueConstraint("repo_pk", "chain", "pos", name="uq_commit_labels_repo_chain_pos"),
)
Index("ix_commit_labels_sha", commit_labels.c.sha)

# One row per chain: its tip, the root chain of its tree, and the reach of its first commit
# (plus merges), ``{"reach": {chain: pos}, "merges": [[pos, {chain: pos}]]}``.
commit_chains = Table(
    "commit_chains",
    metadata,
    Column("repo_pk", Integer, ForeignKey("repos.id", ondelete="CASCADE"), primary_key=True),
    Column("chain", Integer, primary_key=True),
    Column("root", Integer, nullable=False),
    Column("tip", Integer, nullable=False),
    Column("starts_at_root", Boolean, nullable=False),
    Column("reach", JSON, nullable=True),
)

# What an advisory with GIT ranges affects: positions ``lo..hi`` of one chain (``hi`` 2**31-1 while
# open). A query is one look-up: the commit's label, then the spans that hold it.
advisory_spans = Table(
    "advisory_spans",
    metadata,
    Column("advisory_id", String(64), ForeignKey("advisories.id", ondelete="CASCADE"), primary_key=True),
    Column("chain", Integer, primary_key=True),
    Column("repo_pk", Integer, ForeignKey("repos.id", ondelete="CASCADE"), nullable=False),
    Column("lo", Integer, nullable=False),
    Column("hi", Integer, nullable=False),
)
Index("ix_advisory_spans_repo_chain_hi", advisory_spans.c.repo_pk, advisory_spans.c.chain, advisory_spans.c.hi)


# -- delivery: subscriptions and the outbox (migration 0003) --------------------------------------

# Who is told: a Slack incoming webhook or a generic (Standard Webhooks) endpoint, for a repo,
# an owner or everything ("*"), filtered by severity and categories.
subscriptions = Table(
    "subscriptions",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("target", String(200), nullable=False),  # owner/name | owner | *
    Column("kind", String(10), nullable=False),  # slack|webhook
    Column("url", Text, nullable=False),  # a credential for Slack: never logged
    Column("secret", Text, nullable=True),  # whsec_... for webhooks: never logged, shown once
    Column("min_severity", String(10), nullable=False, default="info"),
    Column("categories", JSON, nullable=False, default=list),  # empty: every category
    Column("created_at", UTCDateTime(), nullable=False),
)
Index("ix_subscriptions_target", subscriptions.c.target)

# The outbox: one row per (subscription, announced advisory change), written in the transaction
# that stores the advisory. ``webhook_id`` is the idempotency key receivers de-duplicate by;
# rows of one subscription are sent in ``id`` order. ``leased_until`` keeps two workers (or a
# restarted one) from sending the same row at once; a crash mid-send resends it after the lease.
deliveries = Table(
    "deliveries",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("subscription_id", Integer, ForeignKey("subscriptions.id", ondelete="CASCADE"), nullable=False),
    Column("webhook_id", String(64), nullable=False, unique=True),
    Column("event_type", String(30), nullable=False),  # advisory.created|updated|withdrawn
    Column("advisory_id", String(64), nullable=False),
    Column("repo_id", String(200), nullable=False),
    Column("severity", String(10), nullable=False),
    Column("record", JSON, nullable=False),  # the OSV record as announced
    Column("state", String(10), nullable=False, default="pending"),  # pending|delivered|dead
    Column("attempts", Integer, nullable=False, default=0),
    Column("next_attempt_at", UTCDateTime(), nullable=False),
    Column("leased_until", UTCDateTime(), nullable=True),
    Column("last_status", Integer, nullable=True),  # HTTP status of the last attempt, if any
    Column("last_error", Text, nullable=True),
    Column("created_at", UTCDateTime(), nullable=False),
    Column("delivered_at", UTCDateTime(), nullable=True),
)
# The sender asks for the oldest pending row of each subscription: pending rows first, whatever piles up delivered.
Index("ix_deliveries_state_subscription", deliveries.c.state, deliveries.c.subscription_id, deliveries.c.id)


# -- API tokens (migration 0005) ------------------------------------------------------------------

# Bearer tokens for the API's writes (`tracker token create NAME`). A token is
# ``trk_<key_id>_<secret>``; only HMAC-SHA256(salt, secret) is stored (tracker/adapters/store/tokens.py).
api_tokens = Table(
    "api_tokens",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("name", String(100), nullable=False, unique=True),
    Column("key_id", String(32), nullable=False, unique=True),  # public: finds the row
    Column("salt", String(64), nullable=False),  # random per token, hex
    Column("digest", String(64), nullable=False),  # hex HMAC-SHA256(key=salt, msg=secret)
    Column("created_at", UTCDateTime(), nullable=False),
    Column("last_used_at", UTCDateTime(), nullable=True),
)
