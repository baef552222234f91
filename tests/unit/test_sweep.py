"""Sweeps: Hydra's multirun grammar expanded into one combination per run, labelled by its values."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

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


# -- bounded before enumerating, each key once ---------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(st.integers(-40, 40), st.integers(-40, 40), st.integers(-7, 7).filter(bool))
def test_an_integer_range_is_counted_exactly_as_python_counts_it(start: int, stop: int, step: int) -> None:
    expected = len(range(start, stop, step))
    try:
        points = expand("c.yaml", [f"x=range({start},{stop},{step})"])
    except UserError as exc:
        assert expected == 0 and "sweeps over no value" in exc.problems[0]
        return
    assert [p.values for p in points] == [(("x", str(v)),) for v in range(start, stop, step)]


@settings(max_examples=100, deadline=None)
@given(st.sampled_from([0.5, 0.1, 0.25, 1.5, -0.5]), st.integers(-10, 10), st.integers(-10, 10))
def test_a_float_range_is_counted_as_hydra_enumerates_it(step: float, start: int, stop: int) -> None:
    from hydra.core.override_parser.types import FloatRange

    expected = len(list(FloatRange(start / 2, stop / 2, step)))
    try:
        assert len(expand("c.yaml", [f"x=range({start / 2},{stop / 2},{step})"])) == expected
    except UserError as exc:
        assert expected == 0 and "sweeps over no value" in exc.problems[0]


@pytest.mark.parametrize(
    ("swept", "message"),
    [
        (["x=range(0,1000000000000)"], "-m: 1000000000000 combinations (more than 500); sweep fewer values at once"),
        (["x=shuffle(range(0,1000000000000))"], "-m: 1000000000000 combinations (more than 500)"),
        (["x=range(1e300,1e308,1e-300)"], "-m: at least 10^607 combinations (more than 500)"),
        (
            ["a=range(0,1000000)", "b=range(0,1000000)", "c=range(0,1000000)"],
            "-m: at least 10^18 combinations (more than 500)",
        ),
        (["a=range(0,1000000000000)", "b=range(0,0)"], "-m b=range(0,0): sweeps over no value; give at least one"),
        (["x=range(0,inf)"], "-m x=range(0,inf): a range needs finite numbers; give a finite start, stop and step"),
    ],
)
def test_a_huge_sweep_is_refused_before_any_value_is_made(swept: list[str], message: str) -> None:
    with pytest.raises(UserError) as caught:
        expand("c.yaml", swept)
    [line] = caught.value.problems
    assert line.startswith(message)


@pytest.mark.parametrize("swept", [["x=1,2", "x=3,4"], ["+x=1,2", "x=3"], ["x=1,2", "~x"], ["a.b=range(0,2)", "a.b=5"]])
def test_the_same_key_twice_is_refused_in_one_line_naming_both(swept: list[str]) -> None:
    key = swept[0].split("=")[0].lstrip("+~")
    with pytest.raises(UserError) as caught:
        expand("c.yaml", swept)
    assert caught.value.problems == [
        f"-m: {key} is given twice ({swept[0]} and {swept[1]}); give each key once, with all its values in one list (key=a,b,c)"
    ]
