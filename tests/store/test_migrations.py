"""The store's migrations and the tables the queries are written against are one schema: a store
upgraded by the shipped migrations differs in nothing from ``store/schema.py`` (Alembic's own
comparison), on SQLite and on the real PostgreSQL server; each revision names the one before it."""

from __future__ import annotations

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory

from nemo_gym.orchestration.store import open_store
from nemo_gym.orchestration.store.migrating import alembic_config
from nemo_gym.orchestration.store.schema import metadata


def test_the_upgraded_store_is_the_schema_the_queries_use(store_url: str) -> None:
    store = open_store(store_url)
    with store.engine.connect() as conn:
        differences = compare_metadata(MigrationContext.configure(conn), metadata)
    store.close()
    assert differences == []


def test_the_revisions_are_one_line_from_the_first() -> None:
    scripts = ScriptDirectory.from_config(alembic_config())
    revisions = list(scripts.walk_revisions())
    assert len(scripts.get_heads()) == 1
    assert revisions[-1].down_revision is None
    assert all(r.down_revision == older.revision for r, older in zip(revisions, revisions[1:]))
