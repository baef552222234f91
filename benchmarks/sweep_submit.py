"""Submitting a sweep over ssh: one `gym eval submit -m` of N runs x 2 benchmarks against the same
N runs submitted one `gym eval submit` at a time, to the loopback sshd (scripts/local-sshd) and the
local Slurm cluster; then `gym eval status` of the sweep against one `status` per run, and the
sweep's `results` and `cancel` (each two scripts over one connection, however many runs). Counts
round trips (ssh master connections + commands sent, recorded by an `ssh` first on PATH) and wall
time; the jobs are held (--begin=now+1hour) and cancelled at once.

    eval "$(scripts/local-slurm env)"; eval "$(scripts/local-sshd env)"
    .venv/bin/python benchmarks/sweep_submit.py [--runs 3,10] [--repeats 3]
    .venv/bin/python benchmarks/sweep_submit.py --runs 1,300 --repeats 1 --no-separate   # the issue's scale
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
STANDINS = REPO / "tests" / "standins"
GYM = [sys.executable, "-m", "nemo_gym.orchestration.cli.main", "eval"]


def config(work: Path, host: str) -> Path:
    path_env = f"lit:{STANDINS}:/usr/local/bin:/usr/bin:/bin"
    data = {
        "services": {
            "policy": {"type": "vllm", "container": "standin:latest", "model": "/m/step-0", "env": {"PATH": path_env}}
        },
        "compute": {
            "cluster": {
                "type": "slurm",
                "account": "acct",
                "hostname": host,
                "extra_args": {"begin": "now+1hour"},
                "node_pools": {"gpu": {"partition": "debug", "gpus_per_node": 4}},
            }
        },
        "driver": {"policy_model": "policy", "env": {"PATH": path_env}, "benchmarks": {"math": {}, "code": {}}},
        "job": {"output_path": str(work / "runs")},
        "otel": {"enabled": False},
    }
    path = work / "sweep.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def ssh_shim(work: Path, log: Path) -> Path:
    shim = work / "shim"
    shim.mkdir(exist_ok=True)
    (shim / "ssh").write_text(f'#!/bin/bash\nprintf "%s\\n" "$*" >>{log}\nexec /usr/bin/ssh "$@"\n')
    (shim / "ssh").chmod(0o755)
    return shim


def gym(args: list[str], env: dict[str, str], log: Path, json_out: bool = True, ok=(0,)) -> tuple[float, int, dict]:
    """(seconds, round trips, --json output) of one `gym eval` command."""
    log.write_text("")
    start = time.monotonic()
    proc = subprocess.run([*GYM, *args, *(["--json"] if json_out else [])], capture_output=True, text=True, env=env)
    elapsed = time.monotonic() - start
    if proc.returncode not in ok:
        raise SystemExit(f"gym eval {args[0]} failed: {proc.stderr.strip()}")
    calls = log.read_text().splitlines()
    trips = sum("ControlMaster=yes" in c for c in calls) + sum("ControlMaster=no" in c for c in calls)
    return elapsed, trips, json.loads(proc.stdout) if json_out else {}


def submit(args: list[str], env: dict[str, str], log: Path) -> tuple[float, int, list[str], list[str]]:
    """(seconds, round trips, job ids, run ids) of one `gym eval submit`."""
    elapsed, trips, doc = gym(["submit", *args], env, log)
    records = doc.get("records", [doc])
    ids = [b["job_id"] for r in records for b in r["benchmarks"] if b["job_id"]]
    return elapsed, trips, ids, [r["gym_job_id"] for r in records]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", default="3,10", help="sweep sizes (runs; each of 2 benchmarks)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--no-separate", action="store_true", help="skip the run-by-run submits and statuses (slow for big sweeps)"
    )
    args = parser.parse_args()
    host, ssh_config = os.environ.get("GYM_TEST_SSH_HOST"), os.environ.get("GYM_TEST_SSH_CONFIG")
    if not host or not ssh_config:
        raise SystemExit('needs the loopback sshd: eval "$(scripts/local-sshd env)"')
    with tempfile.TemporaryDirectory(prefix="gym-sweep-bench-") as tmp:
        work = Path(tmp)
        log = work / "ssh.log"
        env = {
            **os.environ,
            "PATH": f"{ssh_shim(work, log)}:{os.environ['PATH']}",
            "GYM_SSH_OPTIONS": f"-F {ssh_config}",
            "XDG_CACHE_HOME": str(work / "cache"),
        }
        cfg = str(config(work, host))
        print(f"{'runs x 2 benchmarks':<22}{'how':<26}{'round trips':>12}{'wall (s)':>10}{'vs the first size':>19}")
        first: dict[str, float] = {}
        for n in (int(x) for x in args.runs.split(",")):
            models = ",".join(f"/m/step-{1000 * (i + 1)}" for i in range(n))
            one, separate, status_sweep, status_each, results_sweep, cancel_sweep = [], [], [], [], [], []
            for _ in range(args.repeats):
                elapsed, trips, ids, runs = submit(["-c", cfg, "-m", f"services.policy.model={models}"], env, log)
                one.append((elapsed, trips))
                status_sweep.append(gym(["status", "--last"], env, log)[:2])
                if not args.no_separate:
                    each = [gym(["status", run], env, log)[:2] for run in runs]
                    status_each.append((sum(t for t, _ in each), sum(k for _, k in each)))
                # Held jobs have no results yet: results says so and exits 1.
                results_sweep.append(gym(["results", "--last"], env, log, ok=(0, 1))[:2])
                cancel_sweep.append(gym(["cancel", "--last"], env, log, json_out=False)[:2])
                subprocess.run(["scancel", *ids], capture_output=True)
                if args.no_separate:
                    continue
                total_time, total_trips = 0.0, 0
                for i in range(n):
                    elapsed, trips, ids, _ = submit(
                        ["-c", cfg, f"services.policy.model=/m/step-{1000 * (i + 1)}"], env, log
                    )
                    total_time, total_trips = total_time + elapsed, total_trips + trips
                    subprocess.run(["scancel", *ids], capture_output=True)
                separate.append((total_time, total_trips))
            for how, found in (
                ("one submit -m", one),
                ("separate submits", separate),
                ("status of the sweep", status_sweep),
                ("separate statuses", status_each),
                ("results of the sweep", results_sweep),
                ("cancel of the sweep", cancel_sweep),
            ):
                if not found:
                    continue
                wall = statistics.median(t for t, _ in found)
                first.setdefault(how, wall)
                ratio = f"{wall / first[how]:.1f}x"
                print(f"{n:<22}{how:<26}{found[0][1]:>12}{wall:>10.2f}{ratio:>19}")


if __name__ == "__main__":
    main()
