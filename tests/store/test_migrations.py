"""The store's migrations and the tables the queries are written against are one schema: a store
upgraded by the shipped migrations differs in nothing from ``store/schema.py`` (Alembic's own
comparison), on SQLite and on the real PostgreSQL server; each revision names the one before it; a
store a newer version wrote is refused in one line; a store this version wrote is upgraded by a next
version's migration with every entry read back unchanged."""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.config import Config
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


# A next version's migration, as the next release would ship it: written beside a copy of this
# version's migrations, its down_revision this version's head.
NEXT_REVISION = "v_next_test"
NEXT = '''"""A next version's schema (test-only): a column and an index added."""

import sqlalchemy as sa
from alembic import op

revision = "{revision}"
down_revision = "{head}"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("entries") as batch:
        batch.add_column(sa.Column("note", sa.String(200), nullable=True))
    op.create_index("entries_by_model_and_step", "entries", ["model", "step"])
'''


def written_entries() -> list:
    """Two entries with every kind of value a store holds: texts (non-ASCII too), None, numbers,
    a partial one, the metrics and the per-task scores."""
    from nemo_gym.orchestration.store import Entry

    full = Entry(
        run_id="gym-job-20261201T000001Z-000001",
        benchmark="answer-judge",
        attempt=2,
        submitted_at="2026-12-01T00:00:01.001Z",
        state="succeeded",
        samples=12,
        metric="reward",
        sweep_id="gym-sweep-20261201T000000Z-5eeb01",
        model="/ckpt/modèle/step-100",
        step=100,
        weights_fingerprint="sha256:abc",
        submitted_by="ana",
        submitted_host="node-1",
        complete=True,
        expected_samples=12,
        value=0.25,
        metrics={"mean/reward": 0.25, "pass@1": 0.5},
        gpu_hours=1.5,
        wall_seconds=30.25,
        inputs_digest="sha256:inputs",
        results_fingerprint="sha256:results",
        task_scores={0: 1.0, 1: 0.0, 2: 0.5},
        written_at="2026-12-01T00:01:00Z",
        tags=("exp-a", "lr:3e-4"),
    )
    partial = replace(
        Entry(full.run_id[:-1] + "2", "math-judge", 1, "2026-12-01T00:00:02.002Z", "failed", 9, "reward"),
        complete=False,
        expected_samples=12,
        written_at="2026-12-01T00:02:00Z",
    )
    return [full, partial]


def next_version(tmp_path) -> Config:
    from nemo_gym.orchestration.store.migrating import MIGRATIONS

    scripts = tmp_path / "next-migrations"
    shutil.copytree(MIGRATIONS, scripts, ignore=shutil.ignore_patterns("__pycache__"))
    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    (scripts / "versions" / f"{NEXT_REVISION}.py").write_text(NEXT.format(revision=NEXT_REVISION, head=head))
    config = Config()
    config.set_main_option("script_location", str(scripts))
    return config


def test_a_store_written_by_this_version_is_upgraded_by_the_next(store_url: str, tmp_path) -> None:
    """A store made and written at this version's head, then upgraded by a next version's migration
    (a column and an index added): every entry reads back as it was written, raw row and Entry alike."""
    from alembic import command
    from sqlalchemy import select

    from nemo_gym.orchestration.store.schema import entries

    store = open_store(store_url)
    assert store.write(written_entries()) == 2
    before = store.entries()
    with store.engine.connect() as conn:
        rows_before = [dict(r._mapping) for r in conn.execute(select(entries).order_by(entries.c.run_id))]
    config = next_version(tmp_path)
    with store.engine.connect() as conn, conn.begin():
        config.attributes["connection"] = conn
        command.upgrade(config, "head")
    with store.engine.connect() as conn:
        assert conn.execute(text("SELECT version_num FROM alembic_version")).scalar() == NEXT_REVISION
        raw = [dict(r._mapping) for r in conn.execute(text("SELECT * FROM entries ORDER BY run_id"))]
        rows_after = [dict(r._mapping) for r in conn.execute(select(entries).order_by(entries.c.run_id))]
    assert [row.pop("note") for row in raw] == [None, None]  # the next version's column, empty
    assert rows_after == rows_before and store.entries() == before == written_entries()
    store.close()


def test_a_store_the_version_before_wrote_is_upgraded_when_opened_and_its_entries_read_untagged(
    store_url: str,
) -> None:
    """A store at the first schema (v1_entries, before job.tags), holding an entry: this version's
    open_store upgrades it (v2_tags), and the entry reads back as written, with no tags."""
    from sqlalchemy import create_engine, insert
    from sqlalchemy.engine import make_url

    from nemo_gym.orchestration.store.migrating import upgrade
    from nemo_gym.orchestration.store.schema import entries

    url = make_url(store_url)
    if url.get_backend_name() == "sqlite":
        Path(url.database).parent.mkdir(parents=True, exist_ok=True)
    engine = create_engine(url)
    upgrade(engine, "v1_entries")
    [full, _] = written_entries()
    row = {key: value for key, value in full.row().items() if key != "tags"}  # the columns v1 had
    with engine.begin() as conn:
        conn.execute(insert(entries).values(**row))  # only the columns given
        assert conn.execute(text("SELECT version_num FROM alembic_version")).scalar() == "v1_entries"
    engine.dispose()
    store = open_store(store_url)
    with store.engine.connect() as conn:
        assert conn.execute(text("SELECT version_num FROM alembic_version")).scalar() == "v2_tags"
    assert store.entries() == [replace(full, tags=())]
    store.close()
