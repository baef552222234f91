"""The site's limits, met on the real local cluster: started here with accounting limits enforced
(scripts/local-slurm with LOCAL_SLURM_MAX_SUBMIT_JOBS=8: AccountingStorageEnforce=limits and the
user's association MaxSubmitJobs=8, so slurmctld itself refuses a ninth job; and a QOS whose
MaxSubmitJobsPerUser=3, the default of one account; and MaxArraySize=4), then restarted as the other tests know it. A sweep past the limit runs in lanes, each job queuing
the next of its lane as it starts (feeding.py), and never holds more than the limit; one that
cannot fit even one lane is refused before anything is queued, naming the limit; one that fits is
queued (its jobs of one shape as job arrays of at most 4 tasks) and runs, and its cancel is one
scancel of every job; a job array past MaxArraySize is refused before anything is queued."""

from __future__ import annotations

import getpass
import json
import os
import subprocess
import time
from pathlib import Path

import pytest
from conftest import REPO
from test_sweeps import checkpoints, submit_sweep, submit_sweep_cli, sweep_config, sweep_status, wait_until

pytestmark = [pytest.mark.slow, pytest.mark.cluster]

LIMIT = 8
QOS_LIMIT = 3  # QOS capped, MaxSubmitJobsPerUser: root's default QOS in account my-account only
MAX_ARRAY_SIZE = 4  # a job array's indices run from 0 to 3


