"""Job arrays on the real local Slurm cluster (backends/slurm_arrays.py): a sweep's jobs of one shape,
from ARRAYS_FROM of them on, go to Slurm as one `sbatch --array`; each task runs its own job's
script and answers for its own checkpoint, status/results/logs/cancel know each task by its
`ARRAY_TASK` id, and a cancel of many tasks is one scancel word (`ID_[...]`)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from conftest import left_in_squeue
from test_resubmit import fails_once, resubmit
from test_sweeps import checkpoints, submit_sweep, sweep_config, wait_until

from nemo_gym.orchestration.backends import slurm_arrays

pytestmark = [pytest.mark.slow, pytest.mark.cluster]

ACCURACY = {1000: 0.25, 2000: 0.5, 3000: 0.75, 4000: 1.0}


def four_checkpoints(root: Path) -> list[str]:
    return checkpoints(root, ACCURACY)


def job_ids(sweep: dict) -> list[str]:
    return [b["job_id"] for r in sweep["records"] for b in r["benchmarks"]]


def test_eight_jobs_of_one_shape_go_as_one_array_and_each_task_answers_for_its_own_checkpoint(
    cluster_run, tmp_path
) -> None:
    assert slurm_arrays.ARRAYS_FROM <= 4 * 2
    models = four_checkpoints(tmp_path)
    benchmarks = {"math": {"run": {"standin_rollouts": 4}}, "code": {"run": {"standin_rollouts": 4}}}
    sweep = submit_sweep(
        cluster_run, sweep_config(cluster_run, benchmarks), f"services.policy.model={','.join(models)}"
    )
    ids = job_ids(sweep)
    array = ids[0].split("_")[0]
    assert ids == [f"{array}_{i}" for i in range(8)]
    jobs = wait_until(cluster_run, sweep["sweep_id"], lambda jobs: all(s == "succeeded" for _, _, s in jobs), 240)
    assert len(jobs) == 8
    for record in sweep["records"]:
        for job in record["benchmarks"]:
            # The task ran the job's own script in its own directory, its log where a job's is.
            [served] = [json.loads(p.read_text()) for p in Path(job["job_dir"], "standin").glob("vllm-*.json")]
            assert served["argv"][1] == record["sweep_values"]["services.policy.model"]
            assert Path(job["job_dir"], f"slurm-{job['job_id']}.out").is_file()
    proc = cluster_run.cli("results", sweep["sweep_id"])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    table = [line.split()[:3] for line in proc.stdout.splitlines()[3:7]]
    assert table == [[m, f"{a:.4f}", f"{a:.4f}"] for m, a in zip(models, ACCURACY.values())]
    proc = cluster_run.cli("logs", sweep["records"][2]["gym_job_id"], "code", "--driver")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip()
    sacct = subprocess.run(
        ["sacct", "-X", "-n", "-P", "-j", array, "-o", "JobID,State"], capture_output=True, text=True
    ).stdout.split()
    assert sorted(sacct) == sorted(f"{i}|COMPLETED" for i in ids) or not sacct  # without accounting: nothing


def test_cancel_of_an_array_sweep_cancels_its_running_and_pending_tasks_and_leaves_the_ended(
    cluster_run, tmp_path
) -> None:
    models = four_checkpoints(tmp_path)
    slow = {
        "math": {"run": {"standin_rollouts": 2}},
        "code": {"run": {"standin_rollouts": 3, "standin_rollout_seconds": 60}},
    }
    sweep = submit_sweep(cluster_run, sweep_config(cluster_run, slow), f"services.policy.model={','.join(models)}")
    sweep_id, first = sweep["sweep_id"], models[0]
    wait_until(
        cluster_run,
        sweep_id,
        lambda jobs: (first, "math", "succeeded") in jobs and any(s == "running" for _, b, s in jobs if b == "code"),
    )
    before = {(m, b): s for m, b, s in wait_until(cluster_run, sweep_id, lambda jobs: True)}
    assert "queued" in before.values()  # 3 nodes for 8 tasks: some still wait in the array
    proc = cluster_run.cli("cancel", sweep_id)
    assert proc.returncode == 0, proc.stderr
    assert f"  {first}: math: already succeeded, nothing to cancel" in proc.stdout.splitlines()
    jobs = wait_until(cluster_run, sweep_id, lambda jobs: all(s in ("succeeded", "cancelled") for _, _, s in jobs), 60)
    assert [s for _, b, s in jobs if b == "code"] == ["cancelled"] * 4
    assert not left_in_squeue(set(job_ids(sweep)))


def test_a_failed_task_is_resubmitted_alone_as_a_job_of_its_own_and_its_chain_follows_it(cluster_run, tmp_path) -> None:
    models = [*four_checkpoints(tmp_path), *four_checkpoints(tmp_path / "more")]
    fails_once(Path(models[5]))
    benchmarks = {"math": {"run": {"standin_rollouts": 4}}}
    sweep = submit_sweep(
        cluster_run, sweep_config(cluster_run, benchmarks), f"services.policy.model={','.join(models)}"
    )
    ids = job_ids(sweep)
    assert ids == [f"{ids[0].split('_')[0]}_{i}" for i in range(8)]
    ended = wait_until(cluster_run, sweep["sweep_id"], lambda jobs: all(s in ("succeeded", "failed") for *_, s in jobs))
    assert [s for *_, s in ended] == ["succeeded"] * 5 + ["failed"] + ["succeeded"] * 2
    rc, answer = resubmit(cluster_run, sweep["sweep_id"])
    assert rc == 0, answer
    [(run, again)] = [(r["run"], b["job_id"]) for r in answer["runs"] for b in r["benchmarks"] if b["job_id"]]
    assert run == sweep["records"][5]["gym_job_id"] and again.isdigit()  # a job of its own, not a task
    done = wait_until(cluster_run, sweep["sweep_id"], lambda jobs: all(s == "succeeded" for *_, s in jobs), 120)
    assert len(done) == 8
    proc = cluster_run.cli("status", sweep["sweep_id"], "--json")
    [job] = json.loads(proc.stdout)["runs"][5]["jobs"]
    assert (job["job_id"], [a["job_id"] for a in job["attempt_history"]]) == (again, [ids[5], again])
