"""the Hub-wide change listing: its watermarks, and the listing chain each repo was last current in

``hub_listing`` holds one row: the chain epoch, the newest ``lastModified`` of the last two
complete walks of ``GET /api/models?sort=lastModified`` and when they ran, and the change rate
seen. ``repos.listing_epoch`` is the chain a repo was last known current in: while that chain is
unbroken, a watched repo missing from the listing since the watermark is unchanged
(tracker/pipeline/changes.py).

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-01
"""

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "hub_listing",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("epoch", sa.Integer(), nullable=False),
        sa.Column("marks", sa.JSON(), nullable=False),
        sa.Column("rate", sa.Float(), nullable=False),
        sa.Column("page_size", sa.Integer(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_hub_listing")),
    )
    with op.batch_alter_table("repos", schema=None) as batch_op:
        batch_op.add_column(sa.Column("listing_epoch", sa.Integer(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("repos", schema=None) as batch_op:
        batch_op.drop_column("listing_epoch")
    op.drop_table("hub_listing")
