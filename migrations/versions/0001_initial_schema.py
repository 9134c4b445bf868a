"""initial schema: repos, revisions, blobs, events

Revision ID: 0001
Revises:
Create Date: 2026-11-29
"""

import sqlalchemy as sa
from alembic import op

revision = '0001'
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('blobs',
    sa.Column('content_id', sa.String(length=64), nullable=False),
    sa.Column('size', sa.Integer(), nullable=False),
    sa.Column('data', sa.LargeBinary(), nullable=False),
    sa.Column('fetched_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('content_id', name=op.f('pk_blobs'))
    )
    op.create_table('repos',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('repo_id', sa.String(length=200), nullable=False),
    sa.Column('branch', sa.String(length=200), nullable=False),
    sa.Column('every_seconds', sa.Float(), nullable=True),
    sa.Column('state', sa.String(length=20), nullable=False),
    sa.Column('hub_uid', sa.String(length=64), nullable=True),
    sa.Column('renamed_to', sa.String(length=200), nullable=True),
    sa.Column('last_seen_sha', sa.String(length=40), nullable=True),
    sa.Column('defer_until', sa.DateTime(timezone=True), nullable=True),
    sa.Column('last_polled_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('last_error', sa.Text(), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_repos')),
    sa.UniqueConstraint('repo_id', name=op.f('uq_repos_repo_id'))
    )
    op.create_table('events',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('repo_pk', sa.Integer(), nullable=False),
    sa.Column('kind', sa.String(length=40), nullable=False),
    sa.Column('dedupe_key', sa.String(length=200), nullable=False),
    sa.Column('revision_sha', sa.String(length=40), nullable=True),
    sa.Column('detail', sa.JSON(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['repo_pk'], ['repos.id'], name=op.f('fk_events_repo_pk_repos'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_events')),
    sa.UniqueConstraint('repo_pk', 'kind', 'dedupe_key', name='uq_events_repo_kind_key')
    )
    op.create_table('revisions',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('repo_pk', sa.Integer(), nullable=False),
    sa.Column('sha', sa.String(length=40), nullable=False),
    sa.Column('seq', sa.Integer(), nullable=False),
    sa.Column('parent_sha', sa.String(length=40), nullable=True),
    sa.Column('date', sa.DateTime(timezone=True), nullable=True),
    sa.Column('title', sa.Text(), nullable=False),
    sa.Column('message', sa.Text(), nullable=False),
    sa.Column('authors', sa.JSON(), nullable=False),
    sa.Column('status', sa.String(length=10), nullable=False),
    sa.Column('baseline', sa.Boolean(), nullable=False),
    sa.Column('snapshot', sa.JSON(), nullable=True),
    sa.Column('diff', sa.JSON(), nullable=True),
    sa.Column('findings', sa.JSON(), nullable=True),
    sa.Column('worst_severity', sa.String(length=10), nullable=True),
    sa.Column('summary', sa.Text(), nullable=True),
    sa.Column('estimate', sa.JSON(), nullable=True),
    sa.Column('analysed_at', sa.DateTime(timezone=True), nullable=True),
    sa.ForeignKeyConstraint(['repo_pk'], ['repos.id'], name=op.f('fk_revisions_repo_pk_repos'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_revisions')),
    sa.UniqueConstraint('repo_pk', 'seq', name='uq_revisions_repo_seq'),
    sa.UniqueConstraint('repo_pk', 'sha', name='uq_revisions_repo_sha')
    )
    with op.batch_alter_table('revisions', schema=None) as batch_op:
        batch_op.create_index('ix_revisions_sha', ['sha'], unique=False)



def downgrade() -> None:
    with op.batch_alter_table('revisions', schema=None) as batch_op:
        batch_op.drop_index('ix_revisions_sha')

    op.drop_table('revisions')
    op.drop_table('events')
    op.drop_table('repos')
    op.drop_table('blobs')
