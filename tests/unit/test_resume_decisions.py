"""The resume judge as a job runs it: steps/resume.sh calling the shipped resume.py under bash, one
situation each (the rules themselves are unit-tested in test_resume_rules.py).

Slurm's answers are faked here (a scontrol/sacct/sbatch/scancel on PATH that say what the test
asks): preemption, a forgotten job, or accounting cannot be produced on demand on the local
cluster. tests/cluster/test_resume.py runs the same scripts against the real Slurm."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from nemo_gym.orchestration.backends import backend_named
from nemo_gym.orchestration.contract import CHAIN_LIMIT as RESUME_CHAIN_LIMIT
from nemo_gym.orchestration.plan.model import ResumePlan
from nemo_gym.orchestration.render import _library, resume_files

FAKES = {
    "scontrol": '[ -n "${FAKE_SCONTROL_STATE:-}" ] && echo "JobId=$4 JobState=$FAKE_SCONTROL_STATE Reason=None"; true',
    "sacct": '[ -n "${FAKE_SACCT_STATE:-}" ] && echo "$FAKE_SACCT_STATE"; true',
    "sbatch": 'echo "$*" >>"$FAKE_LOG.sbatch"; [ -z "${FAKE_SBATCH_FAIL:-}" ] || { echo "sbatch: error: $FAKE_SBATCH_FAIL" >&2; exit 1; }; '
    '[ -z "${FAKE_SBATCH_CHATTY:-}" ] || { echo "sbatch: INFO: site plugin says hi" >&2; echo "note: project quota 80%"; }; '
    'echo "900${FAKE_SBATCH_CLUSTER:+;$FAKE_SBATCH_CLUSTER}"',
    "scancel": 'echo "$*" >>"$FAKE_LOG.scancel"',
}


@pytest.fixture
def job(tmp_path: Path):
    return Job(tmp_path)


class Job:
    def __init__(self, tmp: Path, max_retries: int = 3, max_walltime: str | None = None, seconds: int | None = None):
        self.dir = tmp / "bench"
        (self.dir / "steps").mkdir(parents=True)
        (self.dir / "artifacts").mkdir()
        (self.dir / ".gym").mkdir()
        self.bin = tmp / "fakebin"
        self.bin.mkdir()
        for name, body in FAKES.items():
            path = self.bin / name
            path.write_text(f"#!/bin/bash\n{body}\n")
            path.chmod(0o755)
        self.log = tmp / "fake"
        (self.dir / "steps" / "lib.sh").write_text(_library("run", backend_named("slurm")).content)
        self.caps(max_retries, max_walltime, seconds)

    def caps(self, max_retries: int, max_walltime: str | None = None, seconds: int | None = None) -> None:
        files = resume_files("run", ResumePlan(max_retries, max_walltime, seconds), backend_named("slurm"))
        for rel, staged in files.items():
            (self.dir / rel).parent.mkdir(parents=True, exist_ok=True)
            (self.dir / rel).write_text(staged.content)

    def rollouts(self, n: int) -> None:
        (self.dir / "artifacts" / "rollouts.jsonl").write_text("{}\n" * n)

    def chain(self, *records: tuple) -> None:
        with open(self.dir / ".gym" / "chain", "a") as fh:
            for r in records:
                fh.write("\t".join(map(str, r)) + "\n")

    def records(self) -> list[list[str]]:
        path = self.dir / ".gym" / "chain"
        return [line.split("\t") for line in path.read_text().splitlines()] if path.exists() else []

    def left(self, job_id: str, *, cause: str | None = None, succeeded: bool = False, alive_for: int = 0) -> None:
        """What job ``job_id`` left in its state dir; its start record says it began ``alive_for`` s ago."""
        d = self.dir / ".gym" / job_id
        d.mkdir(exist_ok=True)
        (d / "state").write_text("phase=succeeded\n" if succeeded else "phase=failed\n")
        if cause:
            (d / "cause").write_text(cause + "\n")
        started = int(os.path.getmtime(d / "state")) - alive_for
        records = self.records()
        for r in records:
            if r[0] == "start" and r[1] == job_id:
                r[2] = str(started)
        (self.dir / ".gym" / "chain").write_text("".join("\t".join(r) + "\n" for r in records))

    def begin(self, job_id: str, prev: str = "", requeued: int = 0, **env: str) -> subprocess.CompletedProcess:
        return self.bash(
            job_id,
            f'gym_resume_begin "{prev}" {requeued}; rc=$?; '
            '[ -z "${GYM_HEARTBEAT_PID:-}" ] || kill "$GYM_HEARTBEAT_PID"; exit $rc',
            **env,
        )

    def bash(self, job_id: str, commands: str, **env: str) -> subprocess.CompletedProcess:
        script = (
            'source "$GYM_JOB_DIR/steps/lib.sh"; source "$GYM_JOB_DIR/steps/resume.sh"; '
            'mkdir -p "$(gym_state_dir)"; ' + commands
        )
        full_env = {
            **os.environ,
            "PATH": f"{self.bin}:{os.environ['PATH']}",
            "GYM_JOB_DIR": str(self.dir),
            "GYM_JOB_ID": job_id,
            "FAKE_LOG": str(self.log),
            **env,
        }
        return subprocess.run(["bash", "-c", script], env=full_env, capture_output=True, text=True, timeout=30)

    def verdict(self) -> list[str]:
        [*_, last] = [r for r in self.records() if r[0] == "verdict"]
        return last

    def end(self) -> list[str] | None:
        ends = [r for r in self.records() if r[0] == "end"]
        return ends[-1] if ends else None

    def calls(self, tool: str) -> list[str]:
        path = Path(f"{self.log}.{tool}")
        return path.read_text().splitlines() if path.exists() else []


def test_the_first_job_records_its_start_and_queues_its_successor(job) -> None:
    job.rollouts(0)
    proc = job.begin("100")
    assert proc.returncode == 0, proc.stderr
    kinds = [r[:2] for r in job.records()]
    assert kinds == [["start", "100"], ["successor", "900"]]
    assert job.records()[1] == ["successor", "900", "100"]
    [call] = job.calls("sbatch")
    assert "--dependency=afternotok:100" in call and "--kill-on-invalid-dep=yes" in call
    assert call.endswith(f"{job.dir}/job.sh 100")


def started_and_cut(job: Job, prev: str, rollouts_before: int, rollouts_after: int, **left) -> None:
    job.chain(("start", prev, 0, rollouts_before), ("successor", "101", prev))
    job.rollouts(rollouts_after)
    job.left(prev, **left)


def test_a_timeout_after_progress_resumes_for_free(job) -> None:
    started_and_cut(job, "100", 0, 7, alive_for=65)
    proc = job.begin("101", prev="100", FAKE_SCONTROL_STATE="TIMEOUT")
    assert proc.returncode == 0, proc.stderr
    v = job.verdict()
    assert v[1:3] == ["100", "timeout"] and v[4] == "7" and v[5] == "free"
    assert 64 <= int(v[3]) <= 67  # elapsed from its start record to its last sign of life
    assert job.records()[-2][:2] == ["start", "101"] and job.records()[-1] == ["successor", "900", "101"]


def test_a_timeout_without_progress_spends_a_retry_and_the_cap_stops_the_loop(tmp_path) -> None:
    job = Job(tmp_path, max_retries=0)
    started_and_cut(job, "100", 5, 5)
    proc = job.begin("101", prev="100", FAKE_SCONTROL_STATE="TIMEOUT")
    assert proc.returncode == 1
    assert job.verdict()[5] == "retry"
    assert job.end()[:2] == ["end", "failed"] and job.end()[2].startswith("gave up: 1 resumes without progress")
    assert not job.calls("sbatch")  # no further job


@pytest.mark.parametrize(
    ("slurm", "sacct", "cause", "outcome", "action"),
    [
        ("PREEMPTED", "", None, "preempted", "free"),
        ("NODE_FAIL", "", None, "node-failure", "retry"),
        ("OUT_OF_MEMORY", "", None, "out-of-memory", "retry"),
        ("", "PREEMPTED", None, "preempted", "free"),  # Slurm forgot it; accounting remembers
        ("", "", "walltime", "walltime", "free"),  # no Slurm word at all: the job's own record
        ("", "", "service-died", "service-died", "retry"),
        ("", "", "signal", "signal", "retry"),
        ("", "", None, "unknown", "retry"),  # nothing recorded anywhere (node lost)
        ("", "", "driver-killed", "driver-killed", "retry"),  # the OOM killer, say
        ("", "", "preempted", "preempted", "free"),  # Slurm's word, kept by the job at its TERM
        ("", "", "cancelled", "cancelled", "stop"),  # a plain scancel, long forgotten by Slurm
        ("FAILED", "", "service-died", "service-died", "retry"),
    ],
)
def test_outcomes_and_actions(job, slurm, sacct, cause, outcome, action) -> None:
    started_and_cut(job, "100", 0, 3, cause=cause)
    proc = job.begin("101", prev="100", FAKE_SCONTROL_STATE=slurm, FAKE_SACCT_STATE=sacct)
    assert proc.returncode == (1 if action == "stop" else 0), proc.stderr
    assert job.verdict()[2] == outcome and job.verdict()[5] == action
    assert (job.end() is None) == (action != "stop")


@pytest.mark.parametrize("cause", ["driver-failed", "startup-failed"])
def test_a_failure_a_rerun_would_repeat_stops_the_chain(job, cause) -> None:
    started_and_cut(job, "100", 0, 3, cause=cause)
    proc = job.begin("101", prev="100", FAKE_SCONTROL_STATE="FAILED")
    assert proc.returncode == 1
    assert job.end()[1] == "failed" and "a rerun would fail the same way" in job.end()[2]


def test_a_cancelled_job_ends_the_chain(job) -> None:
    started_and_cut(job, "100", 0, 3)
    proc = job.begin("101", prev="100", FAKE_SCONTROL_STATE="CANCELLED")
    assert proc.returncode == 1
    assert job.end()[1] == "cancelled"


def test_the_user_cancel_marker_stops_any_job_of_the_chain(job) -> None:
    started_and_cut(job, "100", 0, 3)
    (job.dir / ".gym" / "cancelled").write_text("now\n")
    assert job.begin("101", prev="100", FAKE_SCONTROL_STATE="TIMEOUT").returncode == 1
    assert job.end()[1] == "cancelled"
    assert not [r for r in job.records() if r[0] == "verdict"]


def test_an_ended_chain_and_a_stranger_do_not_run(job) -> None:
    started_and_cut(job, "100", 0, 3)
    assert job.begin("555", prev="100", FAKE_SCONTROL_STATE="TIMEOUT").returncode == 1  # not the successor
    assert [r[0] for r in job.records()] == ["start", "successor"]
    job.chain(("end", "failed", "given up"))
    assert job.begin("101", prev="100", FAKE_SCONTROL_STATE="TIMEOUT").returncode == 1
    assert [r[0] for r in job.records()] == ["start", "successor", "end"]


def test_max_walltime_is_summed_over_the_chain(tmp_path) -> None:
    job = Job(tmp_path, max_walltime="0:30", seconds=30)
    job.chain(("verdict", "99", "timeout", 20, 2, "free", "earlier"))
    started_and_cut(job, "100", 2, 4, alive_for=12)
    proc = job.begin("101", prev="100", FAKE_SCONTROL_STATE="TIMEOUT")
    assert proc.returncode == 1
    assert job.end()[1] == "timed out" and job.end()[2].startswith("max_walltime 0:30 reached")


def test_a_slurm_requeue_of_the_same_job_is_judged_and_keeps_its_one_successor(job) -> None:
    job.chain(("start", "100", 0, 0), ("successor", "101", "100"))
    job.rollouts(4)
    attempt = job.dir / ".gym" / "100.attempt-1"
    attempt.mkdir()
    (attempt / "state").write_text("phase=running\n")
    proc = job.begin("100", requeued=1)
    assert proc.returncode == 0, proc.stderr
    assert job.verdict()[1:3] == ["100", "requeued"] and job.verdict()[5] == "free"
    assert not job.calls("sbatch")  # 101 still waits for this job; no second successor


def test_a_requeue_that_stops_the_chain_takes_back_the_queued_successor(tmp_path) -> None:
    job = Job(tmp_path, max_retries=0)
    job.chain(("start", "100", 0, 0), ("successor", "101", "100"))
    (job.dir / ".gym" / "100.attempt-1").mkdir()
    proc = job.begin("100", requeued=1)  # no progress: a retry, and none is allowed
    assert proc.returncode == 1
    assert job.calls("scancel") == ["101"]


def test_the_chain_limit_holds_whatever_the_caps(tmp_path) -> None:
    job = Job(tmp_path, max_retries=10**6)
    for i in range(RESUME_CHAIN_LIMIT - 1):
        job.chain(("start", str(i), 0, i), ("successor", str(i + 1), str(i)))
    job.chain(("start", "100", 0, 200), ("successor", "101", "100"))
    job.rollouts(300)
    job.left("100")
    proc = job.begin("101", prev="100", FAKE_SCONTROL_STATE="TIMEOUT")
    assert proc.returncode == 1
    assert job.end()[2] == f"gave up: the chain reached {RESUME_CHAIN_LIMIT} jobs"


def test_a_refused_successor_is_recorded_and_the_job_still_runs(job) -> None:
    proc = job.begin("100", FAKE_SBATCH_FAIL="QOSMaxSubmitJobPerUserLimit")
    assert proc.returncode == 0
    [rec] = [r for r in job.records() if r[0] == "nosuccessor"]
    assert rec[1] == "100" and "QOSMaxSubmitJobPerUserLimit" in rec[2]


@pytest.mark.parametrize(
    ("cause", "ends"), [("driver-failed", True), ("startup-failed", True), ("service-died", False), ("walltime", False)]
)
def test_a_job_failing_the_way_a_rerun_would_ends_the_chain_itself(job, cause, ends) -> None:
    assert job.begin("100").returncode == 0
    proc = job.bash("100", f'gym_resume_finish {cause} "driver failed with exit status 5"')
    assert proc.returncode == 0, proc.stderr
    if ends:
        assert job.end() == [
            "end",
            "failed",
            "driver failed with exit status 5; not resumed: a rerun would fail the same way",
        ]
        assert job.calls("scancel") == ["900"]  # its successor does not wait in the queue for nothing
    else:
        assert job.end() is None and not job.calls("scancel")


@pytest.mark.parametrize("env", [{"FAKE_SBATCH_CHATTY": "1"}, {"FAKE_SBATCH_CLUSTER": "gpu-cluster"}])
def test_the_successor_id_is_read_whatever_else_sbatch_prints(job, env) -> None:
    assert job.begin("100", **env).returncode == 0
    assert [r for r in job.records() if r[0] == "successor"] == [["successor", "900", "100"]]


def test_a_requeue_after_the_chain_moved_on_does_not_run_twice(job) -> None:
    job.chain(
        ("start", "100", 0, 0),
        ("successor", "101", "100"),
        ("verdict", "100", "timeout", 60, 5, "free", "x"),
        ("start", "101", 0, 5),
        ("successor", "102", "101"),
    )
    (job.dir / ".gym" / "100.attempt-1").mkdir()
    before = job.records()
    assert job.begin("100", requeued=1).returncode == 1
    assert job.records() == before and not job.calls("scancel")  # 101 owns the chain; nothing changed
