"""Run configs flattened into Hydra overrides reach gym exactly as written."""

from __future__ import annotations

import pytest
from hydra.core.override_parser.overrides_parser import OverridesParser
from hypothesis import given, settings
from hypothesis import strategies as st
from omegaconf import OmegaConf

from nemo_gym.orchestration.errors import UserError
from nemo_gym.orchestration.overrides import flatten_overrides

PARSER = OverridesParser.create()


def as_gym_sees_it(tokens: list[str]) -> dict:
    """Parse the tokens as Hydra does, then resolve as the driver's OmegaConf does."""
    cfg = OmegaConf.create({})
    for override in PARSER.parse_overrides(tokens):
        OmegaConf.update(cfg, override.key_or_group, override.value(), force_add=True)
    return OmegaConf.to_container(cfg, resolve=True)


@pytest.mark.parametrize(
    "value",
    [
        "x y",
        "it's",
        'say "hi"',
        "a,b",
        "${x}",
        "\\${x}",
        "back\\slash",
        "tr\\",
        "\\'",
        "true",
        "",
        "null",
        "$HOME",
        "[1,2]",
        "{a: b}",
        "=",
        "  spaces  ",
        "ünïcode",
        "a\nb",
        "\\\n",  # a backslash before a final newline is literal
    ],
)
def test_strings_survive(value) -> None:
    assert as_gym_sees_it(flatten_overrides({"k": value})) == {"k": value}


def test_structures_survive() -> None:
    run = {"a": {"b": [1, {"k": "v w"}, None, True]}, "c": None, "d": 1.5, "e": False, "f": []}
    assert as_gym_sees_it(flatten_overrides(run)) == run


def test_nested_dicts_become_dotted_keys() -> None:
    assert flatten_overrides({"a": {"b": {"c": 1}}}) == ["+a.b.c=1"]


def test_keys_that_hydra_cannot_take_are_refused() -> None:
    with pytest.raises(UserError, match="run/prepare key 'run.a b' cannot be passed"):
        flatten_overrides({"a b": 1}, "run.")


_text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=30)
_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(10**9), 10**9) | _text,
    lambda inner: st.lists(inner, max_size=4),
    max_leaves=8,
)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.from_regex(r"[a-z][a-z0-9_]{0,8}", fullmatch=True), _values, min_size=1, max_size=4))
def test_any_run_config_round_trips(run) -> None:
    assert as_gym_sees_it(flatten_overrides(run)) == run
