"""Where the quickstart's time goes: submit -> model ready -> first rollout -> results.

Runs the real quickstart (vLLM CPU + the tiny model + NeMo Gym's answer-judge) once and prints
seconds from submit to each milestone, split into queueing, service start-up, health-check wait
(how long after the server first answered the job noticed), and driver time.

    .venv/bin/python benchmarks/quickstart_timing.py            # local compute
    .venv/bin/python benchmarks/quickstart_timing.py --slurm    # the local Slurm cluster

Needs scripts/setup-envs (and scripts/local-slurm up for --slurm). A benchmark, not a test:
its figures vary with the machine's load.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ENVS = Path(os.environ.get("GYM_ENVS_DIR", Path.home() / ".cache" / "gym-orchestration" / "envs"))


def gym(*args: str, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([str(REPO / ".venv" / "bin" / "gym"), "eval", *args], capture_output=True, text=True, env=env)


def events(job_dir: Path, job_id: str) -> dict[str, float]:
    path = job_dir / ".gym" / job_id / "events"
    out: dict[str, float] = {}
    for line in path.read_text().splitlines() if path.exists() else []:
        stamp, name = line.split(" ", 1)
        word = name.split(" ")[0]
        # "launched X"/"healthy X" name a service; others carry a status code after the name.
        out.setdefault(name if word in ("launched", "healthy") else word, float(stamp))
    return out


def probe_server(url: str, found: dict, stop: threading.Event) -> None:
    """Our own 50 ms prober: when did the server first answer, independent of the job's check."""
    while not stop.is_set() and "server_up" not in found:
        try:
            with urllib.request.urlopen(url, timeout=1):
                found["server_up"] = time.time()
        except OSError:
            time.sleep(0.05)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--slurm", action="store_true", help="run on the local Slurm cluster")
    args = parser.parse_args()
    env = {**os.environ, "GYM_ENVS_DIR": str(ENVS), "GYM_RUNS_DIR": "/tmp/gym-bench-runs"}
    config = REPO / "examples" / ("quickstart-slurm.yaml" if args.slurm else "quickstart.yaml")
    found: dict[str, float] = {}
    stop = threading.Event()
    if not args.slurm:  # the server is reachable from here only when it runs on this machine
        threading.Thread(target=probe_server, args=("http://localhost:18000/health", found, stop), daemon=True).start()
    t_submit = time.time()
    proc = gym("submit", "-c", str(config), "--json", env=env)
    if proc.returncode != 0:
        print(proc.stderr, file=sys.stderr)
        return 1
    t_submitted = time.time()
    record = json.loads(proc.stdout)
    [job] = record["benchmarks"]
    job_dir, job_id = Path(job["job_dir"]), job["job_id"]
    rollouts = job_dir / "artifacts" / "rollouts.jsonl"
    while True:
        if "first_rollout" not in found and rollouts.exists() and rollouts.stat().st_size > 0:
            found["first_rollout"] = time.time()
        ev = events(job_dir, job_id)
        if "job-end" in ev:
            break
        time.sleep(0.1)
    stop.set()
    ev = events(job_dir, job_id)
    t_results = time.time()
    launched = ev.get("launched policy", float("nan"))
    healthy = ev.get("healthy policy", float("nan"))
    rows = [
        ("submit command (validate, render, stage, queue)", t_submitted - t_submit),
        ("queueing (submit -> job start)", ev.get("job-start", float("nan")) - t_submit),
        ("service start-up (launch -> server answers)", found.get("server_up", healthy) - launched),
        (
            "health-check wait (server answers -> job sees it)",
            healthy - found["server_up"] if "server_up" in found else float("nan"),
        ),
        ("healthy -> driver start", ev.get("driver-start", float("nan")) - healthy),
        ("driver time (gym eval run)", ev.get("driver-end", float("nan")) - ev.get("driver-start", float("nan"))),
        ("submit -> model ready", healthy - t_submit),
        ("submit -> first rollout on disk", found.get("first_rollout", float("nan")) - t_submit),
        ("submit -> results", t_results - t_submit),
    ]
    print(f"quickstart timing ({'slurm' if args.slurm else 'local'}), run {record['gym_job_id']}")
    for label, seconds in rows:
        print(f"  {label:<52} {seconds:8.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
