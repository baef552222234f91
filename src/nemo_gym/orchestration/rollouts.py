"""Read a benchmark's rollouts and check them against what it was meant to write. No I/O here.

A benchmark writes ``rollouts.jsonl``: one JSON row per (task, rollout) pair, keyed by
``_ng_task_index`` and ``_ng_rollout_index``, with the score under a metric key (``reward``).
NeMo Gym 0.7.0 also writes ``rollouts_materialized_inputs.jsonl``: one row per pair it meant to
run. The reader is tolerant because the files we compare are often what a killed or resumed driver
left: a truncated last line, a pair written twice. It counts those problems instead of failing,
so that a report can say how far to trust the numbers.
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from types import MappingProxyType
from typing import Any

from nemo_gym.orchestration import facts
from nemo_gym.orchestration.facts import (
    ROLLOUT_INDEX_KEY,
    TASK_INDEX_KEY,
    Completeness,
    expected_pairs,
    rows_of,
)

__all__ = ["ROLLOUT_INDEX_KEY", "TASK_INDEX_KEY", "Completeness", "completeness", "parse_expected", "parse_rollouts"]
# The pairs ``rollouts_materialized_inputs.jsonl`` lists (strict: ``facts.expected_pairs``).
parse_expected = expected_pairs
# A report names a few bad lines so that someone can open the file at them; all are counted.
MAX_REPORTED_LINES = 5

TaskRollout = tuple[int, int]
"""A (task index, rollout index) pair: the identity of one rollout."""


class NoScore(str, Enum):
    """Why a written row has no score: it then counts as written, but not in the metric's mean."""

    ABSENT = "no value"
    NOT_A_NUMBER = "not a number"  # a string, null, a list or an object
    NOT_FINITE = "NaN or infinite"  # json.loads accepts NaN and Infinity; or an integer beyond float range


@dataclass(frozen=True)
class RolloutSet:
    """What one ``rollouts.jsonl`` holds, with everything that made a row unusable counted."""

    metric: str
    rewards: Mapping[TaskRollout, float]  # pairs whose (first) row has a usable metric value
    written: frozenset[TaskRollout]  # every pair with a readable row, with or without the metric
    duplicates: tuple[TaskRollout, ...]  # one entry per repeated row of a pair, in file order
    no_metric: tuple[TaskRollout, ...]  # pairs whose row has no usable metric value, in file order
    no_score: Mapping[TaskRollout, NoScore]  # the same pairs, each with why it has none
    unreadable: int  # non-blank lines that are not JSON objects carrying both indices (oversized ones included)
    unreadable_lines: tuple[int, ...]  # 1-based line numbers of the first MAX_REPORTED_LINES of them
    oversized_lines: tuple[int, ...] = ()  # the first MAX_REPORTED_LINES of those over MAX_ROW_BYTES
    oversized: int = 0  # lines over MAX_ROW_BYTES, refused unparsed
    groups: Mapping[int, str] = field(default_factory=dict)  # task -> its group of related tasks (``group_key``)


def parse_rollouts(lines: Iterable[str], metric: str = "reward", group_key: str | None = None) -> RolloutSet:
    """Read ``rollouts.jsonl`` lines; never raises on bad content.

    Blank lines are skipped. A line that is not a JSON object with integer indices is unreadable.
    The first row of a pair wins and later ones are reported as duplicates: a resumed driver
    appends, so the first row is the one the original run produced. A metric value is usable when
    it is a finite number or a bool (counted 0/1); anything else, or its absence, makes the row
    ``no_metric`` (``no_score`` says why): it still counts as written, it just has no score. A
    line over ``MAX_ROW_BYTES`` (or the projection's ``OVERSIZED``) is unreadable, unparsed, and
    counted in ``oversized`` too. ``metric`` is looked up as a top-level key first, then, if it
    contains dots, as a path through nested objects (``"response.reward"``). With ``group_key``,
    each task's group is its first row's value of that field.
    """
    groups: dict[int, str] = {}
    rewards: dict[TaskRollout, float] = {}
    written: set[TaskRollout] = set()
    duplicates: list[TaskRollout] = []
    no_score: dict[TaskRollout, NoScore] = {}
    unreadable_lines: list[int] = []
    oversized_lines: list[int] = []
    for number, row, pair, oversized in rows_of(lines):
        if oversized:
            oversized_lines.append(number)
        if row is None or pair is None:
            unreadable_lines.append(number)
            continue
        if pair in written:
            duplicates.append(pair)
            continue
        written.add(pair)
        if group_key and pair[0] not in groups:
            groups.update(_group_of(pair[0], row, group_key))
        value = _metric_value(row, metric)
        if isinstance(value, NoScore):
            no_score[pair] = value
        else:
            rewards[pair] = value
    return RolloutSet(
        metric=metric,
        groups=MappingProxyType(groups),
        rewards=MappingProxyType(rewards),
        written=frozenset(written),
        duplicates=tuple(duplicates),
        no_metric=tuple(no_score),
        no_score=MappingProxyType(no_score),
        unreadable=len(unreadable_lines),
        unreadable_lines=tuple(unreadable_lines[:MAX_REPORTED_LINES]),
        oversized_lines=tuple(oversized_lines[:MAX_REPORTED_LINES]),
        oversized=len(oversized_lines),
    )


