"""A sweep's combinations composed with Hydra run once (compose.SharedComposition) are exactly what
Hydra composes for each alone: the same dicts, the same errors; Hydra runs once, not per combination."""

from __future__ import annotations

import hydra
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nemo_gym.orchestration.compose import SharedComposition, compose_config
from nemo_gym.orchestration.errors import UserError

CONFIG = """\
defaults:
  - db: sqlite
  - _self_
_scratch:
  base: /ckpt
a:
  b: 1
  c: [1, 2]
  d: gone-soon
  nested: {x: 1, y: two}
path: ${_scratch.base}/${a.b}
from_env: ${oc.env:GYM_TEST_SHARED_COMPOSITION,unset}
"""


@pytest.fixture
def config_file(tmp_path):
    (tmp_path / "db").mkdir()
    (tmp_path / "db" / "sqlite.yaml").write_text("name: sqlite\nport: 0\n")
    (tmp_path / "db" / "postgres.yaml").write_text("name: postgres\nport: 5432\n")
    path = tmp_path / "sweep.yaml"
    path.write_text(CONFIG)
    return path


@pytest.fixture
def hydra_runs(monkeypatch):
    calls = []
    real = hydra.compose

    def counted(*args, **kwargs):
        calls.append(kwargs.get("overrides"))
        return real(*args, **kwargs)

    monkeypatch.setattr(hydra, "compose", counted)
    return calls


def fails_alike(path, overrides: list[str], shared: SharedComposition) -> list[str]:
    """The problems composing ``overrides`` with ``shared`` gives, the same as composing them alone."""
    with pytest.raises(UserError) as together:
        compose_config(path, overrides, shared)
    with pytest.raises(UserError) as alone:
        compose_config(path, overrides)
    assert together.value.problems == alone.value.problems
    return together.value.problems


SHARED = ["a.c=[3,4]", "+extra=1"]
OWN = [
    ["a.b=2"],
    ["a.b=3", "+added.key=x"],
    ["a.b=4", "++a.nested.x=5"],
    ["a.b=5", "~a.d"],
    ["a.b=6", "a.nested={x: 9}"],
    ["a.b='with space'", "_scratch.base=/other"],
    ["a.b=null"],
]


def test_each_combination_is_what_hydra_composes_alone_and_hydra_runs_once(config_file, hydra_runs) -> None:
    shared = SharedComposition(config_file, SHARED)
    together = [compose_config(config_file, [*SHARED, *own], shared) for own in OWN]
    assert len(hydra_runs) == 1  # the shared overrides, once
    alone = [compose_config(config_file, [*SHARED, *own]) for own in OWN]
    assert together == alone
    assert together[0]["path"] == "/ckpt/2" and together[5]["path"] == "/other/with space"
    assert "d" not in together[3]["a"] and together[4]["a"]["nested"] == {"x": 9, "y": "two"}


def test_a_config_group_chosen_per_combination_is_composed_in_full(config_file, hydra_runs) -> None:
    shared = SharedComposition(config_file, ["a.b=7"])
    together = [compose_config(config_file, ["a.b=7", f"db={db}"], shared) for db in ("sqlite", "postgres")]
    assert [c["db"]["name"] for c in together] == ["sqlite", "postgres"]
    assert len(hydra_runs) == 1 + 2  # the base, then each combination in full
    assert together == [compose_config(config_file, ["a.b=7", f"db={db}"]) for db in ("sqlite", "postgres")]


def test_a_key_the_shared_overrides_touch_is_composed_in_full(config_file, hydra_runs) -> None:
    """Hydra applies overrides in order: a combination's key inside a shared one's would depend on it."""
    shared = SharedComposition(config_file, ["a.nested={x: 3}"])
    together = compose_config(config_file, ["a.nested={x: 3}", "a.nested.y=z"], shared)
    assert together == compose_config(config_file, ["a.nested={x: 3}", "a.nested.y=z"])
    assert len(hydra_runs) == 2  # in full, then alone: the shared base was never needed


@pytest.mark.parametrize(
    "own",
    [["a.missing=1"], ["+a.b=1"], ["~a.nothing"], ["a.b=${nowhere}"], ["db=mysql"]],
    ids=["unknown key", "add an existing key", "delete a missing key", "bad interpolation", "missing group option"],
)
def test_a_combination_that_fails_fails_as_it_would_alone(config_file, own) -> None:
    fails_alike(config_file, [*SHARED, *own], SharedComposition(config_file, SHARED))


def test_a_shared_override_that_fails_fails_every_combination_as_alone(config_file) -> None:
    problems = fails_alike(config_file, ["a.nope=1", "a.b=2"], SharedComposition(config_file, ["a.nope=1"]))
    assert "a.nope" in problems[0]


values = st.one_of(
    st.integers(-(10**6), 10**6).map(str),
    st.floats(allow_nan=False, allow_infinity=False, width=32).map(repr),
    st.from_regex(r"[A-Za-z_/][A-Za-z0-9_./-]{0,12}", fullmatch=True),
    st.text(st.characters(codec="ascii", exclude_characters="'\\"), max_size=12).map(lambda t: f"'{t}'"),
    st.sampled_from(["true", "false", "null", "[]", "{}", "[1,a]"]),
)


@settings(max_examples=60, deadline=None)
@given(b=values, added=values)
def test_any_values_compose_as_hydra_composes_them_alone(tmp_path_factory, b, added) -> None:
    root = tmp_path_factory.mktemp("c")
    path = root / "sweep.yaml"
    path.write_text("a:\n  b: 1\nref: x-${a.b}\n")
    overrides = ["+s=${a.b}", f"a.b={b}", f"+new={added}"]
    shared = SharedComposition(path, overrides[:1])
    try:
        alone = compose_config(path, overrides)
    except UserError:
        fails_alike(path, overrides, shared)
        return
    assert compose_config(path, overrides, shared) == alone


def test_an_addition_before_a_shared_override_is_composed_in_full(tmp_path, hydra_runs) -> None:
    """'+a.p' is checked against a.p resolved (${q}): after the shared q=null it is free, before it
    it is not, and Hydra applies them in the order given."""
    path = tmp_path / "sweep.yaml"
    path.write_text("a:\n  p: ${q}\nq: 3\n")
    shared = SharedComposition(path, ["q=null"])
    fails_alike(path, ["+a.p=5", "q=null"], shared)
    assert compose_config(path, ["q=null", "+a.p=5"], shared) == compose_config(path, ["q=null", "+a.p=5"])
