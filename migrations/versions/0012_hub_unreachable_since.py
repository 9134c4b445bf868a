"""repos.unreachable_since: since when every poll of a repo failed with the Hub unreachable

Set by the first poll that cannot reach the Hub (connection refused, timeouts, 5xx), kept by the
polls that fail the same way, cleared by any poll the Hub answers. `tracker status` and
``/readyz`` read it to tell "serving" from "Hub unreachable for N minutes".

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-01
"""

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("repos", schema=None) as batch_op:
        batch_op.add_column(sa.Column("unreachable_since", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("repos", schema=None) as batch_op:
        batch_op.drop_column("unreachable_since")
