"""The scheduler itself at fault, on the real local cluster: slurmctld stopped for a maintenance in
the middle of a run and started again. Status never says a job failed because Slurm could not be
asked: it says so and shows what the job last wrote, and is truthful again after the restart. The
model service and the driver are stand-ins (no GPU here); Slurm and the job scripts are real."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest
from conftest import STANDIN_PATH, job_fields, wait_for_rows
from test_resubmit import resubmit

pytestmark = [pytest.mark.slow, pytest.mark.cluster]

LOCAL_SLURM = Path(__file__).resolve().parents[2] / "scripts" / "local-slurm"


def ctld(verb: str) -> None:
    subprocess.run([str(LOCAL_SLURM), "ctld", verb], check=True, capture_output=True, timeout=60)


def test_status_while_the_controller_is_down_says_so_and_what_the_job_last_wrote(cluster_run) -> None:
    config = cluster_run.config(
        services={"policy": {"type": "vllm", "model": "m"}},
        benchmarks={"bench": {"run": {"standin_rollouts": 20, "standin_rollout_seconds": 0.5}}},
        driver={"policy_model": "policy", "env": {"PATH": STANDIN_PATH}},
    )
    cluster_run.submit(config)
    cluster_run.wait_for("bench", {"running"}, timeout=90)
    ctld("stop")
    try:
        proc = cluster_run.cli("status", "--last", "--json")
        assert proc.returncode == 0, proc.stderr
        [job] = json.loads(proc.stdout)["jobs"]
        # The job runs on without the controller: what it wrote is shown, never a failure.
        assert job["state"] == "running", job
        assert "cannot be reached" in job["detail"] and "last" in job["detail"], job
        plain = cluster_run.cli("status", "--last")
        assert plain.returncode == 0 and "cannot be reached" in plain.stdout, plain.stdout
        time.sleep(3)
    finally:
        ctld("start")
    done = cluster_run.wait_for("bench", {"succeeded", "failed", "unknown", "cancelled"}, timeout=120)
    assert done["state"] == "succeeded" and done["samples"] == 20, done
    assert "cannot be reached" not in done["detail"]


def test_a_node_of_a_two_node_job_lost_requeues_it_and_it_finishes_keeping_its_rows(cluster_run) -> None:
    """One node of a two-node job goes down: Slurm requeues the whole job (same id); the restarted
    job judges its first run, continues from the rows on disk, and no row is lost or doubled."""
    config = cluster_run.config(
        services={"policy": {"type": "vllm", "model": "m"}},
        pools={"gpu": {"partition": "debug", "nodes": 2, "gpus_per_node": 4}},
        benchmarks={"bench": {"resumable": True, "run": {"standin_rollouts": 30, "standin_rollout_seconds": 0.5}}},
        driver={"policy_model": "policy", "env": {"PATH": STANDIN_PATH}},
    )
    [job] = cluster_run.submit(config)["benchmarks"]
    rollouts = wait_for_rows(job["job_dir"], 5)
    nodes = subprocess.run(
        ["scontrol", "show", "hostnames", job_fields(job["job_id"])["NodeList"]], capture_output=True, text=True
    ).stdout.split()
    assert len(nodes) == 2, nodes
    lost = nodes[1]  # not the batch host: the job's script lives on, its step there dies
    subprocess.run(["scontrol", "update", f"nodename={lost}", "state=down", "reason=gym-test-node-lost"], check=True)
    try:
        final = cluster_run.wait_for("bench", {"succeeded", "failed", "unknown", "timed out"}, timeout=300)
    finally:
        subprocess.run(["scontrol", "update", f"nodename={lost}", "state=resume"])
    cluster_run.job_ids += final["chain"]
    assert final["state"] == "succeeded" and final["samples"] == 30, final
    rows = [json.loads(line) for line in rollouts.read_text().splitlines()]
    assert sorted(r["task_index"] for r in rows) == list(range(30))


@pytest.fixture
def small_filesystem(tmp_path):
    """A 16 MiB filesystem of its own (tmpfs) the nodes see too, as a run directory on a Lustre
    quota would be: what fills it fills it for the job. Mounted where the local cluster shares
    mounts with its nodes (scripts/local-slurm: LOCAL_SLURM_MOUNTS)."""
    shared = os.environ.get("LOCAL_SLURM_MOUNTS")
    if not shared:
        pytest.fail("LOCAL_SLURM_MOUNTS is not set (scripts/local-slurm env sets it)")
    mount = Path(shared) / tmp_path.name
    mount.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m", "gym-test-small", str(mount)], check=True)
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)])
        mount.rmdir()


def fill(mount: Path) -> Path:
    """Every free block of ``mount`` taken by one file, as another job's output would take them."""
    filler = mount / "filler"
    subprocess.run(["dd", "if=/dev/zero", f"of={filler}", "bs=4k"], capture_output=True)
    return filler


