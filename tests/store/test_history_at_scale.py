"""The history of one training run at the scale users keep it: 120 real-shaped run directories (a
watch, then three sweeps, of 40 checkpoints x 30 benchmarks) imported by two shells at once into
the real PostgreSQL server, four of them ended by a resubmit. One benchmark drops 0.05 at one
checkpoint and stays down; ``gym eval history`` flags that drop and nothing else among the 1,170 pairs it tests, and
names the best checkpoints.

The simulation (seeded): every checkpoint has an ability per benchmark, rising slowly with its
step; a task passes when the ability exceeds its difficulty, and each evaluation flips 1% of the
outcomes at random (the noise that makes two evaluations of one checkpoint differ). The planted
benchmark has 1,000 tasks (a 0.05 drop is 50 of them); the others 40."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import text
from store_runs import run_directory

from nemo_gym.orchestration.cli.main import main
from nemo_gym.orchestration.store import open_store

CKPT = "/ckpt/run-a"
CHECKPOINTS = 40
BENCHMARKS = [f"bench-{b:02d}" for b in range(30)]
PLANTED, PLANTED_AT, DROP = "bench-07", 23, 0.05
WATCH = "gym-sweep-20261130T000000Z-a00001"
SWEEPS = ("gym-sweep-20261201T000000Z-5eeb01", "gym-sweep-20261201T000000Z-5eeb02", "gym-sweep-20261202T000000Z-5eeb03")
# Who evaluated which checkpoints, in the order they were submitted: the watch as each checkpoint
# appeared, then a sweep of the first half, one of the second, and one of all 40 again.
EVALUATIONS = [(WATCH, range(40)), (SWEEPS[0], range(20)), (SWEEPS[1], range(20, 40)), (SWEEPS[2], range(40))]
# Runs whose first jobs failed half-way and which gym eval resubmit ended (by their number, 1-based):
# three of the watch's, one of the last sweep's (the planted checkpoint's: its cell is this attempt's).
RESUBMITTED = {6, 18, 32, 80 + 1 + PLANTED_AT}


def step(checkpoint: int) -> int:
    return 100 * (checkpoint + 1)


def ability(benchmark: str, checkpoint: int) -> float:
    base = 0.3 + 0.015 * BENCHMARKS.index(benchmark) + 0.004 * checkpoint
    return base - (DROP if benchmark == PLANTED and checkpoint >= PLANTED_AT else 0.0)


def evaluated(rng: random.Random, difficulty: dict[str, list[float]], checkpoint: int) -> dict[str, list[float]]:
    """One evaluation of a checkpoint: each task's pass or fail, 1% of them flipped."""
    scores = {}
    for benchmark, tasks in difficulty.items():
        level = ability(benchmark, checkpoint)
        scores[benchmark] = [float((u < level) != (rng.random() < 0.01)) for u in tasks]
    return scores


def training_run(where: Path) -> list[Path]:
    rng = random.Random(20261206)
    difficulty = {b: [rng.random() for _ in range(1000 if b == PLANTED else 40)] for b in BENCHMARKS}
    where.mkdir()
    runs = []
    for sweep_id, checkpoints in EVALUATIONS:
        for checkpoint in checkpoints:
            scores = evaluated(rng, difficulty, checkpoint)
            model = f"{CKPT}/step-{step(checkpoint)}"
            number = len(runs) + 1
            runs.append(
                run_directory(where, number, scores, model=model, sweep_id=sweep_id, resubmitted=number in RESUBMITTED)
            )
    return runs


# The team's store: two users' shells importing at once (SQLite's two writers: test_history.py).
@pytest.mark.parametrize("store_url", ["postgresql"], indirect=True)
def test_120_runs_of_one_training_run_flag_the_planted_drop_and_nothing_else(store_url, tmp_path, capsys) -> None:
    runs = [str(run) for run in training_run(tmp_path / "runs")]
    assert len(runs) == 120
    command = [sys.executable, "-m", "nemo_gym.orchestration.cli.main", "eval", "history", "import"]
    shells = [
        subprocess.Popen(
            [*command, *part, "--results-url", store_url], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for part in (runs[:80], runs[40:])
    ]
    for shell in shells:
        out, err = shell.communicate(timeout=900)
        assert (shell.returncode, err) == (0, ""), err
        assert out.splitlines()[-1].startswith(f"{80 * 30} entries written to ")
    store = open_store(store_url)
    with store.engine.connect() as conn:
        rows = conn.execute(text("SELECT count(*) FROM entries")).scalar()
        keys = conn.execute(
            text("SELECT count(*) FROM (SELECT DISTINCT run_id, benchmark, attempt FROM entries) k")
        ).scalar()
        second = conn.execute(text("SELECT DISTINCT run_id FROM entries WHERE attempt = 2")).scalars().all()
    store.close()
    assert rows == keys == 120 * 30
    assert sorted(second) == sorted(Path(runs[n - 1]).name for n in RESUBMITTED)  # at the attempt that ended them

    assert main(["eval", "history", "--results-url", store_url, "--model-prefix", CKPT]) == 0
    lines = capsys.readouterr().out.splitlines()
    series = [line.split() for line in lines if line.startswith(f"{CKPT}/step-")]
    assert [row[1] for row in series] == [str(step(c)) for c in range(CHECKPOINTS)]
    assert all(len(row) == 2 + len(BENCHMARKS) + 1 for row in series)  # a cell for every benchmark, and SUITE
    assert f"best over the suite: {CKPT}/step-{step(CHECKPOINTS - 1)} (mean 0.6495)" in lines
    found = lines[lines.index(next(line for line in lines if line.startswith("regressions"))) + 1 :]
    assert [line.split(":")[0].strip() for line in found if line.strip()] == [
        f"{PLANTED} at {CKPT}/step-{step(PLANTED_AT)}"
    ]

    assert main(["eval", "history", "--results-url", store_url, "--model-prefix", CKPT, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    [flagged] = doc["regressions"]
    assert (flagged["benchmark"], flagged["step"], flagged["against_step"]) == (
        PLANTED,
        step(PLANTED_AT),
        step(PLANTED_AT - 1),
    )
    assert flagged["family"] == 40 * 30 - 30 and flagged["adjusted_p"] < 0.05
    # The newest evaluation is each cell's: the last sweep's, never the watch's of the same checkpoint.
    assert {c["runs"][PLANTED] for c in doc["checkpoints"]} == {Path(run).name for run in runs[80:]}
