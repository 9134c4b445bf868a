"""poll schedule in the database: when each repo is next due, and webhook requests for a poll

Replicas share the watch list through the database (tracker/pipeline/cycle.py): a repo is due when
``next_poll_at`` has passed (NULL: never polled, due now); a Hub webhook bumps
``poll_requests``, and a poll that started before the bump leaves the repo due.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-09
"""

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("repos", schema=None) as batch_op:
        batch_op.add_column(sa.Column("next_poll_at", sa.DateTime(timezone=True), nullable=True))
        batch_op.add_column(sa.Column("poll_requests", sa.Integer(), nullable=False, server_default="0"))
        batch_op.add_column(sa.Column("poll_served", sa.Integer(), nullable=False, server_default="0"))
        batch_op.create_index("ix_repos_next_poll_at", ["next_poll_at"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("repos", schema=None) as batch_op:
        batch_op.drop_index("ix_repos_next_poll_at")
        batch_op.drop_column("poll_served")
        batch_op.drop_column("poll_requests")
        batch_op.drop_column("next_poll_at")