def test_a_full_disk_fails_the_job_naming_the_filesystem_keeps_its_rows_and_resubmit_finishes(
    cluster_run, small_filesystem
) -> None:
    config = cluster_run.config(
        services={"policy": {"type": "vllm", "model": "m"}},
        benchmarks={"bench": {"run": {"standin_rollouts": 40, "standin_rollout_seconds": 0.3}}},
        driver={"policy_model": "policy", "env": {"PATH": STANDIN_PATH}},
    )
    config["job"]["output_path"] = str(small_filesystem / "runs")
    [job] = cluster_run.submit(config)["benchmarks"]
    rollouts = wait_for_rows(job["job_dir"], 5)
    filler = fill(small_filesystem)
    failed = cluster_run.wait_for("bench", {"failed", "succeeded", "unknown"}, timeout=120)
    assert failed["state"] == "failed", failed
    assert f"the filesystem holding {job['job_dir']} is full" in failed["detail"], failed
    assert str(small_filesystem) in failed["detail"] and "tmpfs" in failed["detail"], failed
    assert failed["attempt_history"][-1]["cause"] == "disk-full", failed
    # Every complete row it wrote is there, parseable; a cut last line is no row.
    text = rollouts.read_text()
    kept = [json.loads(line) for line in text[: text.rfind("\n") + 1].splitlines()]
    assert len(kept) >= 5 and len({r["task_index"] for r in kept}) == len(kept)

    filler.unlink()
    rc, answer = resubmit(cluster_run, "--last")
    [bench] = answer["runs"][0]["benchmarks"]
    assert rc == 0 and (bench["remedy"], bench["attempt"]) == ("requeue", 2), answer
    done = cluster_run.wait_for("bench", {"succeeded", "failed"}, timeout=120)
    assert (done["state"], done["samples"]) == ("succeeded", 40), done
    rows = [json.loads(line) for line in rollouts.read_text().splitlines()]
    assert sorted(r["task_index"] for r in rows) == list(range(40))


def test_a_thirty_run_sweep_polled_through_a_sixty_second_controller_outage_never_reads_failed(cluster_run) -> None:
    """Thirty runs held in the queue (--begin=now+1hour) while slurmctld is stopped for 60 s, status
    polled every few seconds: every job reads queued, with the controller named as unreachable,
    never failed or unknown; after the restart every job reads queued again, without the note."""
    from test_sweeps import checkpoints, submit_sweep_cli, sweep_config

    models = checkpoints(cluster_run.tmp_path, {step: 0.5 for step in range(1, 31)})
    config = sweep_config(cluster_run, {"math": {}}, compute={"extra_args": {"begin": "now+1hour"}})
    proc = submit_sweep_cli(cluster_run, config, f"services.policy.model={','.join(models)}")
    assert proc.returncode == 0, proc.stderr
    sweep = json.loads(proc.stdout)
    cluster_run.job_ids += [b["job_id"] for r in sweep["records"] for b in r["benchmarks"]]
    assert len(cluster_run.job_ids) == 30
    seen: list[tuple[str, bool]] = []
    ctld("stop")
    try:
        stopped = time.monotonic()
        while time.monotonic() - stopped < 60:
            polled = cluster_run.cli("status", "--last", "--json")
            assert polled.returncode == 0 and "Traceback" not in polled.stderr, polled.stderr
            jobs = [job for run in json.loads(polled.stdout)["runs"] for job in run["jobs"]]
            assert len(jobs) == 30
            seen += [(job["state"], "cannot be reached" in job["detail"]) for job in jobs]
            time.sleep(5)
    finally:
        ctld("start")
    assert seen and set(seen) == {("queued", True)}, sorted(set(seen))
    deadline = time.monotonic() + 60
    while True:
        after = json.loads(cluster_run.cli("status", "--last", "--json").stdout)
        jobs = [job for run in after["runs"] for job in run["jobs"]]
        if {(job["state"], "cannot be reached" in job["detail"]) for job in jobs} == {("queued", False)}:
            break
        assert time.monotonic() < deadline, jobs  # slurmctld answers again within a minute
        time.sleep(2)
