"""The store's migrations and the tables the queries are written against are one schema: a store
upgraded by the shipped migrations differs in nothing from ``store/schema.py`` (Alembic's own
comparison), on SQLite and on the real PostgreSQL server; each revision names the one before it; a
store a newer version wrote is refused in one line."""

from __future__ import annotations

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import text

from nemo_gym.orchestration.errors import UserError
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


def test_a_store_written_by_a_newer_version_is_refused_in_one_line(store_url: str) -> None:
    store = open_store(store_url)
    with store.engine.begin() as conn:
        conn.execute(text("UPDATE alembic_version SET version_num = 'v99_from_the_future'"))
    store.close()
    with pytest.raises(UserError) as caught:
        open_store(store_url)
    [line] = caught.value.problems
    assert "has a schema this version does not know" in line and "v99_from_the_future" in line
    assert line.endswith("upgrade gym-orchestration to read it, or name another store with --results-url")


def test_eight_processes_opening_a_new_store_at_once_all_find_it_made(store_url: str) -> None:
    """Eight shells open a store nobody has made yet, released at the same instant: one creates
    the tables while the others wait for it, so none is refused ("table entries already exists")."""
    import subprocess
    import sys
    import time

    opener = (
        "import sys, time\n"
        "from nemo_gym.orchestration.store import open_store\n"
        "time.sleep(max(0.0, float(sys.argv[2]) - time.time()))\n"
        "open_store(sys.argv[1]).close()\n"
    )
    start = str(time.time() + 3)  # every interpreter has imported the store by then
    shells = [
        subprocess.Popen([sys.executable, "-c", opener, store_url, start], stderr=subprocess.PIPE, text=True)
        for _ in range(8)
    ]
    errors = [shell.communicate(timeout=120)[1] for shell in shells]
    assert [shell.returncode for shell in shells] == [0] * 8, errors
    store = open_store(store_url)
    with store.engine.connect() as conn:
        versions = conn.execute(text("SELECT count(*) FROM alembic_version")).scalar()
    store.close()
    assert versions == 1