def local_slurm_up(**limits: str) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LOCAL_SLURM_MAX_", "LOCAL_SLURM_QOS_"))}
    proc = subprocess.run(
        [str(REPO / "scripts" / "local-slurm"), "up"], env={**env, **limits}, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr


@pytest.fixture(scope="module")
def limited(slurm):
    local_slurm_up(
        LOCAL_SLURM_MAX_SUBMIT_JOBS=str(LIMIT),
        LOCAL_SLURM_QOS_MAX_SUBMIT_JOBS=str(QOS_LIMIT),
        LOCAL_SLURM_MAX_ARRAY_SIZE=str(MAX_ARRAY_SIZE),
    )
    yield
    local_slurm_up()  # as the other tests know it: no limits


def queued_jobs() -> list[str]:
    return subprocess.run(["squeue", "-h", "-r", "-o", "%i"], capture_output=True, text=True).stdout.split()


def test_slurm_itself_refuses_a_job_past_the_limit(limited, tmp_path) -> None:
    script = tmp_path / "sleep.sh"
    script.write_text("#!/bin/bash\nsleep 60\n")
    ids = []
    try:
        for _ in range(LIMIT):
            ids.append(
                subprocess.run(
                    ["sbatch", "--parsable", "-A", "acct", "-o", "/dev/null", str(script)],
                    capture_output=True,
                    text=True,
                    check=True,
                ).stdout.strip()
            )
        past = subprocess.run(["sbatch", "-A", "acct", "-o", "/dev/null", str(script)], capture_output=True, text=True)
        assert past.returncode != 0 and "AssocMaxSubmitJobLimit" in past.stderr
    finally:
        subprocess.run(["scancel", *ids], capture_output=True)


def ten_checkpoints(root: Path) -> list[str]:
    paths = []
    for step in range(1, 11):
        path = root / "ckpt" / f"step-{step * 100}"
        path.mkdir(parents=True)
        (path / "standin-accuracy").write_text(f"{step / 10}\n")
        paths.append(str(path))
    return paths


def test_thirty_jobs_under_a_limit_of_eight_run_in_lanes_and_all_complete(limited, cluster_run, tmp_path) -> None:
    """10 checkpoints x 3 benchmarks: 30 jobs, where slurmctld takes 8 at once. Four lanes of two
    at once: the first job of each is queued by the submission, every other by the job before it
    in its lane as that one starts; the queue never holds more than the limit, and nothing is
    refused."""
    models = ten_checkpoints(tmp_path)
    benchmarks = {name: {"run": {"standin_rollouts": 2}} for name in ("math", "code", "chat")}
    proc = submit_sweep_cli(
        cluster_run, sweep_config(cluster_run, benchmarks), f"services.policy.model={','.join(models)}"
    )
    assert proc.returncode == 0, proc.stderr
    sweep = json.loads(proc.stdout)
    jobs = [b for r in sweep["records"] for b in r["benchmarks"]]
    assert len(jobs) == 30 and sum(1 for b in jobs if b["job_id"]) == 4, jobs
    assert all(b["fed_by"] for b in jobs if not b["job_id"])
    most = 0
    deadline = time.monotonic() + 900
    try:
        while True:
            most = max(most, len(queued_jobs()))
            states = sweep_status(cluster_run, sweep["sweep_id"])
            if all(state in ("succeeded", "failed", "cancelled") for _, _, state in states):
                break
            assert time.monotonic() < deadline, states
            time.sleep(1)
    finally:
        subprocess.run(["scancel", "-u", getpass.getuser()], capture_output=True)
    assert [state for _, _, state in states] == ["succeeded"] * 30, states
    assert most <= LIMIT
    status = json.loads(cluster_run.cli("status", sweep["sweep_id"], "--json").stdout)
    ids = [job["job_id"] for run in status["runs"] for job in run["jobs"]]
    assert len(set(ids)) == 30 and all(ids)
    accounted = subprocess.run(
        ["sacct", "-X", "-n", "-P", "-j", ",".join(ids), "-o", "JobID,State"],
        capture_output=True,
        text=True,
        env={**os.environ, "SLURM_CONF": os.environ["LOCAL_SLURM_ACCOUNTING_CONF"]},  # the database's word
    ).stdout.split()
    assert sorted(accounted) == sorted(f"{i}|COMPLETED" for i in ids), accounted


def test_a_sweep_that_fits_runs_and_is_cancelled_in_one_go(limited, cluster_run, tmp_path) -> None:
    models = checkpoints(tmp_path)[:2]  # 2 checkpoints x 4 benchmarks: 8 jobs, the limit exactly
    benchmarks = {name: {"run": {"standin_rollouts": 2}} for name in ("math", "code", "chat", "tools")}
    sweep = submit_sweep(
        cluster_run, sweep_config(cluster_run, benchmarks), f"services.policy.model={','.join(models)}"
    )
    ids = [b["job_id"] for r in sweep["records"] for b in r["benchmarks"]]
    assert len(ids) == LIMIT and all(ids)
    # Jobs of one shape, as job arrays no bigger than the site's MaxArraySize: two of four tasks.
    arrays = [ids[0].split("_")[0], ids[4].split("_")[0]]
    assert ids == [f"{a}_{i}" for a in arrays for i in range(MAX_ARRAY_SIZE)] and arrays[0] != arrays[1]
    wait_until(cluster_run, sweep["sweep_id"], lambda jobs: sum(s == "succeeded" for _, _, s in jobs) >= 2, 120)
    proc = cluster_run.cli("cancel", sweep["sweep_id"])
    assert proc.returncode == 0, proc.stderr
    jobs = wait_until(
        cluster_run, sweep["sweep_id"], lambda jobs: all(s in ("succeeded", "cancelled") for _, _, s in jobs), 60
    )
    assert len(jobs) == LIMIT
    # A cancelled job stays listed while Slurm ends its processes (COMPLETING, up to KillWait):
    # what counts is that none of the sweep's jobs is left in the queue once that is over.
    deadline = time.monotonic() + 90
    while set(queued_jobs()) & set(ids) and time.monotonic() < deadline:
        time.sleep(2)
    left = subprocess.run(["squeue", "-h", "-r", "-o", "%i %T %r"], capture_output=True, text=True).stdout
    assert not set(queued_jobs()) & set(ids), left


def one_lane_of_four(cluster_run, tmp_path: Path) -> tuple[list[str], dict, dict]:
    """2 checkpoints x 2 benchmarks (4 jobs, one past the QOS's 3) of account my-account, each to
    begin an hour from now; and the environment that submits them where the QOS is known."""
    benchmarks = {name: {"run": {"standin_rollouts": 2}} for name in ("math", "code")}
    config = sweep_config(
        cluster_run, benchmarks, compute={"account": "my-account", "extra_args": {"begin": "now+1hour"}}
    )
    env = {
        **os.environ,
        "SLURM_CONF": os.environ["LOCAL_SLURM_ACCOUNTING_CONF"],
        "XDG_CACHE_HOME": str(cluster_run.tmp_path / "cache"),
    }
    return checkpoints(tmp_path)[:2], config, env


def test_a_sweep_past_its_qos_limit_goes_in_lanes_and_one_past_a_full_qos_is_refused(
    limited, cluster_run, tmp_path
) -> None:
    """Account my-account's jobs get QOS capped by default, which only the accounting database
    says: submitted from a login node that reaches it (the daemons' slurm.conf)."""
    models, config, env = one_lane_of_four(cluster_run, tmp_path)
    # Room for 3: one lane (a lane holds two at once), its first job queued (held an hour), the
    # others each to be queued by the one before.
    sweep = submit_sweep(cluster_run, config, f"services.policy.model={','.join(models)}", env=env)
    jobs = [b for r in sweep["records"] for b in r["benchmarks"]]
    assert [bool(b["job_id"]) for b in jobs] == [True, False, False, False], jobs
    assert len(queued_jobs()) == 1
    waiting = sweep_status(cluster_run, sweep["sweep_id"])
    assert [state for _, _, state in waiting] == ["queued"] * 4
    # Cancelled whole: the queued job by scancel, the lane's others before it queues them.
    proc = cluster_run.cli("cancel", sweep["sweep_id"])
    assert proc.returncode == 0, proc.stderr
    assert "(before its lane queued it)" in proc.stdout, proc.stdout
    ended = wait_until(cluster_run, sweep["sweep_id"], lambda js: all(s == "cancelled" for _, _, s in js), 60)
    assert len(ended) == 4 and not queued_jobs()

    # Within it (3 jobs, held) it is queued; one more past it, under --qos, sees the 3 counted.
    sweep = submit_sweep(
        cluster_run,
        sweep_config(
            cluster_run, {"math": {}}, compute={"account": "my-account", "extra_args": {"begin": "now+1hour"}}
        ),
        f"services.policy.model={','.join(checkpoints(tmp_path / 'more'))}",
        env=env,
    )
    ids = [b["job_id"] for r in sweep["records"] for b in r["benchmarks"]]
    assert len(ids) == QOS_LIMIT and all(ids)
    proc = submit_sweep_cli(
        cluster_run,
        sweep_config(cluster_run, {"math": {}}, compute={"account": "acct", "extra_args": {"qos": "capped"}}),
        f"services.policy.model={models[0]}",
        env={**env, "SLURM_CONF": os.environ["SLURM_CONF"]},  # slurmctld alone: it counts what is queued
    )
    assert proc.returncode != 0 and f"of QOS capped, per user, {QOS_LIMIT} counted already" in proc.stderr, proc.stderr
    subprocess.run(["scancel", *ids], capture_output=True)


def start_now(jobs: list[str]) -> None:
    """Jobs held back by their --begin time, let go now (a lane's job queues the next with it too)."""
    for job_id in jobs:
        subprocess.run(["scontrol", "update", f"JobId={job_id}", "StartTime=now"], capture_output=True)


def test_a_lane_stalled_by_a_job_cancelled_unstarted_is_told_and_resubmit_feeds_it(
    limited, cluster_run, tmp_path
) -> None:
    """One lane of four jobs (room for three): its first job, still waiting, is cancelled by
    scancel (an administrator, a dependency Slurm gave up on), so it never queues the second.
    Status says the lane stalled there (the jobs behind it too: failed, never waiting for ever);
    resubmit queues the second as its lane would have, which feeds the rest, and all three end
    succeeded."""
    from test_resubmit import resubmit

    models, config, env = one_lane_of_four(cluster_run, tmp_path)
    sweep = submit_sweep(cluster_run, config, f"services.policy.model={','.join(models)}", env=env)
    [head] = [b["job_id"] for r in sweep["records"] for b in r["benchmarks"] if b["job_id"]]
    subprocess.run(["scancel", head], check=True)
    stalled = wait_until(cluster_run, sweep["sweep_id"], lambda js: js[0][2] == "cancelled", 60)
    assert [state for _, _, state in stalled] == ["cancelled", "failed", "failed", "failed"], stalled
    status = json.loads(cluster_run.cli("status", sweep["sweep_id"], "--json").stdout)
    second = status["runs"][0]["jobs"][1]
    assert second["turn"] == "stalled" and "never queued: its lane stalled" in second["detail"], second
    assert status["runs"][1]["jobs"][0]["turn"] == "behind-a-stall"
    rc, answer = resubmit(cluster_run, sweep["sweep_id"], "code", env=env)
    [fed] = [b for run in answer["runs"] for b in run["benchmarks"] if b["job_id"]]
    assert rc == 0 and fed["remedy"] == "feed" and fed["benchmark"] == "code", answer
    deadline = time.monotonic() + 300
    while True:
        start_now(queued_jobs())
        jobs = sweep_status(cluster_run, sweep["sweep_id"])
        if all(state in ("succeeded", "failed", "cancelled") for _, _, state in jobs[1:]):
            break
        assert time.monotonic() < deadline, jobs
        time.sleep(1)
    assert [state for _, _, state in jobs] == ["cancelled", "succeeded", "succeeded", "succeeded"], jobs


def test_a_job_array_past_the_site_s_max_array_size_is_refused_before_anything_is_queued(
    limited, cluster_run, tmp_path
) -> None:
    config = sweep_config(cluster_run, {"math": {}}, compute={"extra_args": {"array": "0-29"}})
    proc = submit_sweep_cli(cluster_run, config, "services.policy.model=/m/a,/m/b")
    assert proc.returncode == 1
    assert f"is past the site's MaxArraySize={MAX_ARRAY_SIZE}" in proc.stderr and "nothing was submitted" in proc.stderr
    assert "Traceback" not in proc.stderr and not queued_jobs()
