"""`gym eval resubmit` on the real local Slurm cluster: a benchmark whose service died at start is
queued again in place (held, recorded in its chain, released) and succeeds; a complete run has
nothing to do, exits 0 and queues nothing; a sweep's resubmit over ssh re-queues only its
unfinished run in at most three round trips. The services are stand-ins (tests/standins/vllm: a
checkpoint holding `standin-fail-once` fails its first start), the scheduler is Slurm."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import ClusterRun
from test_sweeps import checkpoints, submit_sweep, sweep_config

pytestmark = [pytest.mark.slow, pytest.mark.cluster]


def fails_once(model: Path) -> str:
    (model / "standin-fail-once").write_text("")
    return str(model)


def queued_jobs() -> set[str]:
    return set(subprocess.run(["squeue", "-h", "-o", "%i"], capture_output=True, text=True).stdout.split())


def resubmit(cluster_run: ClusterRun, *args: str, env: dict | None = None) -> tuple[int, dict]:
    proc = subprocess.run(
        [sys.executable, "-m", "nemo_gym.orchestration.cli.main", "eval", "resubmit", *args, "--json"],
        capture_output=True,
        text=True,
        env=env or {**os.environ, "XDG_CACHE_HOME": str(cluster_run.tmp_path / "cache")},
        timeout=300,
    )
    assert proc.stdout, proc.stderr
    answer = json.loads(proc.stdout)
    cluster_run.job_ids += [b["job_id"] for run in answer["runs"] for b in run["benchmarks"] if b["job_id"]]
    return proc.returncode, answer


def sweep_states(sweep_id: str, env: dict, done, timeout: float = 180) -> list[str]:
    """Every job's state of the sweep, in order, once ``done(states)`` (status over ``env``'s ssh)."""
    deadline = time.monotonic() + timeout
    while True:
        proc = subprocess.run(
            [sys.executable, "-m", "nemo_gym.orchestration.cli.main", "eval", "status", sweep_id, "--json"],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )
        assert proc.returncode == 0, proc.stderr
        states = [job["state"] for run in json.loads(proc.stdout)["runs"] for job in run["jobs"]]
        if done(states):
            return states
        assert time.monotonic() < deadline, f"sweep {sweep_id} never got there: {states}"
        time.sleep(0.5)


def test_a_benchmark_whose_service_died_at_start_is_resubmitted_in_place_and_succeeds(cluster_run, tmp_path) -> None:
    model = tmp_path / "ckpt"
    model.mkdir()
    config = cluster_run.config(
        services={"policy": {"type": "vllm", "model": fails_once(model)}}, driver={"policy_model": "policy"}
    )
    [first] = cluster_run.submit(config)["benchmarks"]
    cluster_run.wait_for("bench", {"failed", "succeeded"}, timeout=90)
    cluster_run.wait(first["job_id"])  # its cause is recorded as its job ends, a moment after it says failed
    failed = cluster_run.status()["bench"]
    assert failed["state"] == "failed" and failed["attempt_history"][0]["cause"] == "startup-failed", failed

    rc, answer = resubmit(cluster_run, "--last")
    [bench] = answer["runs"][0]["benchmarks"]
    assert rc == 0 and (bench["remedy"], bench["attempt"]) == ("requeue", 2), answer
    done = cluster_run.wait_for("bench", {"succeeded", "failed"}, timeout=120)
    assert (done["state"], done["job_id"], done["attempts"]) == ("succeeded", bench["job_id"], 2), done
    assert [a["job_id"] for a in done["attempt_history"]] == [first["job_id"], bench["job_id"]]
    job_dir = Path(first["job_dir"])
    chain = (job_dir / ".gym" / "chain").read_text().splitlines()
    assert chain == [f"resubmit\t{bench['job_id']}\t{first['job_id']}\t2\trequeue\t0"]
    assert [a["samples_added"] for a in done["attempt_history"]] == [0, 3]
    # Its driver was told to keep the rows on disk; each attempt kept its own log.
    [run] = [r for r in map(json.loads, map(Path.read_text, job_dir.glob("standin/gym-run-*.json")))]
    assert run["overrides"]["resume_from_cache"] == "true"
    assert (job_dir / f"slurm-{first['job_id']}.out").is_file() and (job_dir / f"slurm-{bench['job_id']}.out").is_file()
    results = cluster_run.cli("results", "--last", "--json")
    assert json.loads(results.stdout)["benchmarks"][0]["samples"] == 3, results.stdout


def test_a_complete_run_s_resubmit_has_nothing_to_do_exits_0_and_queues_nothing(cluster_run) -> None:
    config = cluster_run.config(services={"policy": {"type": "vllm", "model": "m"}}, driver={"policy_model": "policy"})
    [job] = cluster_run.submit(config)["benchmarks"]
    assert cluster_run.wait(job["job_id"])["JobState"] == "COMPLETED"
    cluster_run.wait_for("bench", {"succeeded"})
    before = queued_jobs()
    rc, answer = resubmit(cluster_run, "--last")
    [bench] = answer["runs"][0]["benchmarks"]
    assert rc == 0 and bench["remedy"] == "nothing" and bench["job_id"] is None, answer
    assert bench["plan"] == "nothing to do: it succeeded with all 3 samples"
    assert queued_jobs() <= before and not Path(job["job_dir"], ".gym", "chain").exists()


def test_a_sweep_s_resubmit_over_ssh_requeues_only_its_unfinished_run_in_three_round_trips(
    cluster_run, tmp_path, ssh_env
) -> None:
    env, log = ssh_env
    models = checkpoints(tmp_path)
    fails_once(Path(models[1]))
    config = sweep_config(
        cluster_run, {"math": {"run": {"standin_rollouts": 4}}}, compute={"hostname": os.environ["GYM_TEST_SSH_HOST"]}
    )
    sweep = submit_sweep(cluster_run, config, f"services.policy.model={','.join(models)}", env=env)
    sweep_id = sweep["sweep_id"]
    ended = sweep_states(sweep_id, env, lambda states: all(s in ("succeeded", "failed") for s in states))
    assert ended == ["succeeded", "failed", "succeeded"], ended
    log.write_text("")
    started = time.monotonic()
    rc, answer = resubmit(cluster_run, sweep_id, env=env)
    took = time.monotonic() - started
    calls = log.read_text().splitlines()
    trips = [c for c in calls if "ControlMaster=yes" in c or "ControlMaster=no" in c]
    assert rc == 0 and len(trips) <= 3, calls
    print(f"ssh sweep resubmit: 3 runs, 1 re-queued, {len(trips)} round trips, {took:.2f} s")
    queued = [(run["run"], b["benchmark"]) for run in answer["runs"] for b in run["benchmarks"] if b["job_id"]]
    assert queued == [(sweep["records"][1]["gym_job_id"], "math")], answer
    assert sweep_states(sweep_id, env, lambda states: all(s == "succeeded" for s in states), 120) == ["succeeded"] * 3
