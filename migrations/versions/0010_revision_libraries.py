"""libraries a revision is loaded with

``revisions.libraries`` (a JSON list, e.g. ``["sentence-transformers", "transformers"]``) holds what
``tracker.core.findings.libraries.detect_libraries`` found in the revision's card and file layout; its
findings are grouped by library. Revisions read before this migration have none recorded (NULL)
until ``tracker reanalyse``.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-01
"""

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("revisions", schema=None) as batch_op:
        batch_op.add_column(sa.Column("libraries", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("revisions", schema=None) as batch_op:
        batch_op.drop_column("libraries")
