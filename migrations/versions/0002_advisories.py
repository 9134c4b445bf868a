"""advisories, commit graph and index, OSV lookups

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-29
"""

import sqlalchemy as sa
from alembic import op

revision = '0002'
down_revision = '0001'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('osv_lookups',
    sa.Column('key', sa.String(length=300), nullable=False),
    sa.Column('vulns', sa.JSON(), nullable=False),
    sa.Column('fetched_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('key', name=op.f('pk_osv_lookups'))
    )
    op.create_table('advisories',
    sa.Column('id', sa.String(length=64), nullable=False),
    sa.Column('repo_pk', sa.Integer(), nullable=False),
    sa.Column('revision_sha', sa.String(length=40), nullable=True),
    sa.Column('kind', sa.String(length=30), nullable=False),
    sa.Column('severity', sa.String(length=10), nullable=False),
    sa.Column('record', sa.JSON(), nullable=False),
    sa.Column('published', sa.DateTime(timezone=True), nullable=False),
    sa.Column('modified', sa.DateTime(timezone=True), nullable=False),
    sa.Column('withdrawn', sa.Boolean(), nullable=False),
    sa.Column('fixed_sha', sa.String(length=40), nullable=True),
    sa.ForeignKeyConstraint(['repo_pk'], ['repos.id'], name=op.f('fk_advisories_repo_pk_repos'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_advisories'))
    )
    with op.batch_alter_table('advisories', schema=None) as batch_op:
        batch_op.create_index('ix_advisories_repo_modified', ['repo_pk', 'modified'], unique=False)

    op.create_table('commits',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('repo_pk', sa.Integer(), nullable=False),
    sa.Column('sha', sa.String(length=40), nullable=False),
    sa.Column('parent_sha', sa.String(length=40), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['repo_pk'], ['repos.id'], name=op.f('fk_commits_repo_pk_repos'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_commits')),
    sa.UniqueConstraint('repo_pk', 'sha', name='uq_commits_repo_sha')
    )
    op.create_table('advisory_commits',
    sa.Column('advisory_id', sa.String(length=64), nullable=False),
    sa.Column('sha', sa.String(length=40), nullable=False),
    sa.Column('repo_pk', sa.Integer(), nullable=False),
    sa.ForeignKeyConstraint(['advisory_id'], ['advisories.id'], name=op.f('fk_advisory_commits_advisory_id_advisories'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['repo_pk'], ['repos.id'], name=op.f('fk_advisory_commits_repo_pk_repos'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('advisory_id', 'sha', name=op.f('pk_advisory_commits'))
    )
    with op.batch_alter_table('advisory_commits', schema=None) as batch_op:
        batch_op.create_index('ix_advisory_commits_sha', ['sha'], unique=False)

    with op.batch_alter_table('revisions', schema=None) as batch_op:
        batch_op.add_column(sa.Column('dependencies_pending', sa.Boolean(), nullable=False, server_default=sa.false()))



def downgrade() -> None:
    with op.batch_alter_table('revisions', schema=None) as batch_op:
        batch_op.drop_column('dependencies_pending')

    with op.batch_alter_table('advisory_commits', schema=None) as batch_op:
        batch_op.drop_index('ix_advisory_commits_sha')

    op.drop_table('advisory_commits')
    op.drop_table('commits')
    with op.batch_alter_table('advisories', schema=None) as batch_op:
        batch_op.drop_index('ix_advisories_repo_modified')

    op.drop_table('advisories')
    op.drop_table('osv_lookups')
