"""Sweeps on the real local Slurm cluster: `gym eval submit -m` over three checkpoints and two
benchmarks is one sweep of six jobs; status, results, report and cancel take the sweep id. The
checkpoints are stand-ins (a directory whose `standin-accuracy` says how good the served model is:
tests/standins/vllm), so the sweep's results are a curve that is known in advance.

Set GYM_REPORT_SCREENSHOT=docs/report-sweep.png to keep the report's screenshot (scripts/report-screenshot)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from browser import LINE_BLUE, ink, open_report
from conftest import ClusterRun, left_in_squeue

pytestmark = [pytest.mark.slow, pytest.mark.cluster]

ACCURACY = {1000: 0.25, 2000: 0.5, 3000: 0.75}
ROLLOUTS = 8
BENCHMARKS = {
    "math": {"run": {"standin_rollouts": ROLLOUTS}},
    "code": {"run": {"standin_rollouts": ROLLOUTS, "standin_accuracy_shift": -0.25}},
}


def checkpoints(root: Path, accuracies: dict[int, float] = ACCURACY) -> list[str]:
    """Stand-in checkpoints (three by default), each better than the one before."""
    paths = []
    for step, accuracy in accuracies.items():
        path = root / "ckpt" / f"step-{step}"
        path.mkdir(parents=True)
        (path / "standin-accuracy").write_text(f"{accuracy}\n")
        paths.append(str(path))
    return paths


def sweep_config(cluster_run: ClusterRun, benchmarks: dict | None = None, **extra: dict) -> dict:
    return cluster_run.config(
        services={"policy": {"type": "vllm", "model": "/placeholder"}},
        benchmarks=benchmarks or BENCHMARKS,
        driver={"policy_model": "policy"},
        **extra,
    )


def submit_sweep_cli(
    cluster_run: ClusterRun, config: dict, *swept: str, env: dict | None = None
) -> subprocess.CompletedProcess:
    """`gym eval submit -c CONFIG -m SWEPT... --json`, as it ended."""
    path = cluster_run.tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return subprocess.run(
        [sys.executable, "-m", "nemo_gym.orchestration.cli.main", "eval", "submit", "-c", str(path), "-m", *swept]
        + ["--json"],
        capture_output=True,
        text=True,
        env=env or {**os.environ, "XDG_CACHE_HOME": str(cluster_run.tmp_path / "cache")},
    )


def submit_sweep(cluster_run: ClusterRun, config: dict, *swept: str, env: dict | None = None) -> dict:
    """The sweep submitted: its record and its runs' records."""
    proc = submit_sweep_cli(cluster_run, config, *swept, env=env)
    assert proc.returncode == 0, proc.stderr
    sweep = json.loads(proc.stdout)
    cluster_run.job_ids += [b["job_id"] for r in sweep["records"] for b in r["benchmarks"] if b["job_id"]]
    return sweep


def sweep_status(cluster_run: ClusterRun, sweep_id: str) -> list[tuple[str, str, str]]:
    """(model path, benchmark, state) of every job of the sweep."""
    proc = cluster_run.cli("status", sweep_id, "--json")
    assert proc.returncode == 0, proc.stderr
    runs = json.loads(proc.stdout)["runs"]
    return [
        (run["values"]["services.policy.model"], job["benchmark"], job["state"]) for run in runs for job in run["jobs"]
    ]


def wait_until(cluster_run: ClusterRun, sweep_id: str, done, timeout: float = 180) -> list[tuple[str, str, str]]:
    deadline = time.monotonic() + timeout
    while True:
        jobs = sweep_status(cluster_run, sweep_id)
        if done(jobs):
            return jobs
        if time.monotonic() > deadline:
            raise AssertionError(f"sweep {sweep_id} never got there: {jobs}")
        time.sleep(0.5)


