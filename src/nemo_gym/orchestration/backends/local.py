"""This machine: the same jobs, no scheduler. A runner script starts them one after another (they
would share the machine's ports and GPUs); each step is a process group of its own."""

from __future__ import annotations

import os
import shlex
import subprocess
from collections.abc import Mapping
from types import SimpleNamespace
from typing import TYPE_CHECKING, ClassVar

from nemo_gym.orchestration import contract
from nemo_gym.orchestration.backends.base import (
    CANCELLED_BY_USER,
    Backend,
    JobProbe,
    JobState,
    RequeuedJob,
    own_process_group_line,
    recorded_outcome,
    run_marker_line,
    running_state,
)
from nemo_gym.orchestration.contract import Phase, Status

if TYPE_CHECKING:
    from nemo_gym.orchestration.plan.model import Launch, RunPlan
    from nemo_gym.orchestration.record import SubmissionRecord

RUNNER_FACT = "runner"
# Every local run on this machine waits for this lock (GYM_LOCAL_LOCK moves it): in /tmp, so users
# share it; created world-writable, so the next user can take it.
LOCAL_RUN_LOCK = "/tmp/gym-orchestration-local.lock"


class LocalBackend(Backend):
    name: ClassVar[str] = "local"
    job_kind: ClassVar[str] = "local job"
    # local-<run>-<n>, and .<attempt> once gym eval resubmit queued it again.
    job_id_pattern: ClassVar[str] = r"local-[0-9a-f]+-\d+(?:\.\d+)?"
    submit_command: ClassVar[str] = contract.LOCAL_RUNNER_SCRIPT  # a command word: messages say "<it> refused"
    cancel_command: ClassVar[str] = "kill"
    scheduler_name: ClassVar[str] = "the local runner"

    def launch_line(self, launch: Launch, runtime: str) -> str:
        return own_process_group_line(launch)

    def node_host(self, node: int) -> str:
        return "localhost"

    def run_files(self, plan: RunPlan) -> dict[str, str]:

        return {contract.LOCAL_RUNNER_SCRIPT: runner_script(plan.run_id, plan.run_dir, list(plan.submitted_jobs))}

    def requeue_context(self, run_id: str, run_dir: str, jobs: list[RequeuedJob]) -> dict[str, str]:
        # The jobs wait for a runner of their own, which the resubmit script starts from its text.
        again = [SimpleNamespace(job_dir=job.job_dir, local_job_id=job.local_id) for job in jobs]
        return {"runner": runner_script(run_id, run_dir, again, resubmitted=True)}

    def requeued_id(self, first_id: str, attempt: int) -> str:
        return f"{first_id}.{attempt}"

    def submit_lines(self, plan: RunPlan, fed: Mapping[str, str]) -> list[str]:
        # Detached from this command: the run goes on after `gym eval submit` returns.
        runner = shlex.quote(f"{plan.run_dir}/{contract.LOCAL_RUNNER_SCRIPT}")
        return [f"setsid nohup bash {runner} >/dev/null 2>&1 </dev/null &", *_job_marker_lines(plan)]

    def submit_runs_lines(
        self, plans: list[RunPlan], exports: list[list[str]], fed: Mapping[str, str] | None = None, together: int = 1
    ) -> list[str]:
        # The runs of a sweep go one after another, like a run's benchmarks (they would share the
        # machine's ports and GPUs): one detached chain starts each run's runner when the one
        # before has ended, each with only its own secrets. The chain's text reaches its bash
        # through a pipe from a builtin, so the secrets in it are in no file and no process's
        # arguments. Until its turn a run's jobs read as queued, and its runner pid file names
        # the chain, which is alive while the run is still to come.
        if len(plans) == 1:
            return super().submit_runs_lines(plans, exports)
        chain = []
        for plan, export in zip(plans, exports):
            runner = shlex.quote(f"{plan.run_dir}/{contract.LOCAL_RUNNER_SCRIPT}")
            chain.append(f"( {'; '.join([*export, f'bash {runner}'])} ) >/dev/null 2>&1 </dev/null")
        lines = [f"gym_chain={shlex.quote(chr(10).join(chain))}"]
        for plan in plans[1:]:
            lines += _queued_behind_lines(plan)
        lines += ["printf '%s\\n' \"$gym_chain\" | setsid nohup bash -s >/dev/null 2>&1 &", "gym_chain_pid=$!"]
        for plan in plans[1:]:
            lines.append(f'echo "$gym_chain_pid" >{shlex.quote(f"{plan.run_dir}/{contract.RUNNER_PID_FILE}")}')
        for plan in plans:
            lines += [run_marker_line(plan), *_job_marker_lines(plan)]
        return lines

    def probe_tail(self, record: SubmissionRecord) -> list[str]:
        pid = shlex.quote(f"{record.run_dir}/{contract.RUNNER_PID_FILE}")
        alive = f"{contract.PROBE_MARKER}{contract.ProbeRecord.FACT}{contract.FIELD_SEPARATOR}{RUNNER_FACT}{contract.FIELD_SEPARATOR}"
        return [
            f'if [ -f {pid} ] && kill -0 "$(cat {pid})" 2>/dev/null; then printf %s\\\\n {shlex.quote(alive + "alive")}; '
            f"else printf %s\\\\n {shlex.quote(alive + 'gone')}; fi"
        ]

    def job_state(self, job_id: str, probe: JobProbe, rollouts: int, facts: dict[str, str]) -> JobState:
        runner_alive = facts.get(RUNNER_FACT) == "alive"
        still_going = runner_alive and probe.phase in (Phase.STARTING, Phase.RUNNING)
        if probe.cancelled_by_user and probe.phase != Phase.SUCCEEDED and not still_going:
            return CANCELLED_BY_USER
        recorded = recorded_outcome(probe)
        if recorded is not None:
            return recorded
        if runner_alive:
            return running_state(probe, rollouts)
        if probe.own.written:
            return JobState(
                Status.UNKNOWN, "the local runner is gone but the job recorded no outcome (machine restarted?)"
            )
        return JobState(Status.UNKNOWN, "the job has not started and the local runner is gone")

    def allocated_gpus(self, plan: RunPlan) -> dict[str, int]:
        # No allocation: a local job holds this machine, so its GPU-hours count what it shows at submit.
        gpus = visible_gpus()
        return {job.unit: gpus for job in plan.jobs}


