"""The store's schema brought to the newest version with Alembic, from the scripts shipped in
``migrations/`` (no ini file: the configuration is made here).

Two processes opening a new store at once must not both create its tables: one migrates while
the other waits, then finds the schema current. PostgreSQL holds a transaction-scoped advisory
lock; SQLite (whose Python driver runs DDL outside the transaction) an exclusive lock on a file
beside the database.
"""

from __future__ import annotations

import fcntl
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy import Connection, Engine, text

MIGRATIONS = Path(__file__).resolve().parent / "migrations"
HEAD = "head"
# The advisory-lock key every gym process agrees on (any constant 64-bit number; "gymstore").
ADVISORY_KEY = 0x67796D73746F7265


def alembic_config() -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    return config


def upgrade(engine: Engine, revision: str = HEAD) -> None:
    """The schema at ``revision`` (the newest by default), one process migrating at a time. A
    database that cannot be reached fails at once (``engine.connect``)."""
    with _sqlite_file_lock(engine), engine.connect() as conn, conn.begin():
        _hold_advisory_lock(conn)
        config = alembic_config()
        config.attributes["connection"] = conn
        command.upgrade(config, revision)


def _hold_advisory_lock(conn: Connection) -> None:
    if conn.dialect.name == "postgresql":  # released when the transaction ends
        conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": ADVISORY_KEY})


@contextmanager
def _sqlite_file_lock(engine: Engine) -> Iterator[None]:
    database = engine.url.database if engine.dialect.name == "sqlite" else None
    if not database or database == ":memory:":
        yield
        return
    with open(f"{database}.migrating", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file is closed
        yield
