"""A run's tags (job.tags), for gym eval history --tag: one nullable text column; the entries a
version before wrote have none.

Revision ID: v2_tags
Revises: v1_entries
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "v2_tags"
down_revision = "v1_entries"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("entries", sa.Column("tags", sa.String(1200), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("entries") as batch:  # SQLite drops a column by copying the table
        batch.drop_column("tags")
