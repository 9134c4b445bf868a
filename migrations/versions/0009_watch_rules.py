"""watch rules: families of models watched by a Hub listing filter, and the repos each one added

``watch_rules`` holds each rule (``author=intfloat``, ``library=sentence-transformers
downloads>=10000``...) with its filters, its cap and what its last evaluation found.
``repos.rule_id`` marks a repo a rule added; ``repos.rule_missing_since`` is when the rule
stopped matching it (it is dropped after the rule's grace). See tracker/pipeline/watchrules.py. No foreign
key on ``rule_id``: adding one makes SQLite rebuild ``repos``, and dropping the old table would
cascade to its revisions.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-01
"""

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "watch_rules",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("text", sa.String(length=300), nullable=False),
        sa.Column("filters", sa.JSON(), nullable=False),
        sa.Column("max_repos", sa.Integer(), nullable=False),
        sa.Column("grace_seconds", sa.Float(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("evaluated_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("matched", sa.Integer(), nullable=True),
        sa.Column("capped", sa.Boolean(), nullable=False),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_watch_rules")),
        sa.UniqueConstraint("text", name=op.f("uq_watch_rules_text")),
    )
    with op.batch_alter_table("repos", schema=None) as batch_op:
        batch_op.add_column(sa.Column("rule_id", sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column("rule_missing_since", sa.DateTime(timezone=True), nullable=True))
        batch_op.create_index("ix_repos_rule_id", ["rule_id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("repos", schema=None) as batch_op:
        batch_op.drop_index("ix_repos_rule_id")
        batch_op.drop_column("rule_missing_since")
        batch_op.drop_column("rule_id")
    op.drop_table("watch_rules")
