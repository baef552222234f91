"""A results store filled with entries shaped as ``gym eval history import`` writes them: a training
run's checkpoints (``/ckpt/<run>/step-N``) x benchmarks, each entry with its per-task scores, for the
history page's tests and ``benchmarks/history_view.py``."""

from __future__ import annotations

import random
from collections.abc import Callable

from nemo_gym.orchestration.store import Entry, open_store

Scores = Callable[[int, int], list[float]]  # (checkpoint, benchmark) -> each task's reward


def entry(
    checkpoint: int, benchmark: str, scores: list[float], *, model: str, step: int, sweep_id: str | None = None
) -> Entry:
    """Checkpoint ``checkpoint``'s ``benchmark``: its run (one per checkpoint), each task's reward."""
    run_id = (
        f"gym-job-20261201T{checkpoint // 3600:02d}{checkpoint // 60 % 60:02d}{checkpoint % 60:02d}Z-{checkpoint:06x}"
    )
    return Entry(
        run_id=run_id,
        benchmark=benchmark,
        attempt=1,
        submitted_at=f"2026-12-01T{checkpoint // 3600:02d}:{checkpoint // 60 % 60:02d}:{checkpoint % 60:02d}Z",
        state="succeeded",
        samples=len(scores),
        metric="reward",
        sweep_id=sweep_id,
        model=model,
        step=step,
        complete=True,
        expected_samples=len(scores),
        value=sum(scores) / len(scores),
        task_scores=dict(enumerate(scores)),
        inputs_digest=f"sha256:{benchmark}",
    )


def fill(url: str, entries: list[Entry]) -> int:
    store = open_store(url)
    try:
        return store.write(entries)
    finally:
        store.close()


def training_run(
    checkpoints: int, benchmarks: int, tasks: int, *, seed: int = 0, planted: tuple[int, int] | None = None
) -> list[Entry]:
    """``checkpoints`` x ``benchmarks`` of one training run (steps 100, 200, ...), each task passed
    with a probability that rises slowly over the steps; ``planted`` (checkpoint, benchmark): that
    benchmark fails every task at that checkpoint (a regression no correction misses)."""
    rng = random.Random(seed)
    found = []
    for c in range(checkpoints):
        for b in range(benchmarks):
            level = 0.5 + 0.2 * c / max(1, checkpoints - 1)
            scores = [0.0] * tasks if planted == (c, b) else [float(rng.random() < level) for _ in range(tasks)]
            found.append(
                entry(c + 1, f"bench-{b:02d}", scores, model=f"/ckpt/run-a/step-{100 * (c + 1)}", step=100 * (c + 1))
            )
    return found
