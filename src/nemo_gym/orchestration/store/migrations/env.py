"""Alembic's environment for the results store: always given an open connection by
``store.engine.upgrade`` (never a URL from an ini file, never offline SQL)."""

from __future__ import annotations

from alembic import context

connection = context.config.attributes["connection"]
context.configure(connection=connection, target_metadata=None, render_as_batch=True)
with context.begin_transaction():
    context.run_migrations()
