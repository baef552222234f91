"""The bounded JSON reader every reader of a run directory, record or index goes through."""

import json

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from nemo_gym.orchestration import untrusted
from nemo_gym.orchestration.untrusted import Unreadable


def test_an_object_reads_back():
    assert untrusted.loads_object('{"a": [1, {"b": 2}]}', "gym-job.json") == {"a": [1, {"b": 2}]}


@pytest.mark.parametrize("text, kind", [("[1, 2]", "array"), ("null", "null"), ('"x"', "string"), ("3", "number")])
def test_json_that_is_not_an_object_is_refused_with_its_kind(text, kind):
    with pytest.raises(Unreadable, match=f"gym-job.json: a JSON {kind} where an object was expected"):
        untrusted.loads_object(text, "gym-job.json")


def test_200000_deep_json_is_refused_in_one_line_not_a_recursion_error():
    with pytest.raises(Unreadable, match="nested deeper than 64 levels") as err:
        untrusted.loads("[" * 200_000 + "]" * 200_000, "rollouts.jsonl line 3")
    assert "\n" not in str(err.value)


def test_depth_below_the_parser_limit_but_above_ours_is_refused():
    with pytest.raises(Unreadable, match="deeper than 64"):
        untrusted.loads('{"a":' * 100 + "1" + "}" * 100, "metrics")
    assert untrusted.loads('{"a":' * 63 + "1" + "}" * 63, "metrics")


def test_bytes_that_are_not_utf8_are_refused_naming_the_byte():
    with pytest.raises(Unreadable, match=r"state: not UTF-8 text \(byte 6\)"):
        untrusted.loads(b'{"a": \xff}', "state")


def test_a_file_larger_than_the_bound_is_refused_without_reading_it_all(tmp_path):
    path = tmp_path / "big.json"
    path.write_bytes(b" " * 2048 + b"{}")
    with pytest.raises(Unreadable, match="larger than 1024 bytes"):
        untrusted.read_bounded(path, "big.json", max_bytes=1024)
    assert untrusted.load_object_file(path, "big.json") == {}


def test_a_missing_file_is_unreadable_not_an_oserror(tmp_path):
    with pytest.raises(Unreadable, match="cannot be read"):
        untrusted.load_object_file(tmp_path / "nope.json", "nope.json")


@given(st.binary(max_size=200))
def test_any_bytes_either_parse_or_are_unreadable(data):
    try:
        untrusted.loads(data, "x")
    except Unreadable as err:
        assert "\n" not in str(err)


@given(st.recursive(st.none() | st.integers() | st.text(), lambda c: st.lists(c) | st.dictionaries(st.text(), c)))
def test_documents_we_could_write_round_trip(value):
    assume(not untrusted.depth_exceeds(value, untrusted.MAX_DEPTH))
    assert untrusted.loads(json.dumps(value), "x") == value
