"""Preemption, a fault that touches rows, met by the real vLLM (CPU) and the real NeMo Gym on the
local Slurm cluster, mid-benchmark, both as sites configure it (scripts/local-slurm: a job of
``urgent`` takes n5 from one of ``spot``, PreemptMode=REQUEUE, or of ``spot-cancel``, CANCEL):

- requeued: Slurm requeues the job under its own id; the job judges the rows already on disk and
  gym resumes from its cache;
- cancelled (``--requeue`` does nothing there): the job a resumable benchmark queued behind its
  own judges the preemption (never a failure, never the user's cancel) and resumes from the rows
  on disk, no resubmit needed (tests/cluster/test_preemption.py: one that is not resumable reads
  ``preempted`` and one ``gym eval resubmit`` finishes it).

Either way the benchmark ends complete, each rollout once, and status never said it failed."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest
from test_quickstart import REPO, envs, gym  # noqa: F401  (envs: the fixture)

pytestmark = [pytest.mark.slow]

REPEATS = 4
ENDED = ("succeeded", "failed", "cancelled", "timed out", "preempted")


def rows_of(rollouts: Path) -> int:
    return len(rollouts.read_text().splitlines()) if rollouts.exists() else 0


def submitted_on(tmp_path: Path, partition: str) -> tuple[dict, dict]:
    """The quickstart (resumable, 12 tasks x REPEATS, one at a time) queued on ``partition``."""
    submitted = gym(
        tmp_path,
        "submit",
        "-c",
        str(REPO / "examples" / "quickstart-slurm.yaml"),
        "--json",
        f"compute.main.node_pools.cpu.partition={partition}",
        "+driver.benchmarks.answer-judge.resumable=true",
        f"+driver.benchmarks.answer-judge.run.num_repeats={REPEATS}",
        "+driver.benchmarks.answer-judge.run.num_samples_in_parallel=1",
    )
    assert submitted.returncode == 0, submitted.stderr
    record = json.loads(submitted.stdout)
    [job] = record["benchmarks"]
    return record, job


def preempt_once_rows_are_written(job: dict) -> str:
    """Wait for 5 rollouts, then take the job's node with an urgent job (which ends at once)."""
    rollouts = Path(job["job_dir"], "artifacts", "rollouts.jsonl")
    deadline = time.monotonic() + 300
    while rows_of(rollouts) < 5:
        assert time.monotonic() < deadline, "no rollouts within 300 s"
        time.sleep(0.5)
    return subprocess.run(
        ["sbatch", "--parsable", "-p", "urgent", "-N1", "--exclusive", "-o", "/dev/null", "--wrap", "sleep 1"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()


def states_until_ended(tmp_path: Path, run_id: str, timeout: float = 600) -> tuple[dict, list[str]]:
    """The job's status each few seconds until it ends: the last, and every state shown."""
    seen: list[str] = []
    deadline = time.monotonic() + timeout
    while True:
        [now] = json.loads(gym(tmp_path, "status", run_id, "--json").stdout)["jobs"]
        seen.append(now["state"])
        if now["state"] in ENDED:
            return now, seen
        assert time.monotonic() < deadline, f"not ended within {timeout:g} s: {now}"
        time.sleep(3)


def assert_each_rollout_once(tmp_path: Path, record: dict, job: dict) -> None:
    rollouts = Path(job["job_dir"], "artifacts", "rollouts.jsonl")
    rows = [json.loads(line) for line in rollouts.read_text().splitlines()]
    keys = sorted((r["_ng_task_index"], r["_ng_rollout_index"]) for r in rows)
    assert keys == sorted({*keys}) and len(keys) == 12 * REPEATS  # nothing lost, nothing twice
    results = json.loads(gym(tmp_path, "results", record["gym_job_id"], "--json").stdout)
    assert results["benchmarks"][0]["samples"] == 12 * REPEATS


def test_the_real_quickstart_preempted_where_the_site_requeues_ends_complete_each_row_once(
    envs,  # noqa: F811  (the fixture imported above)
    slurm,
    tmp_path,
) -> None:
    record, job = submitted_on(tmp_path, "spot")
    urgent = ""
    try:
        urgent = preempt_once_rows_are_written(job)
        final, seen = states_until_ended(tmp_path, record["gym_job_id"])
    finally:
        subprocess.run(["scancel", job["job_id"], *([urgent] if urgent else [])], capture_output=True)
    assert final["state"] == "succeeded" and final["chain"] == [job["job_id"]], final
    assert "failed" not in seen and "queued" in seen, seen  # told requeued while it waited, never failed
    shown = subprocess.run(["scontrol", "show", "job", "-o", job["job_id"]], capture_output=True, text=True).stdout
    assert "Restarts=0 " not in shown, shown
    chain = [line.split("\t") for line in Path(job["job_dir"], ".gym", "chain").read_text().splitlines()]
    [verdict] = [r for r in chain if r[0] == "verdict"]
    assert verdict[1:3] == [job["job_id"], "requeued"] and verdict[5] == "free" and int(verdict[4]) >= 5, verdict
    assert_each_rollout_once(tmp_path, record, job)


def test_the_real_quickstart_preempted_where_the_site_cancels_resumes_in_the_job_behind_it_each_row_once(
    envs,  # noqa: F811  (the fixture imported above)
    slurm,
    tmp_path,
) -> None:
    """Slurm cancels the job (its --requeue does nothing there); a resumable benchmark's job has
    queued the job that resumes it, which judges the preemption (never a failure, never the user's
    cancel: the rows are kept, the retry free) and gym finishes from its cache, no resubmit needed."""
    record, job = submitted_on(tmp_path, "spot-cancel")
    urgent = ""
    try:
        urgent = preempt_once_rows_are_written(job)
        final, seen = states_until_ended(tmp_path, record["gym_job_id"])
    finally:
        chain = Path(job["job_dir"], ".gym", "chain").read_text().splitlines()
        ids = {line.split("\t")[1] for line in chain if line.split("\t")[0] in ("start", "successor")}
        subprocess.run(["scancel", *ids, *([urgent] if urgent else [])], capture_output=True)
    first, second = final["chain"]
    assert final["state"] == "succeeded" and first == job["job_id"], final
    assert "failed" not in seen and "cancelled" not in seen, seen
    [verdict] = [line.split("\t") for line in chain if line.startswith("verdict\t")]
    assert verdict[1:3] == [first, "preempted"] and verdict[5] == "free" and int(verdict[4]) >= 5, verdict
    assert_each_rollout_once(tmp_path, record, job)