def runner_script(run_id: str, run_dir: str, jobs: list, resubmitted: bool = False) -> str:
    """The local runner: ``jobs`` (each with ``job_dir`` and ``local_job_id``) one after another,
    once the machine's local-run lock is this run's. ``resubmitted``: only the jobs whose chain
    records them (gym eval resubmit queues a job only once it has recorded it)."""
    from nemo_gym.orchestration.templating import render_template

    return render_template(
        "run-local.sh.j2", run_id=run_id, run_dir=run_dir, jobs=jobs, lock_path=LOCAL_RUN_LOCK, resubmitted=resubmitted
    )


def _job_marker_lines(plan: RunPlan) -> list[str]:
    return [
        f"printf '%s%s:0:%s\\n' {shlex.quote(contract.JOB_MARKER)} {shlex.quote(job.unit)} {job.local_job_id}"
        for job in plan.submitted_jobs
    ]


def _queued_behind_lines(plan: RunPlan) -> list[str]:
    """A later run's jobs, queued until its runner starts (which writes its own queued state)."""
    lines = []
    for job in plan.submitted_jobs:
        state_dir = f"{job.job_dir}/{contract.state_dir(job.local_job_id)}"
        state = f"{contract.STATE_KEYS[0]}={Phase.QUEUED}\\n{contract.STATE_KEYS[1]}=waiting for the runs before it"
        lines.append(
            f"mkdir -p {shlex.quote(state_dir)} && printf '{state}\\n' >{shlex.quote(state_dir + '/' + contract.STATE_FILE)}"
        )
    return lines


def visible_gpus(environ: Mapping[str, str] = os.environ) -> int:
    """The GPUs a process started here can use: ``CUDA_VISIBLE_DEVICES`` when it is set (its
    entries up to the first invalid one, where CUDA stops counting), else ``nvidia-smi -L``'s list;
    0 without either."""
    listed = environ.get("CUDA_VISIBLE_DEVICES")
    if listed is not None:
        count = 0
        for item in listed.split(","):
            item = item.strip()
            if not item or item.startswith("-") or item.lower() == "nodevfiles":
                break
            count += 1
        return count
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=20, env=dict(environ)).stdout
    except (OSError, subprocess.SubprocessError):
        return 0
    return sum(1 for line in out.splitlines() if line.startswith("GPU "))
