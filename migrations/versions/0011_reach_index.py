"""advisories as GIT ranges over the commit graph: a reachability index instead of commit lists

Adds ``commit_labels`` (each commit's first-parent chain and position), ``commit_chains`` and
``advisory_spans`` (what an advisory affects: positions of a chain), and converts what is stored:
for every repo, its commits are labelled, the spans of its advisories computed from their range
events, and the ``versions`` lists dropped from the stored records (they are computed when a
record is read). ``advisory_commits`` keeps only the commits that repo-event advisories list by
name (renamed, deleted, gated, history rewritten). ``revisions.backlog`` marks a commit flood's
intermediate revisions, read after the others.

The conversion runs repo by repo, each repo in transactions of at most BATCH advisories, and
records the repos it finished in ``reach_backfill``: after a crash, running the upgrade again
skips those and redoes the one in hand from scratch (its partial rows are deleted first).

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-01
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None

BATCH = 500
PROGRESS = "reach_backfill"


def _create_tables(bind: sa.engine.Connection) -> None:
    have = set(sa.inspect(bind).get_table_names())
    if "commit_labels" not in have:
        op.create_table(
            "commit_labels",
            sa.Column("id", sa.Integer(), nullable=False),
            sa.Column("repo_pk", sa.Integer(), nullable=False),
            sa.Column("sha", sa.String(length=40), nullable=False),
            sa.Column("chain", sa.Integer(), nullable=False),
            sa.Column("pos", sa.Integer(), nullable=False),
            sa.ForeignKeyConstraint(["repo_pk"], ["repos.id"], name=op.f("fk_commit_labels_repo_pk_repos"),
                                    ondelete="CASCADE"),
            sa.PrimaryKeyConstraint("id", name=op.f("pk_commit_labels")),
            sa.UniqueConstraint("repo_pk", "sha", name="uq_commit_labels_repo_sha"),
            sa.UniqueConstraint("repo_pk", "chain", "pos", name="uq_commit_labels_repo_chain_pos"),
        )
        op.create_index("ix_commit_labels_sha", "commit_labels", ["sha"], unique=False)
    if "commit_chains" not in have:
        op.create_table(
            "commit_chains",
            sa.Column("repo_pk", sa.Integer(), nullable=False),
            sa.Column("chain", sa.Integer(), nullable=False),
            sa.Column("root", sa.Integer(), nullable=False),
            sa.Column("tip", sa.Integer(), nullable=False),
            sa.Column("starts_at_root", sa.Boolean(), nullable=False),
            sa.Column("reach", sa.JSON(), nullable=True),
            sa.ForeignKeyConstraint(["repo_pk"], ["repos.id"], name=op.f("fk_commit_chains_repo_pk_repos"),
                                    ondelete="CASCADE"),
            sa.PrimaryKeyConstraint("repo_pk", "chain", name=op.f("pk_commit_chains")),
        )
    if "advisory_spans" not in have:
        op.create_table(
            "advisory_spans",
            sa.Column("advisory_id", sa.String(length=64), nullable=False),
            sa.Column("chain", sa.Integer(), nullable=False),
            sa.Column("repo_pk", sa.Integer(), nullable=False),
            sa.Column("lo", sa.Integer(), nullable=False),
            sa.Column("hi", sa.Integer(), nullable=False),
            sa.ForeignKeyConstraint(["advisory_id"], ["advisories.id"],
                                    name=op.f("fk_advisory_spans_advisory_id_advisories"), ondelete="CASCADE"),
            sa.ForeignKeyConstraint(["repo_pk"], ["repos.id"], name=op.f("fk_advisory_spans_repo_pk_repos"),
                                    ondelete="CASCADE"),
            sa.PrimaryKeyConstraint("advisory_id", "chain", name=op.f("pk_advisory_spans")),
        )
        op.create_index("ix_advisory_spans_repo_chain_hi", "advisory_spans", ["repo_pk", "chain", "hi"],
                        unique=False)
    if "backlog" not in {c["name"] for c in sa.inspect(bind).get_columns("revisions")}:
        with op.batch_alter_table("revisions", schema=None) as batch_op:
            batch_op.add_column(sa.Column("backlog", sa.Boolean(), nullable=False, server_default=sa.false()))
    indexes = {i["name"] for i in sa.inspect(bind).get_indexes("advisories")}
    if "ix_advisories_repo_revision" not in indexes:
        op.create_index("ix_advisories_repo_revision", "advisories", ["repo_pk", "revision_sha"], unique=False)
    if "ix_advisories_repo_kind" not in indexes:
        op.create_index("ix_advisories_repo_kind", "advisories", ["repo_pk", "kind", "withdrawn"], unique=False)
    if PROGRESS not in have:
        op.create_table(PROGRESS, sa.Column("repo_pk", sa.Integer(), primary_key=True))


@contextmanager
def _transaction(conn: sa.engine.Connection) -> Iterator[None]:
    """One batch, atomic (the connection is in autocommit mode inside the conversion)."""
    conn.exec_driver_sql("BEGIN")
    try:
        yield
    except BaseException:
        conn.exec_driver_sql("ROLLBACK")
        raise
    conn.exec_driver_sql("COMMIT")


def convert(conn: sa.engine.Connection, *, fail_after: int | None = None) -> int:
    """Convert every repo not converted yet; returns how many were converted now.

    ``fail_after`` (tests): raise after converting that many repos, as a crash would.
    """
    from tracker.adapters.store.index import stored_record
    from tracker.core.advisory.reach import ReachIndex, events_of, ranged, spans_for

    meta = sa.MetaData()
    repos = sa.Table("repos", meta, autoload_with=conn)
    commits = sa.Table("commits", meta, autoload_with=conn)
    advisories = sa.Table("advisories", meta, autoload_with=conn)
    listed = sa.Table("advisory_commits", meta, autoload_with=conn)
    labels = sa.Table("commit_labels", meta, autoload_with=conn)
    chains = sa.Table("commit_chains", meta, autoload_with=conn)
    spans = sa.Table("advisory_spans", meta, autoload_with=conn)
    progress = sa.Table(PROGRESS, meta, autoload_with=conn)

    done = set(conn.execute(sa.select(progress.c.repo_pk)).scalars())
    converted = 0
    for repo_pk in conn.execute(sa.select(repos.c.id).order_by(repos.c.id)).scalars().all():
        if repo_pk in done:
            continue
        if fail_after is not None and converted >= fail_after:
            raise RuntimeError(f"conversion stopped after {converted} repos (test)")
        # The graph, in the order commits were stored (a parent before its children).
        edges = [(r.sha, [r.parent_sha] if r.parent_sha else [])
                 for r in conn.execute(sa.select(commits.c.sha, commits.c.parent_sha)
                                       .where(commits.c.repo_pk == repo_pk).order_by(commits.c.id))]
        index = ReachIndex()
        index.add(edges)
        with _transaction(conn):
            for table in (spans, labels, chains):
                conn.execute(table.delete().where(table.c.repo_pk == repo_pk))
            rows = [{"repo_pk": repo_pk, "sha": s, "chain": lab.chain, "pos": lab.pos}
                    for s, lab in index.labels.items()]
            rows.sort(key=lambda r: (r["chain"], r["pos"]))
            for i in range(0, len(rows), BATCH):
                conn.execute(labels.insert(), rows[i:i + BATCH])
            if index.chains:
                conn.execute(chains.insert(), [
                    {"repo_pk": repo_pk, "chain": c.id, "root": c.root, "tip": c.tip,
                     "starts_at_root": c.starts_at_root, "reach": c.to_json()} for c in index.chains.values()])
        after = ""
        while True:
            batch = conn.execute(sa.select(advisories.c.id, advisories.c.kind, advisories.c.withdrawn,
                                           advisories.c.record)
                                 .where(advisories.c.repo_pk == repo_pk, advisories.c.id > after)
                                 .order_by(advisories.c.id).limit(BATCH)).all()
            if not batch:
                break
            with _transaction(conn):
                span_rows, ranged_ids = [], []
                for adv in batch:
                    if ranged(adv.kind):
                        ranged_ids.append(adv.id)
                        if not adv.withdrawn:
                            span_rows += [{"advisory_id": adv.id, "chain": s.chain, "repo_pk": repo_pk,
                                           "lo": s.lo, "hi": s.hi} for s in spans_for(index, events_of(adv.record))]
                    elif adv.withdrawn:
                        conn.execute(listed.delete().where(listed.c.advisory_id == adv.id))
                    stored = stored_record(adv.record)
                    if stored != adv.record:
                        conn.execute(advisories.update().where(advisories.c.id == adv.id).values(record=stored))
                if ranged_ids:
                    conn.execute(listed.delete().where(listed.c.advisory_id.in_(ranged_ids)))
                if span_rows:
                    conn.execute(spans.insert(), span_rows)
            after = batch[-1].id
        with _transaction(conn):
            conn.execute(progress.insert().values(repo_pk=repo_pk))
        converted += 1
    return converted


def upgrade() -> None:
    bind = op.get_bind()
    _create_tables(bind)
    fail_after = os.environ.get("TRACKER_TEST_MIGRATION_FAIL_AFTER")
    # The DDL above commits with the migration's transaction; the conversion then runs in batches of
    # its own, each committed, so a crash loses at most the repo in hand.
    with op.get_context().autocommit_block():
        convert(op.get_bind(), fail_after=int(fail_after) if fail_after else None)
    op.drop_table(PROGRESS)


def downgrade() -> None:
    # Back to commit lists: every affected commit of every advisory, and the versions in the records.
    bind = op.get_bind()
    meta = sa.MetaData()
    labels = sa.Table("commit_labels", meta, autoload_with=bind)
    spans = sa.Table("advisory_spans", meta, autoload_with=bind)
    listed = sa.Table("advisory_commits", meta, autoload_with=bind)
    advisories = sa.Table("advisories", meta, autoload_with=bind)
    affected = sa.select(spans.c.advisory_id, labels.c.sha, spans.c.repo_pk).join(labels, sa.and_(
        labels.c.repo_pk == spans.c.repo_pk, labels.c.chain == spans.c.chain,
        labels.c.pos >= spans.c.lo, labels.c.pos <= spans.c.hi))
    bind.execute(listed.insert().from_select(["advisory_id", "sha", "repo_pk"], affected))
    by_id: dict[str, list[str]] = {}
    for r in bind.execute(sa.select(listed.c.advisory_id, listed.c.sha)):
        by_id.setdefault(r.advisory_id, []).append(r.sha)
    for r in bind.execute(sa.select(advisories.c.id, advisories.c.record)).all():
        record = dict(r.record)
        record["affected"] = [{**a, "versions": sorted(by_id.get(r.id, []))} if i == 0 else a
                              for i, a in enumerate(record.get("affected") or [])]
        bind.execute(advisories.update().where(advisories.c.id == r.id).values(record=record))
    with op.batch_alter_table("advisories", schema=None) as batch_op:
        batch_op.drop_index("ix_advisories_repo_kind")
        batch_op.drop_index("ix_advisories_repo_revision")
    op.drop_table("advisory_spans")
    op.drop_table("commit_chains")
    op.drop_table("commit_labels")
    with op.batch_alter_table("revisions", schema=None) as batch_op:
        batch_op.drop_column("backlog")