def test_a_three_checkpoint_sweep_over_two_benchmarks_runs_as_one_sweep(cluster_run, tmp_path) -> None:
    models = checkpoints(tmp_path)
    sweep = submit_sweep(cluster_run, sweep_config(cluster_run), f"services.policy.model={','.join(models)}")
    sweep_id = sweep["sweep_id"]
    assert [run["values"] for run in sweep["runs"]] == [{"services.policy.model": m} for m in models]
    # status SWEEP: six jobs, a run per checkpoint.
    jobs = sweep_status(cluster_run, sweep_id)
    assert [(m, b) for m, b, _ in jobs] == [(m, b) for m in models for b in ("math", "code")]
    jobs = wait_until(cluster_run, sweep_id, lambda jobs: all(state == "succeeded" for _, _, state in jobs))
    # Each job served its own checkpoint.
    for record in sweep["records"]:
        for job in record["benchmarks"]:
            [served] = [json.loads(p.read_text()) for p in Path(job["job_dir"], "standin").glob("vllm-*.json")]
            assert served["argv"][1] == record["sweep_values"]["services.policy.model"]
    # results SWEEP: 3 x 2, labelled by the model paths, the curve known in advance.
    proc = cluster_run.cli("results", sweep_id[-6:])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == f"Sweep {sweep_id}: 3 runs"
    assert lines[2].split() == ["model", "math", "code", "GPU-HOURS", "WALL"]
    table = [line.split()[:3] for line in lines[3:6]]
    assert table == [[m, f"{a:.4f}", f"{a - 0.25:.4f}"] for m, a in zip(models, ACCURACY.values())]
    # report SWEEP: one file, opened in a real Chromium.
    out = tmp_path / "report.html"
    proc = cluster_run.cli("report", sweep_id, "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    screenshot = tmp_path / "report.png"
    seen = open_report(out, screenshot=screenshot)
    assert seen.requests == [seen.url] and seen.console_errors == []
    assert len(seen.charts) == 2 and all(
        ink(chart) > 0.03 and ink(chart, near=LINE_BLUE) > 0.002 for chart in seen.charts
    )
    assert all(m in seen.text for m in models)
    keep = os.environ.get("GYM_REPORT_SCREENSHOT")
    if keep:
        shutil.copyfile(screenshot, keep)


def test_cancel_of_a_sweep_cancels_what_still_runs(cluster_run, tmp_path) -> None:
    models = checkpoints(tmp_path)
    slow = {
        "math": {"run": {"standin_rollouts": 2}},
        "code": {"run": {"standin_rollouts": 3, "standin_rollout_seconds": 60}},
    }
    sweep = submit_sweep(cluster_run, sweep_config(cluster_run, slow), f"services.policy.model={','.join(models)}")
    sweep_id = sweep["sweep_id"]
    first = models[0]
    wait_until(
        cluster_run,
        sweep_id,
        lambda jobs: (
            (first, "math", "succeeded") in jobs and any(state == "running" for _, b, state in jobs if b == "code")
        ),
    )
    proc = cluster_run.cli("cancel", sweep_id)
    assert proc.returncode == 0, proc.stderr
    assert f"  {first}: math: already succeeded, nothing to cancel" in proc.stdout.splitlines()
    assert sum(line.split(": ", 1)[1].startswith("cancelled code") for line in proc.stdout.splitlines()) == 3
    jobs = wait_until(cluster_run, sweep_id, lambda jobs: all(s in ("succeeded", "cancelled") for _, _, s in jobs), 60)
    assert [state for _, b, state in jobs if b == "code"] == ["cancelled"] * 3
    assert not left_in_squeue(set(cluster_run.job_ids))


def test_a_sweep_over_ssh_is_submitted_through_one_connection(cluster_run, tmp_path, ssh_env) -> None:
    env, log = ssh_env
    models = checkpoints(tmp_path)
    config = sweep_config(cluster_run, compute={"hostname": os.environ["GYM_TEST_SSH_HOST"]})
    started = time.monotonic()
    sweep = submit_sweep(cluster_run, config, f"services.policy.model={','.join(models)}", env=env)
    took = time.monotonic() - started
    calls = log.read_text().splitlines()
    masters = [c for c in calls if "ControlMaster=yes" in c]
    commands = [c for c in calls if "ControlMaster=no" in c]
    # One connection, opened by the script asking the site's limits; one stages the three runs and
    # queues their six jobs, one writes the records.
    assert (len(masters), len(commands)) == (1, 2)
    print(f"ssh sweep submission: 3 runs x 2 benchmarks, {len(masters) + len(commands)} round trips, {took:.2f} s")
    assert [r["hostname"] for r in sweep["records"]] == ["gym-loopback"] * 3
    for record in sweep["records"]:
        assert Path(record["run_dir"], "gym-sweep.json").is_file()
        for job in record["benchmarks"]:
            assert cluster_run.wait(job["job_id"])["JobState"] == "COMPLETED"


def test_a_sweep_with_a_shared_deployment_is_one_job_per_run(cluster_run, tmp_path) -> None:
    models = checkpoints(tmp_path)[:2]
    config = sweep_config(cluster_run)
    config["job"]["deployment"] = "shared"
    sweep = submit_sweep(cluster_run, config, f"services.policy.model={','.join(models)}")
    ids = [{b["job_id"] for b in r["benchmarks"]} for r in sweep["records"]]
    assert [len(i) for i in ids] == [1, 1] and ids[0] != ids[1]
    wait_until(cluster_run, sweep["sweep_id"], lambda jobs: all(s == "succeeded" for _, _, s in jobs))
    proc = cluster_run.cli("results", sweep["sweep_id"])
    assert proc.returncode == 0, proc.stdout
    rows = [line.split()[:3] for line in proc.stdout.splitlines()[3:5]]
    assert rows == [[m, f"{a:.4f}", f"{a - 0.25:.4f}"] for m, a in zip(models, ACCURACY.values())]


def test_a_sweep_of_resumable_benchmarks_gives_each_run_its_chain(cluster_run, tmp_path) -> None:
    models = checkpoints(tmp_path)[:2]
    benchmarks = {"math": {"resumable": True, "run": {"standin_rollouts": ROLLOUTS}}}
    sweep = submit_sweep(
        cluster_run, sweep_config(cluster_run, benchmarks), f"services.policy.model={','.join(models)}"
    )
    jobs = wait_until(cluster_run, sweep["sweep_id"], lambda jobs: all(s == "succeeded" for _, _, s in jobs))
    assert [(m, s) for m, _, s in jobs] == [(m, "succeeded") for m in models]
    for record in sweep["records"]:
        [job] = record["benchmarks"]
        chain = Path(job["job_dir"], ".gym", "chain").read_text()
        assert chain.startswith(f"start\t{job['job_id']}")  # each run's own chain, in its own directory


def _jobs_of(status: subprocess.CompletedProcess, run_id: str) -> list[dict]:
    return next(run["jobs"] for run in json.loads(status.stdout)["runs"] if run["run"] == run_id)


def _answered_by(job: dict) -> tuple[list[str], float | None]:
    """The model ids, and the stand-in accuracy, of the server the job's driver talked to."""
    [driver] = [json.loads(p.read_text()) for p in Path(job["job_dir"], "standin").glob("gym-run-*.json")]
    data = driver["policy_models"]["data"]
    return [m["id"] for m in data], data[0].get("standin_accuracy")


def test_ten_checkpoints_by_three_benchmarks_on_one_gpu_each_are_each_answered_by_their_own_server(
    cluster_run, tmp_path
) -> None:
    """Jobs of one GPU on 4-GPU nodes, every checkpoint served under one name on one port, as
    sweeps usually are: Slurm would pack them onto shared nodes; each takes its node whole, so all
    30 succeed, and each driver was answered by its own job's server (its alias, its checkpoint)."""
    root = tmp_path / "ckpt"
    models = []
    for step in range(10):
        path = root / f"step-{step}"
        path.mkdir(parents=True)
        (path / "standin-accuracy").write_text(f"{step / 10}\n")
        models.append(str(path))
    benchmarks = {name: {"run": {"standin_rollouts": 2}} for name in ("math", "code", "chat")}
    config = cluster_run.config(
        services={"policy": {"type": "vllm", "model": "/placeholder", "served_model_name": "policy"}},
        pools={"gpu": {"partition": "debug", "gpus_per_node": 1}},
        benchmarks=benchmarks,
        driver={"policy_model": "policy"},
    )
    sweep = submit_sweep(cluster_run, config, f"services.policy.model={','.join(models)}")
    jobs = wait_until(
        cluster_run,
        sweep["sweep_id"],
        lambda jobs: all(s not in ("queued", "starting", "running") for *_, s in jobs),
        timeout=900,
    )
    assert [state for *_, state in jobs] == ["succeeded"] * 30, jobs
    for record in sweep["records"]:
        accuracy = float(Path(record["sweep_values"]["services.policy.model"], "standin-accuracy").read_text())
        for job in record["benchmarks"]:
            served, seen_accuracy = _answered_by(job)
            assert served == ["policy", f"{record['gym_job_id']}-{job['benchmark']}-policy"]
            assert seen_accuracy == accuracy


def test_jobs_let_share_a_node_on_a_fixed_port_never_answer_for_each_other(cluster_run, tmp_path) -> None:
    """A server whose port is fixed (--port in its extra_args: the job cannot claim it one) and
    exclusive_nodes: false: Slurm packs two one-GPU jobs onto one node, both on one port: the
    second's server finds the port held and its job fails at once, naming the cause.
    (Claimed ports, the default for such jobs: test_shared_nodes.py.)"""
    models = checkpoints(tmp_path)[:2]
    config = cluster_run.config(
        services={"policy": {"type": "vllm", "model": "/placeholder", "extra_args": "--port 8000"}},
        pools={"gpu": {"partition": "debug", "nodes": 1, "gpus_per_node": 1}},
        benchmarks={"math": {"run": {"standin_rollouts": 2, "standin_rollout_seconds": 8}}},
        driver={"policy_model": "policy"},
        compute={"exclusive_nodes": False, "extra_args": {"nodelist": "n1"}},
    )
    sweep = submit_sweep(cluster_run, config, f"services.policy.model={','.join(models)}")
    jobs = wait_until(
        cluster_run,
        sweep["sweep_id"],
        lambda jobs: all(s not in ("queued", "starting", "running") for *_, s in jobs),
        timeout=300,
    )
    states = sorted(state for *_, state in jobs)
    assert states == ["failed", "succeeded"], jobs
    proc = cluster_run.cli("status", sweep["sweep_id"], "--json")
    details = [
        job["detail"] for run in json.loads(proc.stdout)["runs"] for job in run["jobs"] if job["state"] == "failed"
    ]
    # Whichever check sees the other job first: the step's (its port is held) or the job's (the
    # server on the port lists another job's alias).
    [detail] = details
    [winner] = [r for r in sweep["records"] if all(j["state"] == "succeeded" for j in _jobs_of(proc, r["gym_job_id"]))]
    assert "service policy died on node n1 (port 8000 on node n1 was already in use" in detail or (
        detail.startswith("service policy: n1:8000 is answered by another server")
        and f"{winner['gym_job_id']}-math-policy" in detail
    ), detail
    assert "another run on this node?" in detail
    for record in sweep["records"]:
        for job in record["benchmarks"]:
            if list(Path(job["job_dir"], "standin").glob("gym-run-*.json")):
                served, _ = _answered_by(job)
                assert served[1] == f"{record['gym_job_id']}-math-policy"  # a driver that ran, ran against its own
