"""Submission over the system ssh to the loopback sshd (scripts/local-sshd): one multiplexed
connection, the run staged in one transfer, every benchmark queued in the same round trip."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import standin_records

pytestmark = [pytest.mark.slow, pytest.mark.cluster]


def test_submit_status_over_ssh_in_constant_round_trips(cluster_run, ssh_env) -> None:
    env, log = ssh_env
    benchmarks = {f"b{i}": {} for i in range(5)}
    # Each job takes all 4 GPUs of a node, so no two jobs share a node (and the model's port).
    config = cluster_run.config(
        services={"policy": {"type": "vllm", "model": "m", "tensor_parallel_size": 4}},
        pools={"gpu": {"partition": "debug", "gpus_per_node": 4}},
        benchmarks=benchmarks,
        driver={"policy_model": "policy"},
        compute={"hostname": os.environ["GYM_TEST_SSH_HOST"]},
    )
    path = cluster_run.tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    proc = subprocess.run(
        [sys.executable, "-m", "nemo_gym.orchestration.cli.main", "eval", "submit", "-c", str(path), "--json"],
        capture_output=True,
        text=True,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr
    record = json.loads(proc.stdout)
    assert record["hostname"] == "gym-loopback"
    calls = log.read_text().splitlines()
    masters = [c for c in calls if "ControlMaster=yes" in c]
    commands = [c for c in calls if "ControlMaster=no" in c]
    # The master connects carrying the first script (the site's limits); then stage + sbatch for all
    # 5 benchmarks, then the record.
    assert (len(masters), len(commands)) == (1, 2)
    for job in record["benchmarks"]:
        assert job["job_id"]
        assert cluster_run.wait(job["job_id"])["JobState"] == "COMPLETED"
        assert len(standin_records(job["job_dir"], "gym-run")) == 1
    log.write_text("")
    status = subprocess.run(
        [sys.executable, "-m", "nemo_gym.orchestration.cli.main", "eval", "status", "--last", "--json"],
        capture_output=True,
        text=True,
        env=env,
    )
    assert status.returncode == 0, status.stderr
    assert {j["state"] for j in json.loads(status.stdout)["jobs"]} == {"succeeded"}
    calls = log.read_text().splitlines()
    assert [len([c for c in calls if f"ControlMaster={m}" in c]) for m in ("yes", "no")] == [1, 0]  # one round trip


def test_unreachable_host_is_one_clear_line(cluster_run, ssh_env) -> None:
    env, _ = ssh_env
    config = cluster_run.config(
        services={"policy": {"type": "vllm", "model": "m"}}, compute={"hostname": "nosuchhost.invalid"}
    )
    path = cluster_run.tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    proc = subprocess.run(
        [sys.executable, "-m", "nemo_gym.orchestration.cli.main", "eval", "submit", "-c", str(path)],
        capture_output=True,
        text=True,
        env=env,
    )
    assert proc.returncode == 1
    [line] = [x for x in proc.stderr.splitlines() if x.startswith("error: ")]
    assert line.startswith("error: cannot connect to nosuchhost.invalid over ssh")
    assert not list(Path(env["XDG_CACHE_HOME"]).glob("nemo-gym/jobs/*.json"))


def test_missing_mount_source_stops_before_anything_is_staged(cluster_run, ssh_env) -> None:
    env, _ = ssh_env
    config = cluster_run.config(
        services={"policy": {"type": "vllm", "model": "m", "mounts": ["/no/such/dir:/data"]}},
        compute={"hostname": os.environ["GYM_TEST_SSH_HOST"]},
    )
    path = cluster_run.tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    proc = subprocess.run(
        [sys.executable, "-m", "nemo_gym.orchestration.cli.main", "eval", "submit", "-c", str(path)],
        capture_output=True,
        text=True,
        env=env,
    )
    assert proc.returncode == 1
    errors = [x for x in proc.stderr.splitlines() if x.startswith("error: ")]
    assert errors == [
        "error: services.policy.mounts: source '/no/such/dir' does not exist on the submit host; create it or fix the mount"
    ]
    assert list(cluster_run.output.iterdir()) == []


def test_the_ssh_master_killed_mid_status_is_one_clear_line_and_the_next_status_is_whole(cluster_run, ssh_env) -> None:
    env, _ = ssh_env
    config = cluster_run.config(
        services={"policy": {"type": "vllm", "model": "m"}},
        benchmarks={"b0": {}, "b1": {}},
        driver={"policy_model": "policy"},
        compute={"hostname": os.environ["GYM_TEST_SSH_HOST"]},
    )
    path = cluster_run.tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    submit = [sys.executable, "-m", "nemo_gym.orchestration.cli.main", "eval", "submit", "-c", str(path), "--json"]
    proc = subprocess.run(submit, capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stderr
    record = json.loads(proc.stdout)
    for job in record["benchmarks"]:
        cluster_run.job_ids.append(job["job_id"])
        assert cluster_run.wait(job["job_id"])["JobState"] == "COMPLETED"
    index = sorted(p.read_text() for p in Path(env["XDG_CACHE_HOME"]).glob("nemo-gym/jobs/*.json"))
    # An ssh whose master connection is SIGKILLed a second into the probe (the script is held back
    # that long first), as when the master dies or the login node drops it: fault injection.
    killer = cluster_run.tmp_path / "killer"
    killer.mkdir()
    (killer / "ssh").write_text(
        '#!/bin/bash\ncase "$*" in *ControlMaster=yes*)\n'
        '  me=$$; (sleep 1; kill -9 "$me") &\n'
        '  exec /usr/bin/ssh "$@" < <(echo "sleep 3"; cat) ;;\nesac\nexec /usr/bin/ssh "$@"\n'
    )
    (killer / "ssh").chmod(0o755)
    killed_env = {**env, "PATH": f"{killer}:{env['PATH']}"}
    status = [sys.executable, "-m", "nemo_gym.orchestration.cli.main", "eval", "status", "--last", "--json"]
    cut = subprocess.run(status, capture_output=True, text=True, env=killed_env, timeout=60)
    assert cut.returncode != 0 and "Traceback" not in cut.stderr, cut.stderr
    [line] = [x for x in cut.stderr.splitlines() if x.startswith("error: ")]
    assert "gym-loopback" in line, line
    # Nothing read back half-way was taken for an answer or written down.
    assert sorted(p.read_text() for p in Path(env["XDG_CACHE_HOME"]).glob("nemo-gym/jobs/*.json")) == index
    whole = subprocess.run(status, capture_output=True, text=True, env=env, timeout=60)
    assert whole.returncode == 0, whole.stderr
    assert {j["state"] for j in json.loads(whole.stdout)["jobs"]} == {"succeeded"}
