"""parse_rollouts / parse_expected / completeness / per_task_means: what a killed or resumed driver
leaves behind (truncated lines, repeated rows, missing scores) is counted, never fatal or silent."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nemo_gym.orchestration.rollouts import (
    MAX_REPORTED_LINES,
    Completeness,
    RolloutSet,
    completeness,
    parse_expected,
    parse_rollouts,
    per_task_means,
)


def row(task: Any, rollout: Any = 0, **fields: Any) -> str:
    return json.dumps({"_ng_task_index": task, "_ng_rollout_index": rollout, **fields})


def test_reads_rewards_keyed_by_task_and_rollout() -> None:
    rs = parse_rollouts([row(0, 0, reward=1.0), row(0, 1, reward=0), row(1, 0, reward=0.5)])
    assert dict(rs.rewards) == {(0, 0): 1.0, (0, 1): 0.0, (1, 0): 0.5}
    assert rs.written == {(0, 0), (0, 1), (1, 0)}
    assert (rs.duplicates, rs.no_metric, rs.unreadable, rs.unreadable_lines) == ((), (), 0, ())
    assert rs.metric == "reward"


def test_lines_with_newlines_as_read_from_a_file_and_blank_lines_are_fine() -> None:
    rs = parse_rollouts([row(0, reward=1) + "\n", "\n", "   \n", row(1, reward=0) + "\r\n", ""])
    assert dict(rs.rewards) == {(0, 0): 1.0, (1, 0): 0.0}
    assert rs.unreadable == 0


def test_unreadable_lines_are_counted_with_their_1_based_line_numbers() -> None:
    lines = [
        row(0, reward=1),  # 1
        "",  # 2: blank, skipped but still a line of the file
        '{"_ng_task_index": 1, "_ng_rollout_index": 0, "rew',  # 3: truncated by a kill
        "[1, 2]",  # 4: JSON, not an object
        json.dumps({"reward": 1}),  # 5: no indices
        row("2", 0, reward=1),  # 6: index as a string
        row(3, None, reward=1),  # 7: rollout index null
        row(True, 0, reward=1),  # 8: bool is not an index
        row(4.0, 0, reward=1),  # 9: gym writes integers
        row(5, reward=1),  # 10: fine
    ]
    rs = parse_rollouts(lines)
    assert rs.unreadable == 7
    assert rs.unreadable_lines == (3, 4, 5, 6, 7)  # the first MAX_REPORTED_LINES
    assert len(rs.unreadable_lines) == MAX_REPORTED_LINES
    assert dict(rs.rewards) == {(0, 0): 1.0, (5, 0): 1.0}


def test_a_repeated_pair_counts_once_first_row_wins_and_every_repeat_is_reported() -> None:
    lines = [row(0, 0, reward=0), row(1, 0, reward=1), row(0, 0, reward=1), row(0, 0, reward=1)]
    rs = parse_rollouts(lines)
    assert rs.rewards[(0, 0)] == 0.0
    assert rs.duplicates == ((0, 0), (0, 0))
    assert rs.written == {(0, 0), (1, 0)}


def test_first_row_wins_even_when_it_has_no_score() -> None:
    rs = parse_rollouts([row(0, 0), row(0, 0, reward=1)])
    assert (0, 0) not in rs.rewards and rs.no_metric == ((0, 0),) and rs.duplicates == ((0, 0),)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (True, 1.0),
        (False, 0.0),
        (1, 1.0),
        (0, 0.0),
        (0.25, 0.25),
        (-1.5, -1.5),
        (10**400, None),
        ("1.0", None),
        (None, None),
        ([1], None),
        ({"v": 1}, None),
    ],
)
def test_scores_are_finite_numbers_and_bools(value: Any, expected: float | None) -> None:
    rs = parse_rollouts([row(0, reward=value)])
    assert rs.rewards.get((0, 0)) == expected
    assert rs.no_metric == (() if expected is not None else ((0, 0),))
    assert rs.written == {(0, 0)}  # scored or not, the rollout was written


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity", "1e999"])
def test_non_finite_scores_which_python_json_accepts_are_no_score(literal: str) -> None:
    rs = parse_rollouts(['{"_ng_task_index": 0, "_ng_rollout_index": 0, "reward": ' + literal + "}"])
    assert dict(rs.rewards) == {} and rs.no_metric == ((0, 0),)


def test_a_row_without_the_metric_is_written_but_unscored() -> None:
    rs = parse_rollouts([row(0, 0, reward=1), row(1, 0, score=1)])
    assert rs.no_metric == ((1, 0),)
    assert rs.written == {(0, 0), (1, 0)}


def test_metric_by_another_top_level_name() -> None:
    rs = parse_rollouts([row(0, reward=0, accuracy=True)], metric="accuracy")
    assert dict(rs.rewards) == {(0, 0): 1.0} and rs.metric == "accuracy"


def test_metric_by_dotted_path_into_nested_objects() -> None:
    lines = [row(0, response={"judge": {"reward": 0.75}}), row(1, response={"judge": 1}), row(2, response=[1])]
    rs = parse_rollouts(lines, metric="response.judge.reward")
    assert dict(rs.rewards) == {(0, 0): 0.75}
    assert rs.no_metric == ((1, 0), (2, 0))


def test_a_top_level_key_containing_dots_wins_over_the_path() -> None:
    line = json.dumps({"_ng_task_index": 0, "_ng_rollout_index": 0, "a.b": 1, "a": {"b": 0}})
    assert parse_rollouts([line], metric="a.b").rewards[(0, 0)] == 1.0


def test_the_result_cannot_be_changed_afterwards() -> None:
    rs = parse_rollouts([row(0, reward=1)])
    with pytest.raises(TypeError):
        rs.rewards[(9, 9)] = 1.0  # type: ignore[index]
    with pytest.raises(AttributeError):
        rs.unreadable = 3  # type: ignore[misc]


def test_parse_expected_reads_the_pairs_of_the_materialized_inputs() -> None:
    lines = [row(0, 0, responses_create_params={"input": "q"}), "", row(0, 1), row(1, 0), row(1, 0)]
    assert parse_expected(lines) == frozenset({(0, 0), (0, 1), (1, 0)})
    assert parse_expected([]) == frozenset()


@pytest.mark.parametrize("bad", ['{"_ng_task_index": 1, "_ng_rol', json.dumps({"input": "q"}), "null"])
def test_parse_expected_refuses_a_damaged_list_naming_the_line(bad: str) -> None:
    """A silently shortened list of expected pairs would make an incomplete run look complete."""
    with pytest.raises(ValueError, match="line 3 "):
        parse_expected([row(0), "", bad, row(2)])


def rollouts_of(*pairs: tuple[int, int]) -> RolloutSet:
    return parse_rollouts([row(t, r, reward=1) for t, r in pairs])


def test_complete_when_every_expected_pair_is_written() -> None:
    c = completeness(frozenset({(0, 0), (0, 1)}), rollouts_of((0, 1), (0, 0)))
    assert c == Completeness(known=True, expected=2, written=2, missing=(), extra=(), duplicates=0, complete=True)


def test_missing_and_extra_pairs_are_listed_sorted() -> None:
    expected = frozenset({(0, 0), (0, 1), (1, 0), (2, 0)})
    c = completeness(expected, rollouts_of((2, 0), (0, 1), (7, 0), (3, 1)))
    assert c.missing == ((0, 0), (1, 0))
    assert c.extra == ((3, 1), (7, 0))
    assert (c.expected, c.written, c.complete, c.known) == (4, 4, False, True)


def test_extra_and_duplicate_rows_do_not_make_a_run_incomplete() -> None:
    rs = parse_rollouts([row(0, 0, reward=1), row(0, 0, reward=1), row(5, 0, reward=1)])
    c = completeness(frozenset({(0, 0)}), rs)
    assert c.complete is True and c.duplicates == 1 and c.extra == ((5, 0),)


def test_unscored_rows_count_as_written() -> None:
    c = completeness(frozenset({(0, 0)}), parse_rollouts([row(0, 0)]))
    assert c.complete is True and c.written == 1


def test_without_the_expected_list_completeness_is_unknown_not_true() -> None:
    """gym before 0.7.0 writes no materialized inputs: nothing can be called missing."""
    c = completeness(None, parse_rollouts([row(0, 0, reward=1), row(0, 0, reward=1)]))
    assert c == Completeness(known=False, expected=None, written=1, missing=(), extra=(), duplicates=1, complete=None)


def test_empty_rollouts_against_an_expected_list_are_all_missing() -> None:
    c = completeness(frozenset({(1, 0), (0, 0)}), parse_rollouts([]))
    assert c.missing == ((0, 0), (1, 0)) and c.complete is False and c.written == 0


def test_an_empty_expected_list_is_trivially_complete() -> None:
    assert completeness(frozenset(), parse_rollouts([])).complete is True


def test_per_task_means_average_the_scored_repeats_of_each_task_in_task_order() -> None:
    lines = [
        row(3, 0, reward=1),
        row(1, 0, reward=0),
        row(1, 1, reward=1),
        row(1, 2, reward=True),
        row(3, 1),
        row(2, 0),
    ]
    means = per_task_means(parse_rollouts(lines))
    assert means == {1: 2 / 3, 3: 1.0}  # task 2 has no score at all: left out, not 0
    assert list(means) == [1, 3]


def test_per_task_means_of_nothing_is_empty() -> None:
    assert per_task_means(parse_rollouts([])) == {}


@given(st.lists(st.floats(min_value=-1e6, max_value=1e6, allow_nan=False), min_size=1, max_size=12), st.randoms())
def test_a_task_mean_does_not_depend_on_row_order(scores: list[float], rnd: Any) -> None:
    """Otherwise identical runs written in another order would show tasks as changed."""
    lines = [row(0, i, reward=s) for i, s in enumerate(scores)]
    shuffled = lines[:]
    rnd.shuffle(shuffled)
    assert per_task_means(parse_rollouts(lines)) == per_task_means(parse_rollouts(shuffled))


@given(
    st.lists(
        st.one_of(
            st.text(max_size=40),
            st.builds(row, st.integers(0, 5), st.integers(0, 2), reward=st.sampled_from([0, 1, None, "x"])),
        )
    )
)
def test_every_non_blank_line_is_accounted_for(lines: list[str]) -> None:
    rs = parse_rollouts(lines)
    non_blank = sum(1 for line in lines if line.strip())
    assert len(rs.written) + len(rs.duplicates) + rs.unreadable == non_blank
    assert len(rs.rewards) + len(rs.no_metric) == len(rs.written)
