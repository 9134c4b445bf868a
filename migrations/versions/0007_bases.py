"""model tree: the base model a watched repo's card declares

``repos.base_repo_id`` holds the ``base_model`` of the repo's model card (the first one when the
card lists several), set by ``tracker watch add --with-base`` and refreshed whenever a polled
revision changes the README. A base's update advisories are compared with its watched
derivatives' content (tracker/core/inherit.py); the index finds a base's derivatives.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-10
"""

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("repos", schema=None) as batch_op:
        batch_op.add_column(sa.Column("base_repo_id", sa.String(length=200), nullable=True))
        batch_op.create_index("ix_repos_base_repo_id", ["base_repo_id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("repos", schema=None) as batch_op:
        batch_op.drop_index("ix_repos_base_repo_id")
        batch_op.drop_column("base_repo_id")
