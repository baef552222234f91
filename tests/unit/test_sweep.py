"""Sweeps: Hydra's multirun grammar expanded into one combination per run, labelled by its values."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from nemo_gym.orchestration.errors import UserError
from nemo_gym.orchestration.sweep import MAX_COMBINATIONS, expand, new_sweep_id


def test_comma_lists_and_ranges_make_the_cartesian_product_in_the_order_written(tmp_path: Path) -> None:
    points = expand(tmp_path / "c.yaml", ["services.policy.model=/m/a,/m/b", "+run.limit=range(1,3)", "x=5"])
    assert [p.overrides for p in points] == [
        ("services.policy.model=/m/a", "+run.limit=1", "x=5"),
        ("services.policy.model=/m/a", "+run.limit=2", "x=5"),
        ("services.policy.model=/m/b", "+run.limit=1", "x=5"),
        ("services.policy.model=/m/b", "+run.limit=2", "x=5"),
    ]
    assert points[2].label() == "services.policy.model=/m/b, run.limit=1"  # the constant x is no label


def test_quoted_values_keep_their_commas(tmp_path: Path) -> None:
    points = expand(tmp_path / "c.yaml", ["k='a,b',c"])
    assert [p.values for p in points] == [(("k", "'a,b'"),), (("k", "c"),)]


def test_glob_picks_among_a_config_groups_files(tmp_path: Path) -> None:
    (tmp_path / "model").mkdir()
    for name in ("step-100", "step-200", "base"):
        (tmp_path / "model" / f"{name}.yaml").write_text("{}\n")
    points = expand(tmp_path / "c.yaml", ["model=glob(step-*)"])
    assert [p.overrides for p in points] == [("model=step-100",), ("model=step-200",)]
    with pytest.raises(UserError, match="holds none; list the values instead"):
        expand(tmp_path / "c.yaml", ["other=glob(*)"])


def test_bad_sweeps_are_one_line_errors(tmp_path: Path) -> None:
    with pytest.raises(UserError, match=r"^-m: .*write key=a,b,c"):
        expand(tmp_path / "c.yaml", ["k=a,,b)"])
    with pytest.raises(UserError, match=f"more than {MAX_COMBINATIONS}"):
        expand(tmp_path / "c.yaml", ["a=range(0,100)", "b=range(0,100)"])


def test_sweep_ids_sort_by_time_and_differ() -> None:
    first, second = new_sweep_id(), new_sweep_id()
    assert re.fullmatch(r"gym-sweep-\d{8}T\d{6}Z-[0-9a-f]{6}", first) and first != second
