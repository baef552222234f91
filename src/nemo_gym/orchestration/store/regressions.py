"""Regressions over a history's series (pure): each checkpoint, benchmark by benchmark, against
the best checkpoint before it, paired over the per-task scores the store keeps
(``stats.paired_comparison``, as ``gym eval compare`` pairs two runs). A checkpoint's benchmarks
are judged as one family, as compare judges a comparison's (Holm's correction by default: any
false alarm over the suite at most alpha); a regression is a drop whose adjusted p is below alpha."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from nemo_gym.orchestration.stats import Correction, adjust, paired_comparison
from nemo_gym.orchestration.store.history import Checkpoint, Leaderboard

DEFAULT_ALPHA = 0.05


@dataclass(frozen=True)
class Regression:
    benchmark: str
    checkpoint: Checkpoint
    against: Checkpoint  # the best checkpoint before it on this benchmark
    delta: float
    p_value: float
    adjusted_p: float
    family: int  # the benchmarks judged together at this checkpoint

    def as_dict(self) -> dict[str, Any]:
        return {
            "benchmark": self.benchmark,
            "model": self.checkpoint.model,
            "step": self.checkpoint.step,
            "against_model": self.against.model,
            "against_step": self.against.step,
            "delta": self.delta,
            "p_value": self.p_value,
            "adjusted_p": self.adjusted_p,
            "family": self.family,
        }


@dataclass(frozen=True)
class _Tested:
    benchmark: str
    against: Checkpoint
    delta: float
    p_value: float


def regressions(
    board: Leaderboard, alpha: float = DEFAULT_ALPHA, correction: Correction = Correction.HOLM
) -> list[Regression]:
    """Every regression of the series, in step order, then by benchmark."""
    found = []
    for i, checkpoint in enumerate(board.checkpoints):
        tested = [t for b in board.benchmarks if (t := _tested(board.checkpoints[:i], checkpoint, b, alpha))]
        adjusted = adjust([t.p_value for t in tested], correction)
        found += [
            Regression(t.benchmark, checkpoint, t.against, t.delta, t.p_value, p, len(tested))
            for t, p in zip(tested, adjusted)
            if t.delta < 0 and p < alpha
        ]
    return found


def _tested(earlier: list[Checkpoint], checkpoint: Checkpoint, benchmark: str, alpha: float) -> _Tested | None:
    """``checkpoint`` against the best before it on ``benchmark``; None when there is nothing to
    pair (no earlier value, no common task, or the two were asked different tasks)."""
    entry = checkpoint.cells.get(benchmark)
    scored = [c for c in earlier if c.value(benchmark) is not None]
    if entry is None or not entry.task_scores or not scored:
        return None
    best = max(scored, key=lambda c: c.value(benchmark) or 0.0)
    base = best.cells[benchmark]
    if base.inputs_digest and entry.inputs_digest and base.inputs_digest != entry.inputs_digest:
        return None
    paired = paired_comparison(base.task_scores, entry.task_scores, alpha=alpha)
    if paired.p_value is None or paired.delta is None:
        return None
    return _Tested(benchmark, best, paired.delta, paired.p_value)
