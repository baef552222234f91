"""The store's tables, as SQLAlchemy Core sees them at the newest schema. The migrations under
``migrations/versions`` are what make a database so; this is what the queries are written against."""

from __future__ import annotations

from sqlalchemy import JSON, Boolean, Column, Float, Integer, MetaData, String, Table

metadata = MetaData()

# One row per run x benchmark x attempt: everything a history needs without the run's directory.
entries = Table(
    "entries",
    metadata,
    Column("run_id", String(64), primary_key=True),
    Column("benchmark", String(200), primary_key=True),
    Column("attempt", Integer, primary_key=True),
    Column("sweep_id", String(64), nullable=True, index=True),
    Column("model", String(4096), nullable=True),
    Column("step", Integer, nullable=True),
    Column("weights_fingerprint", String(256), nullable=True),
    Column("submitted_by", String(256), nullable=True),
    Column("submitted_host", String(256), nullable=True),
    Column("submitted_at", String(40), nullable=False),
    Column("state", String(32), nullable=False),
    Column("complete", Boolean, nullable=True),
    Column("samples", Integer, nullable=False),
    Column("expected_samples", Integer, nullable=True),
    Column("metric", String(200), nullable=False),
    Column("value", Float, nullable=True),
    Column("metrics", JSON, nullable=False),
    Column("gpu_hours", Float, nullable=True),
    Column("wall_seconds", Float, nullable=True),
    Column("inputs_digest", String(128), nullable=True),
    Column("results_fingerprint", String(128), nullable=True),
    # Task index (as a string: JSON object keys) -> the task's mean metric: paired comparisons later.
    Column("task_scores", JSON, nullable=False),
    Column("written_at", String(40), nullable=False),
    # The run's job.tags, each between commas (``,a,b,``: entry.tags_column); None without tags.
    Column("tags", String(1200), nullable=True),
)
