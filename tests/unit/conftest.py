"""What the unit tests share: a fake Slurm cluster and a connection to it (tests/fakes), and a
local index of each test's own (every unit test's XDG_CACHE_HOME is in its tmp_path)."""

from __future__ import annotations

from pathlib import Path

import pytest
from fakes import FakeCluster, FakeConnection

FAKE_HOST = "login.fake"


@pytest.fixture
def cluster(tmp_path: Path) -> FakeCluster:
    return FakeCluster(tmp_path / "slurm")


@pytest.fixture
def conn(cluster: FakeCluster) -> FakeConnection:
    return FakeConnection(cluster, FAKE_HOST)


@pytest.fixture(autouse=True)
def _every_unit_test_has_its_own_index(own_index: Path) -> None:
    """tests/conftest.py's own_index, for every unit test."""
