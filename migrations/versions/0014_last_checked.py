"""repos.last_checked: when a repo was last checked on its own

A check of its own is a HEAD of the repo, or an owner listing that listed it: what finds a
deletion, a gating, a rename or a switch to private. The Hub-wide change listing vouches for a
repo's content between such checks, never for the repo itself (tracker/pipeline/cycle.py), so each
repo gets one at least once per its interval. Existing repos start from their last poll that did
not fail: the first cycle after the upgrade checks each on its own once its interval has passed.

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-05
"""

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("repos", schema=None) as batch_op:
        batch_op.add_column(sa.Column("last_checked", sa.DateTime(timezone=True), nullable=True))
    repos = sa.table("repos", sa.column("last_checked", sa.DateTime(timezone=True)),
                     sa.column("last_success_at", sa.DateTime(timezone=True)))
    op.execute(repos.update().values(last_checked=repos.c.last_success_at))


def downgrade() -> None:
    with op.batch_alter_table("repos", schema=None) as batch_op:
        batch_op.drop_column("last_checked")