def completeness(expected: frozenset[TaskRollout] | None, rollouts: RolloutSet) -> Completeness:
    """``facts.completeness`` of a parsed rollouts file; ``expected=None``: the list is unavailable."""
    return facts.completeness(expected, rollouts.written, len(rollouts.duplicates))


@dataclass(frozen=True)
class RepeatSpread:
    """How a benchmark's repeats spread: what planning repeats needs (``sample_size``)."""

    repeats: int  # the median number of scored rollouts per task
    within_task_variance: float | None  # the mean over tasks of their rollouts' sample variance; None: 1 repeat


def repeat_spread(rollouts: RolloutSet, only: frozenset[TaskRollout] | None = None) -> RepeatSpread | None:
    """The spread of scores between a task's repeats, over the tasks with at least two; None when
    no task is scored."""
    by_task = _scores_by_task(rollouts, only)
    if not by_task:
        return None
    counts = sorted(len(values) for values in by_task.values())
    variances = [statistics.variance(values) for values in by_task.values() if len(values) > 1]
    return RepeatSpread(counts[len(counts) // 2], math.fsum(variances) / len(variances) if variances else None)


def _scores_by_task(rollouts: RolloutSet, only: frozenset[TaskRollout] | None) -> dict[int, list[float]]:
    by_task: dict[int, list[float]] = defaultdict(list)
    for (task, rollout), value in rollouts.rewards.items():
        if only is None or (task, rollout) in only:
            by_task[task].append(value)
    return by_task


def per_task_means(rollouts: RolloutSet, only: frozenset[TaskRollout] | None = None) -> dict[int, float]:
    """Each task's metric averaged over its rollouts that have one, ordered by task index; with
    ``only``, over those of its pairs only (the expected ones: rows of other inputs mixed in are
    not this run's).

    Tasks are the unit of comparison (repeats of one task are not independent samples).
    ``math.fsum`` makes the mean independent of row order, so two runs with the same per-rollout
    scores written in a different order get bit-identical task means and count as unchanged.
    """
    by_task = _scores_by_task(rollouts, only)
    return {task: math.fsum(values) / len(values) for task, values in sorted(by_task.items())}


def _group_of(task: int, row: Mapping[str, Any], group_key: str) -> dict[int, str]:
    """{task: its group} from a row: the projection's ``GROUP_KEY``, or the field itself in a whole
    row; {} when the row has no scalar there."""
    value = row[facts.GROUP_KEY] if facts.GROUP_KEY in row else _field(row, group_key)
    if isinstance(value, (str, bool, int, float)):
        return {task: str(value)[: facts.GROUP_VALUE_MAX]}
    return {}


def _field(row: Mapping[str, Any], name: str) -> Any:
    if name in row or "." not in name:
        return row.get(name)
    node: Any = row
    for part in name.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return None
        node = node[part]
    return node


def _metric_value(row: Mapping[str, Any], metric: str) -> float | NoScore:
    if metric in row:
        return as_score(row[metric])
    if "." not in metric:
        return NoScore.ABSENT
    node: Any = row
    for part in metric.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return NoScore.ABSENT
        node = node[part]
    return as_score(node)


def as_score(value: Any) -> float | NoScore:
    """A metric value as a score (a bool counts 0/1), or why it is none."""
    if isinstance(value, bool):
        return float(value)
    if not isinstance(value, (int, float)):
        return NoScore.NOT_A_NUMBER
    try:
        score = float(value)
    except OverflowError:  # an integer beyond float range: no score a mean can use
        return NoScore.NOT_FINITE
    return score if math.isfinite(score) else NoScore.NOT_FINITE
