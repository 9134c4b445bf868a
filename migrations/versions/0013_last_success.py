"""repos.last_success_at: when a poll of a repo last succeeded

``last_polled_at`` moves on every poll, failed ones too; this one only when the Hub answered and the
poll was completed (new revisions read, or the repo found unchanged, by its own check or a listing).
``/metrics`` serves the time since it per repo. Existing repos start from their last poll when it
did not fail.

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-02
"""

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("repos", schema=None) as batch_op:
        batch_op.add_column(sa.Column("last_success_at", sa.DateTime(timezone=True), nullable=True))
    repos = sa.table("repos", sa.column("last_success_at", sa.DateTime(timezone=True)),
                     sa.column("last_polled_at", sa.DateTime(timezone=True)), sa.column("last_error", sa.Text))
    op.execute(repos.update().where(repos.c.last_error.is_(None)).values(last_success_at=repos.c.last_polled_at))


def downgrade() -> None:
    with op.batch_alter_table("repos", schema=None) as batch_op:
        batch_op.drop_column("last_success_at")
