"""How long `gym eval results` and `gym eval compare` take on a big run, and what crosses the wire.

Builds two run directories shaped like the real quickstart's (rows padded to the real rows'
size, ~6 KB: the conversation each row carries), TASKS tasks x REPEATS rollouts each, then times
the real CLI on them (local connection: bash and python3, as over SSH minus the network) and the
projection's output size against the files' size.

    .venv/bin/python benchmarks/compare_timing.py [--tasks 5000] [--repeats 4] [--row-bytes 6000]

A benchmark, not a test: its figures vary with the machine's load.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from nemo_gym.orchestration import contract  # noqa: E402
from nemo_gym.orchestration.record import run_in_directory  # noqa: E402
from nemo_gym.orchestration.results import results_script  # noqa: E402


def make_run(root: Path, name: str, tasks: int, repeats: int, row_bytes: int, p_correct: float) -> Path:
    run_dir = root / name
    job = run_dir / "bench"
    (job / "artifacts").mkdir(parents=True)
    (job / ".gym" / "local-1").mkdir(parents=True)
    (job / ".gym" / "local-1" / "state").write_text("phase=succeeded\ndetail=driver finished\n")
    (job / ".gym" / "local-1" / "events").write_text("1000 job-start\n4600 job-end 0\n")
    (job / "artifacts" / "rollouts_aggregate_metrics.json").write_text(
        json.dumps([{"key_metrics": {"mean/reward": 0}}])
    )
    record = {
        "gym_job_id": f"gym-job-{name}",
        "submitted_at": "2026-01-01T00:00:00Z",
        "run_dir": str(run_dir),
        "cluster": "c",
        "executor": "local",
        "submitted_by": "me",
        "schema_version": 1,
        "benchmarks": [{"benchmark": "bench", "job_dir": str(job), "job_id": "local-1", "gpus": 8}],
    }
    (run_dir / contract.RECORD_FILE).write_text(json.dumps(record))
    rng = random.Random(name)
    padding = "x" * max(0, row_bytes - 200)
    with open(job / contract.ROLLOUTS_FILE, "w") as out, open(job / contract.MATERIALIZED_INPUTS_FILE, "w") as exp:
        for t in range(tasks):
            for r in range(repeats):
                exp.write(
                    json.dumps({"problem": padding[: len(padding) // 2], "_ng_task_index": t, "_ng_rollout_index": r})
                    + "\n"
                )
                row = {
                    "responses_create_params": {"input": padding},
                    "reward": float(rng.random() < p_correct),
                    "_ng_task_index": t,
                    "_ng_rollout_index": r,
                    "agent_ref": {"name": "a"},
                }
                out.write(json.dumps(row) + "\n")
    return run_dir


def timed(*args: str, env: dict) -> tuple[float, subprocess.CompletedProcess]:
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "nemo_gym.orchestration.cli.main", "eval", *args],
        capture_output=True,
        text=True,
        env=env,
    )
    return time.perf_counter() - start, proc


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tasks", type=int, default=5000)
    parser.add_argument("--repeats", type=int, default=4)
    parser.add_argument("--row-bytes", type=int, default=6000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        env = {**os.environ, "XDG_CACHE_HOME": str(root / "cache"), "PYTHONPATH": str(REPO / "src")}
        base = make_run(root, "base", args.tasks, args.repeats, args.row_bytes, 0.50)
        candidate = make_run(root, "candidate", args.tasks, args.repeats, args.row_bytes, 0.52)
        files = base / "bench" / "artifacts"
        size = sum(f.stat().st_size for f in files.glob("rollouts*.jsonl"))
        script = results_script(run_in_directory(str(base)), "reward")
        projected = subprocess.run(["bash", "-s"], input=script, capture_output=True, text=True).stdout
        seconds, proc = timed("results", str(base), env=env)
        assert proc.returncode == 0, proc.stderr
        compare_seconds, proc = timed("compare", str(base), str(candidate), env=env)
        assert proc.returncode == 0, proc.stderr
        rows = args.tasks * args.repeats
        print(
            f"{args.tasks} tasks x {args.repeats} rollouts = {rows} rows of ~{args.row_bytes} B: "
            f"{size / 1e6:.0f} MB of rollout files per run"
        )
        print(f"sent back per run: {len(projected) / 1e6:.2f} MB ({size / max(1, len(projected)):.0f}x less)")
        print(f"gym eval results RUN:                 {seconds:.2f} s")
        print(f"gym eval compare BASE CANDIDATE:      {compare_seconds:.2f} s")
        print(proc.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
