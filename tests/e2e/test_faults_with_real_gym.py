"""Preemption, a fault that touches rows, met by the real vLLM (CPU) and the real NeMo Gym on the
local Slurm cluster, mid-benchmark, both as sites configure it (scripts/local-slurm: a job of
``urgent`` takes n5 from one of ``spot``, PreemptMode=REQUEUE, or of ``spot-cancel``, CANCEL):

- requeued: Slurm requeues the job under its own id; the job judges the rows already on disk and
  gym resumes from its cache;
- cancelled (``--requeue`` does nothing there): the job a resumable benchmark queued behind its
  own judges the preemption (never a failure, never the user's cancel) and resumes from the rows
  on disk, no resubmit needed (tests/cluster/test_preemption.py: one that is not resumable reads
  ``preempted`` and one ``gym eval resubmit`` finishes it).

Either way the benchmark ends complete, each rollout once, and status never said it failed. Two
more faults that touch rows, met the same way: the job's node set DOWN (Slurm requeues the job, gym
resumes from its cache), and the run directory's filesystem full (the job fails naming it, the rows
written stay whole, and after space is freed one ``gym eval resubmit`` completes the run)."""

from __future__ import annotations

import json
import os
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


def submitted_on(tmp_path: Path, partition: str, *more: str, resumable: bool = True) -> tuple[dict, dict]:
    """The quickstart (12 tasks x REPEATS, one at a time; resumable unless asked) queued on ``partition``."""
    submitted = gym(
        tmp_path,
        "submit",
        "-c",
        str(REPO / "examples" / "quickstart-slurm.yaml"),
        "--json",
        f"compute.main.node_pools.cpu.partition={partition}",
        *(["+driver.benchmarks.answer-judge.resumable=true"] if resumable else []),
        f"+driver.benchmarks.answer-judge.run.num_repeats={REPEATS}",
        "+driver.benchmarks.answer-judge.run.num_samples_in_parallel=1",
        *more,
    )
    assert submitted.returncode == 0, submitted.stderr
    record = json.loads(submitted.stdout)
    [job] = record["benchmarks"]
    return record, job


def wait_for_rows(job: dict, rows: int = 5) -> Path:
    rollouts = Path(job["job_dir"], "artifacts", "rollouts.jsonl")
    deadline = time.monotonic() + 300
    while rows_of(rollouts) < rows:
        assert time.monotonic() < deadline, f"not {rows} rollouts within 300 s"
        time.sleep(0.5)
    return rollouts


def preempt_once_rows_are_written(job: dict) -> str:
    """Wait for 5 rollouts, then take the job's node with an urgent job (which ends at once)."""
    wait_for_rows(job)
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


def test_the_real_quickstart_whose_node_goes_down_is_requeued_and_ends_complete_each_row_once(
    envs,  # noqa: F811  (the fixture imported above)
    slurm,
    tmp_path,
) -> None:
    """The node under the running job set DOWN (a node lost, as slurmctld sees it): Slurm requeues
    the job under its own id on another node, the job judges its first run and gym resumes from its
    cache on the shared filesystem; status never says it failed."""
    record, job = submitted_on(tmp_path, "debug")
    node = ""
    try:
        wait_for_rows(job)
        shown = subprocess.run(["scontrol", "show", "job", "-o", job["job_id"]], capture_output=True, text=True).stdout
        node = next(f.split("=", 1)[1] for f in shown.split() if f.startswith("NodeList="))
        subprocess.run(
            ["scontrol", "update", f"nodename={node}", "state=down", "reason=gym-test-node-lost"], check=True
        )
        final, seen = states_until_ended(tmp_path, record["gym_job_id"])
    finally:
        if node:
            subprocess.run(["scontrol", "update", f"nodename={node}", "state=resume"], capture_output=True)
        subprocess.run(["scancel", job["job_id"]], capture_output=True)
    assert final["state"] == "succeeded" and final["chain"] == [job["job_id"]], final
    assert "failed" not in seen, seen
    assert_each_rollout_once(tmp_path, record, job)


def fill(mount: Path) -> Path:
    """Every free block of ``mount`` taken by one file, as another job's output would take them."""
    filler = mount / "filler"
    subprocess.run(["dd", "if=/dev/zero", f"of={filler}", "bs=4k"], capture_output=True)
    return filler


def test_the_real_quickstart_on_a_full_filesystem_fails_naming_it_keeps_its_rows_and_resubmit_completes_it(
    envs,  # noqa: F811  (the fixture imported above)
    slurm,
    tmp_path,
) -> None:
    """The run directory on a 64 MiB filesystem of its own (tmpfs, seen by the nodes: a full quota),
    filled mid-benchmark: the job fails with the cause that names the path and the filesystem, every
    row gym wrote before stays a whole JSON line, and after space is freed one resubmit ends 48/48."""
    mount = Path(os.environ["LOCAL_SLURM_MOUNTS"]) / tmp_path.name
    mount.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64m", "gym-test-full", str(mount)], check=True)
    try:
        record, job = submitted_on(tmp_path, "debug", f"job.output_path={mount}/runs", resumable=False)
        try:
            rollouts = wait_for_rows(job)
            filler = fill(mount)
            failed, _ = states_until_ended(tmp_path, record["gym_job_id"])
            assert failed["state"] == "failed", failed
            assert f"the filesystem holding {job['job_dir']} is full" in failed["detail"], failed
            assert "tmpfs" in failed["detail"], failed
            text = rollouts.read_text()
            kept = [json.loads(line) for line in text[: text.rfind("\n") + 1].splitlines()]
            assert len(kept) >= 5
            filler.unlink()
            resubmitted = gym(tmp_path, "resubmit", record["gym_job_id"])
            assert resubmitted.returncode == 0, resubmitted.stderr
            final, seen = states_until_ended(tmp_path, record["gym_job_id"])
        finally:
            chain = Path(job["job_dir"], ".gym", "chain")
            ids = {line.split("\t")[1] for line in chain.read_text().splitlines()} if chain.exists() else set()
            subprocess.run(["scancel", job["job_id"], *ids], capture_output=True)
        assert final["state"] == "succeeded", final
        assert_each_rollout_once(tmp_path, record, job)
    finally:
        subprocess.run(["umount", "-l", str(mount)])
        mount.rmdir()
