"""A checkpoint sweep three ways, in one run: one deployment per checkpoint (per_benchmark), one
warm lane (job.deployment: reload) and one restart lane (reload where the weights cannot be
switched in place: here no served_model_name, so each checkpoint is served under its own path),
with the real vLLM CPU server and the real gym driver over scripts/setup-envs' tiny-judge
checkpoints (step-0, step-30, step-80), at temperature 0.

    .venv/bin/python benchmarks/warm_lanes.py [--slurm]

Prints, for each way: allocation-seconds (the sum over the sweep's jobs of job end - job start,
from the jobs' own event files: what a cluster bills), vLLM starts (the policy step launched),
jobs submitted, wall time and each checkpoint's reward; then the ratios of allocation-seconds and
whether the rewards agree checkpoint by checkpoint. On this machine local jobs take turns and
queue for nothing, so a restart lane's gain (no queue wait between checkpoints, one submission)
shows only in its jobs; its allocation is about the per-checkpoint one's. Needs scripts/setup-envs (and
scripts/local-slurm up for --slurm).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ENVS = Path(os.environ.get("GYM_ENVS_DIR", Path.home() / ".cache" / "gym-orchestration" / "envs"))
TEMPERATURE_0 = "++driver.benchmarks.answer-judge.run.responses_create_params.temperature=0.0"
WAYS = {
    "per_benchmark": ("++job.deployment=per_benchmark",),
    "reload": ("++job.deployment=reload",),
    "restart-lane": ("++job.deployment=reload", "~services.policy.served_model_name"),
}
POLICY_LAUNCHED = re.compile(r"launched policy(\.turn\d+)?")  # the first turn's step, or a later turn's


def gym(*args: str, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([str(REPO / ".venv" / "bin" / "gym"), "eval", *args], capture_output=True, text=True, env=env)


def events(path: Path) -> list[tuple[float, str]]:
    return [
        (float(line.split(" ", 1)[0]), line.split(" ", 1)[1]) for line in path.read_text().splitlines() if " " in line
    ]


def _ended(path: Path, timeout: float = 120) -> list[tuple[float, str]]:
    """A job's events once it has ended (its runs read final a moment before it stops its services)."""
    deadline = time.monotonic() + timeout
    while True:
        seen = events(path) if path.exists() else []
        if any(name.startswith("job-end") for _, name in seen) or time.monotonic() > deadline:
            return seen
        time.sleep(0.5)


def checkpoints() -> list[str]:
    root = ENVS / "models" / "tiny-judge"
    found = sorted(root.glob("step-*"), key=lambda p: int(p.name.split("-")[1]))
    if len(found) < 2:
        sys.exit(f"no checkpoints under {root}: run scripts/setup-envs")
    return [str(p) for p in found]


def sweep(way: str, slurm: bool, env: dict) -> dict:
    config = REPO / "examples" / ("quickstart-slurm.yaml" if slurm else "quickstart.yaml")
    models = ",".join(checkpoints())
    start = time.time()
    proc = gym("submit", "-c", str(config), "--json", "-m", f"services.policy.model={models}",
               *WAYS[way], TEMPERATURE_0, env=env)  # fmt: skip
    if proc.returncode != 0:
        sys.exit(proc.stderr)
    submitted = json.loads(proc.stdout)
    gym("status", submitted["sweep_id"], "--watch", "--interval", "1", env=env)
    wall = time.time() - start
    jobs = _job_dirs(submitted["records"])
    alloc, starts = 0.0, 0
    for job_id, job_dir in jobs.items():
        seen = _ended(job_dir / ".gym" / job_id / "events")
        stamps = {name.split(" ")[0]: t for t, name in seen}
        alloc += stamps["job-end"] - stamps["job-start"]
        starts += sum(1 for _, name in seen if POLICY_LAUNCHED.fullmatch(name))
    results = json.loads(gym("results", submitted["sweep_id"], "--json", env=env).stdout or "{}")
    return {"alloc": alloc, "wall": wall, "starts": starts, "jobs": len(jobs), "rewards": _rewards(results, submitted)}


def _job_dirs(records: list[dict]) -> dict[str, Path]:
    """Each job the sweep queued -> the directory its events are in (a shared job's own)."""
    found: dict[str, Path] = {}
    for record in records:
        for bench in record["benchmarks"]:
            host = record.get("deployment_host")
            if host:
                found[bench["job_id"]] = Path(record["run_dir"]).parent / host / "shared-deployment"
            else:
                found[bench["job_id"]] = Path(bench["job_dir"])
    return found


def _rewards(results: dict, submitted: dict) -> dict[str, float | None]:
    """Checkpoint name -> its answer-judge mean reward, from gym eval results --json."""
    model_of = {r["gym_job_id"]: Path(r["model"]).name for r in submitted["records"]}
    out: dict[str, float | None] = {}
    for run in results.get("runs", []):
        for bench in run.get("benchmarks", []):
            out[model_of.get(run.get("run", ""), "?")] = bench.get("value")
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--slurm", action="store_true")
    args = parser.parse_args()
    env = {**os.environ, "GYM_ENVS_DIR": str(ENVS), "GYM_RUNS_DIR": "/tmp/gym-bench-lanes"}
    rows = {way: sweep(way, args.slurm, env) for way in WAYS}
    print(
        f"{len(checkpoints())} tiny-judge checkpoints, answer-judge at temperature 0, {'slurm' if args.slurm else 'local'}"
    )
    print(f"  {'deployment':<14} {'allocation-s':>13} {'vLLM starts':>12} {'jobs':>5} {'wall-s':>8}  rewards")
    for mode, row in rows.items():
        rewards = ", ".join(f"{k} {v}" for k, v in sorted(row["rewards"].items()))
        print(f"  {mode:<14} {row['alloc']:13.1f} {row['starts']:12d} {row['jobs']:5d} {row['wall']:8.1f}  {rewards}")
    for way in ("reload", "restart-lane"):
        print(f"  {way} / per_benchmark allocation: {rows[way]['alloc'] / rows['per_benchmark']['alloc']:.2f}")
    same = all(rows[way]["rewards"] == rows["per_benchmark"]["rewards"] for way in ("reload", "restart-lane"))
    print(f"  rewards equal checkpoint by checkpoint, every way: {'yes' if same else 'NO'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
