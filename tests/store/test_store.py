"""The results store itself, on SQLite and on the real PostgreSQL server: an entry written is read
back whole; a later write of the same run, benchmark and attempt replaces it; a resubmit's attempt
is its own entry and the history reads the latest; the schema is at Alembic's head once opened;
two processes writing at once lose nothing; a store that cannot be reached is one line."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
from sqlalchemy import create_engine, inspect, text

from nemo_gym.orchestration.errors import UserError
from nemo_gym.orchestration.store import Entry, Selection, default_url, open_store
from nemo_gym.orchestration.store.migrating import alembic_config


def entry(run: int, benchmark: str = "b", attempt: int = 1, value: float = 0.5, **more: object) -> Entry:
    return Entry(
        run_id=f"gym-job-20261201T000000Z-{run:06x}",
        benchmark=benchmark,
        attempt=attempt,
        submitted_at=f"2026-12-01T00:00:{run:02d}.000Z",
        state="succeeded",
        samples=12,
        metric="reward",
        value=value,
        **more,  # type: ignore[arg-type]
    )


def test_an_entry_is_read_back_whole(store_url: str) -> None:
    written = entry(
        1,
        model="/ckpt/run-a/step-100",
        step=100,
        sweep_id="gym-sweep-20261201T000000Z-abcdef",
        weights_fingerprint="sha256:1234",
        submitted_by="ada",
        submitted_host="login1",
        complete=True,
        expected_samples=12,
        metrics={"mean/reward": 0.5, "pass_1/accuracy": 0.25},
        gpu_hours=0.04,
        wall_seconds=64.0,
        inputs_digest="d" * 64,
        results_fingerprint="f" * 64,
        task_scores={0: 1.0, 1: 0.0, 11: 0.5},
        written_at="2026-12-05T00:00:00.000Z",
    )
    store = open_store(store_url)
    assert store.write([written]) == 1
    assert store.entries() == [written]
    store.close()


def test_a_later_write_of_the_same_key_replaces_it(store_url: str) -> None:
    store = open_store(store_url)
    store.write([entry(1, value=0.25, task_scores={0: 0.0})])
    store.write([entry(1, value=0.75, task_scores={0: 1.0})])
    [read] = store.entries()
    assert (read.value, read.task_scores) == (0.75, {0: 1.0})
    with store.engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM entries")).scalar() == 1
    store.close()


def test_a_resubmitted_attempt_is_its_own_entry_and_the_history_reads_the_latest(store_url: str) -> None:
    store = open_store(store_url)
    store.write([entry(1, attempt=2, value=0.9), entry(1, attempt=1, value=0.1), entry(2, value=0.3)])
    assert [(e.run_id[-1], e.attempt, e.value) for e in store.entries()] == [("1", 2, 0.9), ("2", 1, 0.3)]
    with store.engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM entries")).scalar() == 3
    store.close()


def test_the_selection_filters_by_model_prefix_sweep_and_benchmark(store_url: str) -> None:
    store = open_store(store_url)
    sweep = "gym-sweep-20261201T000000Z-000001"
    store.write(
        [
            entry(1, "x", model="/ckpt/a_1/step-1", sweep_id=sweep),
            entry(1, "y", model="/ckpt/a_1/step-1", sweep_id=sweep),
            entry(2, "x", model="/ckpt/ab1/step-1"),  # "_" is a letter of the prefix, not a wildcard
            entry(3, "x", model="/ckpt/b/step-1", sweep_id=sweep),
        ]
    )
    runs = lambda selection: sorted({(e.run_id[-1], e.benchmark) for e in store.entries(selection)})  # noqa: E731
    assert runs(Selection(model_prefix="/ckpt/a_")) == [("1", "x"), ("1", "y")]
    assert runs(Selection(sweep_id=sweep)) == [("1", "x"), ("1", "y"), ("3", "x")]
    assert runs(Selection(benchmarks=("y",))) == [("1", "y")]
    assert runs(Selection(model_prefix="/ckpt/", sweep_id=sweep, benchmarks=("x",))) == [("1", "x"), ("3", "x")]
    store.close()


def test_a_store_opened_is_at_the_newest_schema_and_opening_again_changes_nothing(store_url: str) -> None:
    from alembic.script import ScriptDirectory

    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    for _ in range(2):
        open_store(store_url).close()
    engine = create_engine(store_url)
    with engine.connect() as conn:
        assert conn.execute(text("SELECT version_num FROM alembic_version")).scalars().all() == [head]
    assert set(inspect(engine).get_table_names()) == {"alembic_version", "entries"}
    engine.dispose()


WRITER = textwrap.dedent(
    """
    import sys
    from nemo_gym.orchestration.store import Entry, open_store
    url, first, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    store = open_store(url)
    for run in range(first, first + count):
        for benchmark in ("b1", "b2"):
            store.write([Entry(f"gym-job-20261201T000000Z-{run:06x}", benchmark, 1, "2026-12-01T00:00:00Z",
                               "succeeded", 12, "reward", value=run / 100, task_scores={0: 1.0})])
    store.close()
    """
)


def test_two_writer_processes_at_once_lose_nothing(store_url: str) -> None:
    """Two processes open a new store and write at once, half of their keys the same: every key
    once, nothing refused (the first open of each races the other's schema creation too)."""
    writers = [
        subprocess.Popen([sys.executable, "-c", WRITER, store_url, str(first), "40"], stderr=subprocess.PIPE, text=True)
        for first in (0, 20)
    ]
    for writer in writers:
        _, err = writer.communicate(timeout=300)
        assert writer.returncode == 0, err
    store = open_store(store_url)
    found = store.entries()
    assert len(found) == 60 * 2
    assert {(e.run_id, e.benchmark) for e in found} == {
        (f"gym-job-20261201T000000Z-{run:06x}", b) for run in range(60) for b in ("b1", "b2")
    }
    store.close()


def test_an_unreachable_store_is_one_line_naming_it_with_the_password_masked() -> None:
    with pytest.raises(UserError) as caught:
        open_store("postgresql+psycopg://ada:s3cret-pw@127.0.0.1:9/history")
    [line] = caught.value.problems
    assert line.startswith("cannot reach the results store postgresql+psycopg://ada:***@127.0.0.1:9/history (")
    assert "s3cret-pw" not in line and "\n" not in line
    assert line.endswith(
        "start it, or name another with --results-url or GYM_RESULTS_URL (unset: the SQLite file beside the local index)"
    )


def test_no_database_url_is_refused_naming_the_option() -> None:
    with pytest.raises(UserError, match=r"^--results-url/GYM_RESULTS_URL: 'not a url' is not a database URL"):
        open_store("not a url")


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("bad url://user:hunter2@host/db", "bad url://***@host/db"),
        ("postgresql+psycopg//user:hunter2@host/db", "postgresql+psycopg//***@host/db"),
        ("user:hunter2@host", "***@host"),
        ("no password here", "no password here"),
    ],
)
def test_a_url_that_is_no_database_url_is_refused_without_its_password(url, shown) -> None:
    with pytest.raises(UserError) as caught:
        open_store(url)
    [line] = caught.value.problems
    assert "hunter2" not in line and f"{shown!r} is not a database URL" in line


def test_the_default_store_is_an_sqlite_file_beside_the_local_index(monkeypatch: pytest.MonkeyPatch) -> None:
    from nemo_gym.orchestration.record import index_dir

    monkeypatch.delenv("GYM_RESULTS_URL", raising=False)
    store = open_store(None)
    store.write([entry(1)])
    store.close()
    assert default_url() == f"sqlite:///{index_dir() / 'results.sqlite'}"
    assert (index_dir() / "results.sqlite").is_file()
