"""Seeded simulations of a history's regressions (``store.regressions``): with no drop anywhere,
few histories flag anything (every pair of the history one family, each checkpoint against the
one before it, so no reference is picked on the scores it is compared with); a drop at one step
is found where it is, and the line about how small a drop could be seen says the truth."""

from __future__ import annotations

import random
import sys
from pathlib import Path

from nemo_gym.orchestration.store.history import Leaderboard, leaderboard
from nemo_gym.orchestration.store.regressions import judge

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "view"))
from history_store import entry  # noqa: E402


def history(
    seed: int, checkpoints: int, benchmarks: int, tasks: int, repeats: int, drop: tuple[int, int, float] | None = None
) -> Leaderboard:
    """Each task passed with probability 0.6 by every checkpoint (``repeats`` rollouts, the task's
    score their mean); ``drop`` (checkpoint, benchmark, by): that one's probability lowered."""
    rng = random.Random(seed)
    entries = []
    for c in range(checkpoints):
        for b in range(benchmarks):
            level = 0.6 - (drop[2] if drop is not None and drop[:2] == (c, b) else 0.0)
            scores = [sum(rng.random() < level for _ in range(repeats)) / repeats for _ in range(tasks)]
            step = 100 * (c + 1)
            entries.append(entry(c + 1, f"bench-{b:02d}", scores, model=f"/ckpt/run-a/step-{step}", step=step))
    return leaderboard(entries)


def test_histories_without_a_drop_rarely_flag_one() -> None:
    """40 histories of 40 checkpoints x 30 benchmarks (1,170 pairs each), no drop: at most alpha
    of them may flag anything (5 %: 2 expected; 4 allowed for the draw). Against the best before
    with a family per checkpoint, every one of them flagged something."""
    flagged = [seed for seed in range(40) if judge(history(seed, 40, 30, 50, 4)).regressions]
    assert len(flagged) <= 4, flagged


def test_a_drop_of_a_tenth_at_one_step_is_found_there_and_the_detectable_drop_is_below_it() -> None:
    for seed in range(3):
        judged = judge(history(100 + seed, 40, 30, 200, 16, drop=(20, 7, 0.1)))
        found = [(r.checkpoint.step, r.benchmark, r.against.step) for r in judged.regressions]
        assert (2100, "bench-07", 2000) in found, found
        assert judged.detectable is not None and judged.detectable.every_pair < 0.1
        assert judged.regressions[0].family == 39 * 30
