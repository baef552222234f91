"""A fault that touches rows, met by the real vLLM (CPU) and the real NeMo Gym on the local Slurm
cluster: the job is preempted mid-benchmark on a partition whose site requeues
(``PreemptMode=REQUEUE``, scripts/local-slurm's ``spot`` on n5, taken by a job of ``urgent``).
Slurm requeues it under the same id; the job judges the rows already on disk and gym resumes from
its cache: the benchmark ends complete, each rollout once, and status never said it failed."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest
from test_quickstart import REPO, envs, gym  # noqa: F401  (envs: the fixture)

pytestmark = [pytest.mark.slow]

REPEATS = 4


def rows_of(rollouts: Path) -> int:
    return len(rollouts.read_text().splitlines()) if rollouts.exists() else 0


def test_the_real_quickstart_preempted_mid_benchmark_where_the_site_requeues_ends_complete_each_row_once(
    envs,  # noqa: F811  (the fixture imported above)
    slurm,
    tmp_path,
) -> None:
    submitted = gym(
        tmp_path,
        "submit",
        "-c",
        str(REPO / "examples" / "quickstart-slurm.yaml"),
        "--json",
        "compute.main.node_pools.cpu.partition=spot",
        "+driver.benchmarks.answer-judge.resumable=true",
        f"+driver.benchmarks.answer-judge.run.num_repeats={REPEATS}",
        "+driver.benchmarks.answer-judge.run.num_samples_in_parallel=1",
    )
    assert submitted.returncode == 0, submitted.stderr
    record = json.loads(submitted.stdout)
    [job] = record["benchmarks"]
    job_dir = Path(job["job_dir"])
    rollouts = job_dir / "artifacts" / "rollouts.jsonl"
    urgent = ""
    try:
        deadline = time.monotonic() + 300
        while rows_of(rollouts) < 5:
            assert time.monotonic() < deadline, "no rollouts within 300 s"
            time.sleep(0.5)
        urgent = subprocess.run(
            ["sbatch", "--parsable", "-p", "urgent", "-N1", "--exclusive", "-o", "/dev/null", "--wrap", "sleep 1"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        seen = []
        deadline = time.monotonic() + 600
        while True:
            shown = gym(tmp_path, "status", record["gym_job_id"], "--json")
            [now] = json.loads(shown.stdout)["jobs"]
            seen.append(now["state"])
            if now["state"] in ("succeeded", "failed", "cancelled", "timed out", "preempted"):
                break
            assert time.monotonic() < deadline, f"not ended within 600 s: {now}"
            time.sleep(3)
    finally:
        subprocess.run(["scancel", job["job_id"], *([urgent] if urgent else [])], capture_output=True)
    assert now["state"] == "succeeded" and now["chain"] == [job["job_id"]], now
    assert "failed" not in seen and "queued" in seen, seen  # told requeued while it waited, never failed
    restarts = subprocess.run(["scontrol", "show", "job", "-o", job["job_id"]], capture_output=True, text=True).stdout
    assert "Restarts=0 " not in restarts, restarts
    chain = [line.split("\t") for line in (job_dir / ".gym" / "chain").read_text().splitlines()]
    [verdict] = [r for r in chain if r[0] == "verdict"]
    assert verdict[1:3] == [job["job_id"], "requeued"] and verdict[5] == "free" and int(verdict[4]) >= 5, verdict
    rows = [json.loads(line) for line in rollouts.read_text().splitlines()]
    keys = sorted((r["_ng_task_index"], r["_ng_rollout_index"]) for r in rows)
    assert keys == sorted({*keys}) and len(keys) == 12 * REPEATS  # each rollout once: nothing lost, nothing twice
    results = json.loads(gym(tmp_path, "results", record["gym_job_id"], "--json").stdout)
    assert results["benchmarks"][0]["samples"] == 12 * REPEATS
