"""Submission over the system ssh to the loopback sshd (scripts/local-sshd): one multiplexed
connection, the run staged in one transfer, every benchmark queued in the same round trip."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
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


# The submission's session (over the master: ControlMaster=no; bash -s; once): its script slowed after the first run's answer (a
# slow link: 3 s), and its master connection SIGKILLed as that first answer comes back.
KILL_MASTER_MID_SUBMIT = r"""#!/bin/bash
if [[ "$*" == *ControlMaster=no*"bash -s"* && -e @FLAG@ ]]; then
    rm -f @FLAG@
    first_answer='^printf .%s\\n. "\$line"$'
    sed "0,/$first_answer/s//&\nsleep 3/" | /usr/bin/ssh "$@" | while IFS= read -r line; do
        printf '%s\n' "$line"
        if [[ $line == __GYM_JOB:* && -z ${killed-} ]]; then
            pkill -KILL -f "^ssh: @SOCKETS@/.*\\[mux\\]"  # the persisting master's own name
            killed=1
        fi
    done
    exit "${PIPESTATUS[1]}"
fi
exec /usr/bin/ssh "$@"
"""


def test_the_ssh_master_killed_mid_submit_of_a_thirty_run_sweep_records_every_run_it_queued(
    cluster_run, ssh_env
) -> None:
    """A 30-run sweep submitted over ssh (held: --begin=now+1hour, queued as one job array); its
    master connection SIGKILLed as the first run's answer comes back, the rest still to read (an
    ssh in front of the real one kills it: fault injection). The submit ends in one clear line and
    records every run with the job Slurm holds for it, read back from the run directories' logs
    (the remote script ran on: HUP ignored); nothing is queued twice, nothing is missing."""
    from test_submission_faults import tasks_for
    from test_sweeps import checkpoints, sweep_config

    env, _ = ssh_env
    # Where its master's socket is, to find that master: short (a socket's path has ~100 bytes).
    env = {**env, "TMPDIR": tempfile.mkdtemp(prefix="gks", dir="/tmp")}
    killer = cluster_run.tmp_path / "killer"
    killer.mkdir()
    flag = cluster_run.tmp_path / "kill-at-first-answer"
    flag.write_text("")
    shim = KILL_MASTER_MID_SUBMIT.replace("@FLAG@", str(flag)).replace("@SOCKETS@", env["TMPDIR"])
    (killer / "ssh").write_text(shim)
    (killer / "ssh").chmod(0o755)
    env["PATH"] = f"{killer}:{env['PATH']}"
    models = checkpoints(cluster_run.tmp_path, {step: 0.5 for step in range(1, 31)})
    compute = {"hostname": os.environ["GYM_TEST_SSH_HOST"], "extra_args": {"begin": "now+1hour"}}
    config = sweep_config(cluster_run, {"math": {}}, compute=compute)
    path = cluster_run.tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    argv = [sys.executable, "-m", "nemo_gym.orchestration.cli.main", "eval", "submit", "-c", str(path), "--json"]
    argv += ["-m", f"services.policy.model={','.join(models)}"]
    cut = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=300)
    runs = cluster_run.tmp_path / "runs"
    queued = tasks_for(str(runs))
    cluster_run.job_ids += sorted(queued)
    assert not flag.exists() and "Traceback" not in cut.stderr, cut.stderr
    [line] = [x for x in cut.stderr.splitlines() if x.startswith("error: ")]
    assert "was lost during submission; all 30 job(s) of the sweep's 30 runs were queued and are recorded" in line
    assert len(queued) == 30, cut.stderr
    records = [json.loads(p.read_text()) for p in Path(env["XDG_CACHE_HOME"]).glob("nemo-gym/jobs/gym-job-*.json")]
    recorded = sorted(b["job_id"] for r in records for b in r["benchmarks"] if b["job_id"])
    assert len(records) == 30 and recorded == sorted(queued), cut.stderr
