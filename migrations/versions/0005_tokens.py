"""api tokens and each repo's last poll outcome: bearer tokens for writes; `tracker status` shows the outcome

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-08
"""

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "api_tokens",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=100), nullable=False),
        sa.Column("key_id", sa.String(length=32), nullable=False),
        sa.Column("salt", sa.String(length=64), nullable=False),
        sa.Column("digest", sa.String(length=64), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_used_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_api_tokens")),
        sa.UniqueConstraint("name", name=op.f("uq_api_tokens_name")),
        sa.UniqueConstraint("key_id", name=op.f("uq_api_tokens_key_id")),
    )
    with op.batch_alter_table("repos", schema=None) as batch_op:
        batch_op.add_column(sa.Column("last_outcome", sa.String(length=20), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("repos", schema=None) as batch_op:
        batch_op.drop_column("last_outcome")
    op.drop_table("api_tokens")
