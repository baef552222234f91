"""This machine: the same jobs, no scheduler. A runner script starts them one after another (they
would share the machine's ports and GPUs); each step is a process group of its own."""

from __future__ import annotations

import os
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
    JobToQueue,
    RequeuedJob,
    recorded_outcome,
    running_state,
)
from nemo_gym.orchestration.contract import Phase, Status

if TYPE_CHECKING:
    from nemo_gym.orchestration.plan.model import JobPlan, RunPlan

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
    claims_ports: ClassVar[bool] = True  # two runs on this machine at once share its ports

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

    def job_to_queue(self, plan: RunPlan, job: JobPlan, fed_by: str | None) -> JobToQueue:
        # No scheduler to answer: its id is the one given in advance, its runner the run's.
        words = {"local_id": job.local_job_id, "state_dir": f"{job.job_dir}/{contract.state_dir(job.local_job_id)}"}
        return JobToQueue(job.unit, job.job_dir, fed_by, words=words)

    def template_vars(self) -> dict[str, object]:
        return {"runner_fact": RUNNER_FACT}

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
