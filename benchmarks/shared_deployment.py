"""Allocation-seconds for N benchmarks with the real quickstart model: one deployment per
benchmark (upstream's way) vs one shared deployment (job.deployment: shared).

    .venv/bin/python benchmarks/shared_deployment.py [--benchmarks 5] [--slurm]

Each benchmark is the quickstart's answer-judge run (real vLLM CPU server, real gym driver).
Allocation-seconds = the sum over jobs of (job end - job start), from the jobs' event files:
what the cluster would bill. Needs scripts/setup-envs (and scripts/local-slurm up for --slurm).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ENVS = Path(os.environ.get("GYM_ENVS_DIR", Path.home() / ".cache" / "gym-orchestration" / "envs"))


def gym(*args: str, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([str(REPO / ".venv" / "bin" / "gym"), "eval", *args], capture_output=True, text=True, env=env)


def events(path: Path) -> dict[str, float]:
    out: dict[str, float] = {}
    for line in path.read_text().splitlines():
        stamp, name = line.split(" ", 1)
        out.setdefault(name.split(" ")[0], float(stamp))
    return out


def run(mode: str, n: int, slurm: bool, env: dict) -> tuple[float, float, int]:
    config = REPO / "examples" / ("quickstart-slurm.yaml" if slurm else "quickstart.yaml")
    overrides = [
        f"+driver.benchmarks.answer-judge-{i}={{run: ${{driver.benchmarks.answer-judge.run}}}}" for i in range(2, n + 1)
    ]
    overrides += [f"+job.deployment={mode}"]
    start = time.time()
    proc = gym("submit", "-c", str(config), "--json", *overrides, env=env)
    if proc.returncode != 0:
        sys.exit(proc.stderr)
    record = json.loads(proc.stdout)
    gym("status", record["gym_job_id"], "--watch", "--json", "--interval", "1", env=env)
    wall = time.time() - start
    job_dirs = {b["job_id"]: Path(b["job_dir"]) for b in record["benchmarks"]}
    if mode == "shared":
        job_dirs = {jid: Path(record["run_dir"]) / "shared-deployment" for jid in job_dirs}
    alloc = 0.0
    for jid, d in job_dirs.items():
        ev = events(d / ".gym" / jid / "events")
        alloc += ev["job-end"] - ev["job-start"]
    status = json.loads(gym("status", record["gym_job_id"], "--json", env=env).stdout)
    ok = sum(1 for j in status["jobs"] if j["state"] == "succeeded")
    return alloc, wall, ok


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--benchmarks", type=int, default=5)
    parser.add_argument("--slurm", action="store_true")
    args = parser.parse_args()
    env = {**os.environ, "GYM_ENVS_DIR": str(ENVS), "GYM_RUNS_DIR": "/tmp/gym-bench-shared"}
    rows = []
    for mode in ("per_benchmark", "shared"):
        alloc, wall, ok = run(mode, args.benchmarks, args.slurm, env)
        rows.append((mode, alloc, wall, ok))
    print(f"{args.benchmarks} answer-judge benchmarks, real tiny model, {'slurm' if args.slurm else 'local'}")
    print(f"  {'deployment':<14} {'allocation-s':>13} {'wall-s':>8} {'succeeded':>10}")
    for mode, alloc, wall, ok in rows:
        print(f"  {mode:<14} {alloc:13.1f} {wall:8.1f} {ok:>6}/{args.benchmarks}")
    print(f"  shared / per_benchmark allocation: {rows[1][1] / rows[0][1]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
