"""Real results shaped like a checkpoint sweep: the quickstart's NeMo Gym run (tests/data/quickstart-run)
copied to three directories, with rewards changed and, in the last, rows removed."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from nemo_gym.orchestration import contract

REAL_RUN = Path(__file__).resolve().parent / "data" / "quickstart-run"
BENCH = "answer-judge"


def checkpoint_runs(tmp_path: Path) -> list[Path]:
    """step-1000 (reward 0), step-2000 (tasks 0-5 score 1), step-3000 (0-8 score 1, tasks 9-11 missing)."""
    dirs = []
    for step, scored, dropped in ((1000, 0, ()), (2000, 6, ()), (3000, 9, (9, 10, 11))):
        run_dir = tmp_path / f"step-{step}"
        shutil.copytree(REAL_RUN, run_dir)
        rollouts = run_dir / BENCH / contract.ROLLOUTS_FILE
        rows = [json.loads(line) for line in rollouts.read_text().splitlines()]
        rows = [
            {**r, "reward": 1.0 if r["_ng_task_index"] < scored else r["reward"]}
            for r in rows
            if r["_ng_task_index"] not in dropped
        ]
        rollouts.write_text("".join(json.dumps(r) + "\n" for r in rows))
        dirs.append(run_dir)
    return dirs
