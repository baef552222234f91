"""The store's schema brought to the newest version with Alembic, from the scripts shipped in
``migrations/`` (no ini file: the configuration is made here)."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy import Engine
from sqlalchemy.exc import DBAPIError

MIGRATIONS = Path(__file__).resolve().parent / "migrations"
HEAD = "head"
# Two processes opening a new store at once both find it empty; the one that loses the race to
# create the tables is refused and tries again, then finds them made.
UPGRADE_TRIES = 3


def alembic_config() -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    return config


def upgrade(engine: Engine, revision: str = HEAD) -> None:
    """The schema at ``revision`` (the newest by default). A database that cannot be reached fails
    at once (``engine.connect``); an upgrade that lost a race with another process's is tried again."""
    for tries_left in range(UPGRADE_TRIES - 1, -1, -1):
        with engine.connect() as conn:
            try:
                with conn.begin():
                    config = alembic_config()
                    config.attributes["connection"] = conn
                    command.upgrade(config, revision)
                return
            except DBAPIError:
                if not tries_left:
                    raise
