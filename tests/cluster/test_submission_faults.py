"""Faults during submission, injected on the real cluster and the loopback sshd: nothing queued
is ever left without a record, and the user is told what happened."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from nemo_gym.orchestration.record import all_records

pytestmark = [pytest.mark.slow, pytest.mark.cluster]


def run_submit(cluster_run, config, env) -> subprocess.CompletedProcess:
    path = cluster_run.tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    return subprocess.run(
        [sys.executable, "-m", "nemo_gym.orchestration.cli.main", "eval", "submit", "-c", str(path)],
        capture_output=True,
        text=True,
        env=env,
    )


def queued_for(run_dir: str) -> set[str]:
    out = subprocess.run(["squeue", "-h", "-o", "%i %Z"], capture_output=True, text=True).stdout
    return {line.split()[0] for line in out.splitlines() if run_dir in line}


RUNS = 30  # a sweep at the scale users submit (each run one job, queued as one array)


def tasks_for(run_dir: str) -> set[str]:
    """Every queued job and array task working under ``run_dir`` (an array's: its script is)."""
    out = subprocess.run(["squeue", "-h", "-r", "-o", "%i %Z %o"], capture_output=True, text=True).stdout
    return {line.split()[0] for line in out.splitlines() if run_dir in line}


def test_sbatch_refused_for_one_benchmark_of_several(cluster_run, tmp_path) -> None:
    # An sbatch in front of the real one that refuses the job of benchmark b2 only (fault injection).
    shim = tmp_path / "shim"
    shim.mkdir()
    real = subprocess.run(["bash", "-c", "command -v sbatch"], capture_output=True, text=True).stdout.strip()
    (shim / "sbatch").write_text(
        f'#!/bin/bash\ncase "$*" in *"/b2/job.sh"*) echo "sbatch: error: Batch job submission failed: '
        f'QOSMaxSubmitJobPerUserLimit" >&2; exit 1;; esac\nexec {real} "$@"\n'
    )
    (shim / "sbatch").chmod(0o755)
    config = cluster_run.config(
        services={"policy": {"type": "vllm", "model": "m"}}, benchmarks={"b1": {}, "b2": {}, "b3": {}}
    )
    env = {**os.environ, "PATH": f"{shim}:{os.environ['PATH']}", "XDG_CACHE_HOME": str(tmp_path / "cache")}
    proc = run_submit(cluster_run, config, env)
    assert proc.returncode == 1
    assert "failed b2: sbatch: error: Batch job submission failed: QOSMaxSubmitJobPerUserLimit" in proc.stdout
    assert "error: 1 benchmark(s) failed to submit: b2" in proc.stderr
    os.environ["XDG_CACHE_HOME"] = str(tmp_path / "cache")
    try:
        [record] = all_records()
    finally:
        del os.environ["XDG_CACHE_HOME"]
    jobs = {b.benchmark: b for b in record.benchmarks}
    assert jobs["b1"].job_id and jobs["b3"].job_id and jobs["b2"].job_id is None
    cluster_run.job_ids += [jobs["b1"].job_id, jobs["b3"].job_id]
    for name in ("b1", "b3"):
        assert cluster_run.wait(jobs[name].job_id)["JobState"] == "COMPLETED"


def test_connection_dropped_mid_submission_leaves_a_true_record(cluster_run, tmp_path) -> None:
    config_file = os.environ.get("GYM_TEST_SSH_CONFIG")
    if not config_file:
        pytest.fail("the loopback sshd is not up (scripts/local-sshd up)") if os.environ.get(
            "GYM_REQUIRE_CLUSTER"
        ) == "1" else pytest.skip("no loopback sshd")
    # An ssh in front of the real one that breaks the submission's connection after the first
    # benchmark's result has come back (the remote side gets SIGHUP, as on a dropped link); the
    # scripts before it (the site's limits) pass.
    shim = tmp_path / "shim"
    shim.mkdir()
    flag = tmp_path / "cut-next-submission"
    flag.write_text("")
    (shim / "ssh").write_text(
        "#!/bin/bash\n"
        f'if [[ "$*" == *"bash -s"* && -e {flag} ]]; then\n'
        '    /usr/bin/ssh "$@" | while IFS= read -r line; do printf "%s\\n" "$line"; '
        f"if [[ $line == __GYM_JOB:* ]]; then rm -f {flag}; exit 7; fi; done\n"
        '    status=("${PIPESTATUS[@]}")\n'
        '    [ "${status[1]}" = 7 ] && exit 255\n'
        '    exit "${status[0]}"\n'
        "fi\n"
        'exec /usr/bin/ssh "$@"\n'
    )
    (shim / "ssh").chmod(0o755)
    config = cluster_run.config(
        services={"policy": {"type": "vllm", "model": "m"}},
        benchmarks={f"b{i}": {} for i in range(6)},
        driver={"policy_model": "policy"},
        compute={"hostname": os.environ["GYM_TEST_SSH_HOST"]},
    )
    env = {
        **os.environ,
        "PATH": f"{shim}:{os.environ['PATH']}",
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
        "GYM_SSH_OPTIONS": f"-F {config_file}",
    }
    proc = run_submit(cluster_run, config, env)
    assert proc.returncode == 1
    [line] = [x for x in proc.stderr.splitlines() if x.startswith("error: ")]
    # The script ran on without its connection (HUP ignored): recovery waits for it to end.
    assert "was lost during submission; all 6 benchmark(s) were queued and are recorded in run" in line, line
    os.environ["XDG_CACHE_HOME"] = str(tmp_path / "cache")
    try:
        [record] = all_records()
    finally:
        del os.environ["XDG_CACHE_HOME"]
    recorded = {b.job_id for b in record.benchmarks if b.job_id}
    cluster_run.job_ids += sorted(recorded)
    assert recorded  # at least the first benchmark was queued before the cut
    assert queued_for(record.run_dir) <= recorded  # nothing queued is missing from the record
    assert record.executor_metadata == {"submission": "interrupted"}
    on_host = json.loads(Path(f"{record.run_dir}/gym-job.json").read_text())
    assert {b["job_id"] for b in on_host["benchmarks"] if b["job_id"]} == recorded
    for b in record.benchmarks:
        if not b.job_id:
            assert b.error == "not submitted: the connection was lost before its sbatch ran"


def test_a_sweep_submit_killed_after_queueing_is_recorded_by_the_next_submit_never_queued_twice(
    cluster_run, tmp_path
) -> None:
    """gym eval submit -m of a 30-run sweep killed with SIGKILL once the real sbatch has queued
    the sweep's jobs (one job array), before it could record them (an sbatch in front of the real one holds the answer back a few
    seconds: the kill's chosen point). The submission script runs on to its end, logging every job
    it queued; the same command again records those runs and queues nothing."""
    from test_sweeps import checkpoints, sweep_config

    shim = tmp_path / "shim"
    shim.mkdir()
    queued_flag = tmp_path / "queued"
    real = subprocess.run(["bash", "-c", "command -v sbatch"], capture_output=True, text=True).stdout.strip()
    (shim / "sbatch").write_text(
        f'#!/bin/bash\nout=$({real} "$@" 2>&1); rc=$?\ntouch {queued_flag}\nsleep 3\nprintf "%s\\n" "$out"\nexit $rc\n'
    )
    (shim / "sbatch").chmod(0o755)
    models = checkpoints(tmp_path, {step: 0.5 for step in range(1, RUNS + 1)})
    config = sweep_config(cluster_run, {"math": {}}, compute={"extra_args": {"begin": "now+1hour"}})
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    argv = [sys.executable, "-m", "nemo_gym.orchestration.cli.main", "eval", "submit", "-c", str(path), "-m"]
    argv.append(f"services.policy.model={','.join(models)}")
    first = subprocess.Popen(
        argv, env={**env, "PATH": f"{shim}:{env['PATH']}"}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    deadline = time.monotonic() + 120
    while not queued_flag.exists():
        assert first.poll() is None and time.monotonic() < deadline, "the submit never reached sbatch"
        time.sleep(0.1)
    first.kill()
    first.wait()
    runs = tmp_path / "runs"
    deadline = time.monotonic() + 60
    while len(queued := tasks_for(str(runs))) < RUNS or not all(
        (d / ".gym-submitted").is_file() for d in runs.glob("gym-job-*")
    ):
        assert time.monotonic() < deadline, queued
        time.sleep(0.5)
    cluster_run.job_ids += sorted(queued)
    assert not list((tmp_path / "cache" / "nemo-gym" / "jobs").glob("gym-job-*.json"))  # nothing recorded
    second = subprocess.run(argv + ["--json"], capture_output=True, text=True, env=env, timeout=300)
    assert second.returncode == 0, second.stderr
    assert "nothing was queued again" in second.stderr and f"queueing {RUNS} of {RUNS} job(s)" in second.stderr
    sweep = json.loads(second.stdout)
    assert sorted(b["job_id"] for r in sweep["records"] for b in r["benchmarks"]) == sorted(queued)
    assert tasks_for(str(runs)) == queued  # nothing queued twice
    assert len(list(runs.glob("gym-job-*"))) == RUNS
