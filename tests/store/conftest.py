"""The store's tests run twice: on an SQLite file, and on the real PostgreSQL server of
``scripts/local-postgres`` (``GYM_TEST_POSTGRES_URL``; skipped with the reason without it, a
failure under ``GYM_REQUIRE_CLUSTER=1``). Each PostgreSQL test gets a database of its own."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

POSTGRES_VARIABLE = "GYM_TEST_POSTGRES_URL"


@pytest.fixture(autouse=True)
def _own_index(own_index: Path, _no_results_store: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every store test has its own local index, so the default store is its own too; the store is
    on (the suite's other tests turn it off)."""
    monkeypatch.delenv("GYM_RESULTS_URL", raising=False)


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'store' / 'results.sqlite'}"
        return
    yield from _postgres_database()


def _postgres_database() -> Iterator[str]:
    server = os.environ.get(POSTGRES_VARIABLE)
    if not server:
        reason = f'{POSTGRES_VARIABLE} is unset: start the server with scripts/local-postgres up, then eval "$(scripts/local-postgres env)"'
        if os.environ.get("GYM_REQUIRE_CLUSTER") == "1":
            pytest.fail(reason)
        pytest.skip(reason)
    name = f"gym_test_{uuid.uuid4().hex[:12]}"
    admin = create_engine(server, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        yield make_url(server).set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()
