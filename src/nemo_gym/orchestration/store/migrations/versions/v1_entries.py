"""The first schema: one row per run x benchmark x attempt.

Revision ID: v1_entries
Revises:
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "v1_entries"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "entries",
        sa.Column("run_id", sa.String(64), primary_key=True),
        sa.Column("benchmark", sa.String(200), primary_key=True),
        sa.Column("attempt", sa.Integer, primary_key=True),
        sa.Column("sweep_id", sa.String(64), nullable=True),
        sa.Column("model", sa.String(4096), nullable=True),
        sa.Column("step", sa.Integer, nullable=True),
        sa.Column("weights_fingerprint", sa.String(256), nullable=True),
        sa.Column("submitted_by", sa.String(256), nullable=True),
        sa.Column("submitted_host", sa.String(256), nullable=True),
        sa.Column("submitted_at", sa.String(40), nullable=False),
        sa.Column("state", sa.String(32), nullable=False),
        sa.Column("complete", sa.Boolean, nullable=True),
        sa.Column("samples", sa.Integer, nullable=False),
        sa.Column("expected_samples", sa.Integer, nullable=True),
        sa.Column("metric", sa.String(200), nullable=False),
        sa.Column("value", sa.Float, nullable=True),
        sa.Column("metrics", sa.JSON, nullable=False),
        sa.Column("gpu_hours", sa.Float, nullable=True),
        sa.Column("wall_seconds", sa.Float, nullable=True),
        sa.Column("inputs_digest", sa.String(128), nullable=True),
        sa.Column("results_fingerprint", sa.String(128), nullable=True),
        sa.Column("task_scores", sa.JSON, nullable=False),
        sa.Column("written_at", sa.String(40), nullable=False),
    )
    op.create_index("ix_entries_sweep_id", "entries", ["sweep_id"])


def downgrade() -> None:
    op.drop_table("entries")
