"""The site's limits, met on the real local cluster: started here with accounting limits enforced
(scripts/local-slurm with LOCAL_SLURM_MAX_SUBMIT_JOBS=8: AccountingStorageEnforce=limits and the
user's association MaxSubmitJobs=8, so slurmctld itself refuses a ninth job; and a QOS whose
MaxSubmitJobsPerUser=3, the default of one account), then restarted as the other tests know it. A sweep that cannot fit is refused before anything is queued, naming the
limit; one that fits is queued and runs, and its cancel is one scancel of every job."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from conftest import REPO
from test_sweeps import checkpoints, submit_sweep, submit_sweep_cli, sweep_config, wait_until

pytestmark = [pytest.mark.slow, pytest.mark.cluster]

LIMIT = 8
QOS_LIMIT = 3  # QOS capped, MaxSubmitJobsPerUser: root's default QOS in account my-account only


def local_slurm_up(**limits: str) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LOCAL_SLURM_MAX_", "LOCAL_SLURM_QOS_"))}
    proc = subprocess.run(
        [str(REPO / "scripts" / "local-slurm"), "up"], env={**env, **limits}, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr


@pytest.fixture(scope="module")
def limited(slurm):
    local_slurm_up(LOCAL_SLURM_MAX_SUBMIT_JOBS=str(LIMIT), LOCAL_SLURM_QOS_MAX_SUBMIT_JOBS=str(QOS_LIMIT))
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


def test_a_sweep_that_cannot_fit_is_refused_before_anything_is_queued(limited, cluster_run, tmp_path) -> None:
    models = checkpoints(tmp_path)  # 3 checkpoints x 3 benchmarks: 9 jobs, one more than the limit
    benchmarks = {name: {"run": {"standin_rollouts": 2}} for name in ("math", "code", "chat")}
    proc = submit_sweep_cli(
        cluster_run, sweep_config(cluster_run, benchmarks), f"services.policy.model={','.join(models)}"
    )
    assert proc.returncode != 0
    [line] = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert "compute.account acct: the 3 runs need 9 Slurm job(s) queued at once" in line, proc.stderr
    assert f"MaxSubmitJobs={LIMIT} of your association in account acct" in line and "Traceback" not in proc.stderr
    assert not queued_jobs() and not list(Path(cluster_run.output).iterdir())


def test_a_sweep_that_fits_runs_and_is_cancelled_in_one_go(limited, cluster_run, tmp_path) -> None:
    models = checkpoints(tmp_path)[:2]  # 2 checkpoints x 4 benchmarks: 8 jobs, the limit exactly
    benchmarks = {name: {"run": {"standin_rollouts": 2}} for name in ("math", "code", "chat", "tools")}
    sweep = submit_sweep(
        cluster_run, sweep_config(cluster_run, benchmarks), f"services.policy.model={','.join(models)}"
    )
    ids = [b["job_id"] for r in sweep["records"] for b in r["benchmarks"]]
    assert len(ids) == LIMIT and all(ids)
    wait_until(cluster_run, sweep["sweep_id"], lambda jobs: sum(s == "succeeded" for _, _, s in jobs) >= 2, 120)
    proc = cluster_run.cli("cancel", sweep["sweep_id"])
    assert proc.returncode == 0, proc.stderr
    jobs = wait_until(
        cluster_run, sweep["sweep_id"], lambda jobs: all(s in ("succeeded", "cancelled") for _, _, s in jobs), 60
    )
    assert len(jobs) == LIMIT and not set(queued_jobs()) & set(ids)


def test_a_sweep_past_its_qos_limit_is_refused_before_anything_is_queued(limited, cluster_run, tmp_path) -> None:
    """Account my-account's jobs get QOS capped by default, which only the accounting database
    says: submitted from a login node that reaches it (the daemons' slurm.conf)."""
    models = checkpoints(tmp_path)[:2]  # 2 checkpoints x 2 benchmarks: 4 jobs, one past the QOS's 3
    benchmarks = {name: {"run": {"standin_rollouts": 2}} for name in ("math", "code")}
    config = sweep_config(cluster_run, benchmarks, compute={"account": "my-account"})
    env = {
        **os.environ,
        "SLURM_CONF": os.environ["LOCAL_SLURM_ACCOUNTING_CONF"],
        "XDG_CACHE_HOME": str(cluster_run.tmp_path / "cache"),
    }
    proc = submit_sweep_cli(cluster_run, config, f"services.policy.model={','.join(models)}", env=env)
    assert proc.returncode != 0
    [line] = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert line.startswith("error: QOS capped: the 2 runs need 4 Slurm job(s) queued at once"), proc.stderr
    assert f"MaxSubmitJobsPU={QOS_LIMIT} of QOS capped, per user, 0 counted already" in line, line
    assert "choose another QOS (compute.extra_args.qos)" in line
    assert not queued_jobs() and not list(Path(cluster_run.output).iterdir())

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
