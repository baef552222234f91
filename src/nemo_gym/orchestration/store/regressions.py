"""Regressions over a history's series (pure): each checkpoint, benchmark by benchmark, against
the checkpoint before it (the latest earlier one with every sample written), paired over the
per-task scores the store keeps (``stats.paired_comparison``, as ``gym eval compare`` pairs two
runs). Every pair tested over the whole history is judged as one family (Holm's correction by
default): any false alarm over the whole history is at most alpha. A regression is a drop whose
adjusted p is below alpha; the first checkpoint flagged is where a benchmark started to regress.

Not the best checkpoint before it: that one is picked on the very scores it is then compared
with, so a later checkpoint as good reads as a drop. Nor one family per checkpoint: over 100
checkpoints that lets about five false alarms through. In 60 seeded histories of 40 checkpoints x
30 benchmarks with no drop at all, both together flagged something in 60; against the best before
with one family, 15; as here, 2 (tests/unit/test_regression_rates.py).

Beside them, how small a drop the pairs tested could have shown
(``PairedComparison.detectable_drop`` at the family's level, as compare's DETECTABLE), so "none
flagged" says what it could have seen."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from nemo_gym.orchestration.stats import (
    DEFAULT_POWER,
    Correction,
    PairedComparison,
    adjust,
    family_alpha,
    paired_comparison,
)
from nemo_gym.orchestration.store.history import Checkpoint, Leaderboard

DEFAULT_ALPHA = 0.05


@dataclass(frozen=True)
class Regression:
    benchmark: str
    checkpoint: Checkpoint
    against: Checkpoint  # the checkpoint before it on this benchmark
    delta: float
    p_value: float
    adjusted_p: float
    family: int  # the pairs judged together: every one the history tested

    def as_dict(self) -> dict[str, Any]:
        return {
            "benchmark": self.benchmark,
            "model": self.checkpoint.model,
            "step": self.checkpoint.step,
            "against_model": self.against.model,
            "against_step": self.against.step,
            "time": self.checkpoint.time_text or None,
            "against_time": self.against.time_text or None,
            "delta": self.delta,
            "p_value": self.p_value,
            "adjusted_p": self.adjusted_p,
            "family": self.family,
        }


@dataclass(frozen=True)
class Detectable:
    """How small a drop the pairs tested could show, each with probability ``DEFAULT_POWER`` at its
    checkpoint's family level: the largest of these (a drop that big would be seen on every pair)
    and the smallest (the most sensitive pair, named)."""

    every_pair: float
    smallest: float
    benchmark: str  # the most sensitive pair's benchmark, and its checkpoint
    checkpoint: Checkpoint
    pairs: int
    power: float = DEFAULT_POWER

    def as_dict(self) -> dict[str, Any]:
        return {
            "every_pair": self.every_pair,
            "smallest": self.smallest,
            "smallest_benchmark": self.benchmark,
            "smallest_model": self.checkpoint.model,
            "pairs": self.pairs,
            "power": self.power,
        }


@dataclass(frozen=True)
class Judged:
    regressions: list[Regression]
    detectable: Detectable | None  # None: no checkpoint had one before it to pair with


@dataclass(frozen=True)
class _Tested:
    benchmark: str
    against: Checkpoint
    paired: PairedComparison

    @property
    def delta(self) -> float:
        return self.paired.delta or 0.0

    @property
    def p_value(self) -> float:
        return self.paired.p_value if self.paired.p_value is not None else 1.0


def regressions(
    board: Leaderboard, alpha: float = DEFAULT_ALPHA, correction: Correction = Correction.HOLM
) -> list[Regression]:
    """Every regression of the series, in series order, then by benchmark."""
    return judge(board, alpha, correction).regressions


def judge(board: Leaderboard, alpha: float = DEFAULT_ALPHA, correction: Correction = Correction.HOLM) -> Judged:
    """The regressions of the series (in series order, then by benchmark), and how small a drop its
    pairs could have shown, every pair of the history judged as one family."""
    tested = [
        (checkpoint, t)
        for i, checkpoint in enumerate(board.checkpoints)
        for b in board.benchmarks
        if (t := _tested(board.checkpoints[:i], checkpoint, b, alpha))
    ]
    adjusted = adjust([t.p_value for _, t in tested], correction)
    found = [
        Regression(t.benchmark, checkpoint, t.against, t.delta, t.p_value, p, len(tested))
        for (checkpoint, t), p in zip(tested, adjusted)
        if t.delta < 0 and p < alpha
    ]
    level = family_alpha(alpha, len(tested), correction)
    drops = [(d, t.benchmark, c) for c, t in tested if (d := t.paired.detectable_drop(level)) is not None]
    if not drops:
        return Judged(found, None)
    smallest = min(drops, key=lambda d: d[0])
    return Judged(found, Detectable(max(d[0] for d in drops), smallest[0], smallest[1], smallest[2], len(drops)))


def _tested(earlier: list[Checkpoint], checkpoint: Checkpoint, benchmark: str, alpha: float) -> _Tested | None:
    """``checkpoint`` against the one before it on ``benchmark``; None when there is nothing to
    pair (no earlier value, no common task, or the two were asked different tasks), or either side
    did not write every sample (its missing tasks would read as a drop, or hide one)."""
    entry = checkpoint.cells.get(benchmark)
    scored = [c for c in earlier if c.complete_value(benchmark) is not None]
    if entry is None or entry.partial or not entry.task_scores or not scored:
        return None
    before = scored[-1]
    base = before.cells[benchmark]
    if base.inputs_digest and entry.inputs_digest and base.inputs_digest != entry.inputs_digest:
        return None
    paired = paired_comparison(base.task_scores, entry.task_scores, alpha=alpha)
    if paired.p_value is None or paired.delta is None:
        return None
    return _Tested(benchmark, before, paired)
