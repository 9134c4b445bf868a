"""leases and attempts: one worker per repo at a time; transient failures counted per revision

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-01
"""

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("repos", schema=None) as batch_op:
        batch_op.add_column(sa.Column("lease_owner", sa.String(length=100), nullable=True))
        batch_op.add_column(sa.Column("lease_until", sa.DateTime(timezone=True), nullable=True))
    with op.batch_alter_table("revisions", schema=None) as batch_op:
        batch_op.add_column(sa.Column("attempts", sa.Integer(), nullable=False, server_default="0"))
        batch_op.add_column(sa.Column("last_error", sa.Text(), nullable=True))
    op.drop_table("osv_lookups")  # never used: OSV.dev answers are cached in memory per process


def downgrade() -> None:
    op.create_table(
        "osv_lookups",
        sa.Column("key", sa.String(length=300), nullable=False),
        sa.Column("vulns", sa.JSON(), nullable=False),
        sa.Column("fetched_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("key", name=op.f("pk_osv_lookups")),
    )
    with op.batch_alter_table("revisions", schema=None) as batch_op:
        batch_op.drop_column("last_error")
        batch_op.drop_column("attempts")
    with op.batch_alter_table("repos", schema=None) as batch_op:
        batch_op.drop_column("lease_until")
        batch_op.drop_column("lease_owner")
