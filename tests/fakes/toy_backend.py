"""A third backend, for tests only: ``toyq``, an imaginary batch queue with three commands
(``toyq submit SCRIPT`` prints a job id, queued by its template's ``queue_runs``, ``toyq show ID`` prints ``waiting``, ``running`` or
``done``, ``toyq kill ID``). It is what a new scheduler takes: this module, its template
(``templates/backend-toy.sh.j2`` beside it) and one line in the registry (test_seam.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from nemo_gym.orchestration.backends.base import (
    Backend,
    JobProbe,
    JobState,
    SchedulerView,
    recorded_outcome,
)
from nemo_gym.orchestration.contract import Status

if TYPE_CHECKING:
    from nemo_gym.orchestration.api import AnyComputeConfig


class ToyBackend(Backend):
    name: ClassVar[str] = "toy"
    job_kind: ClassVar[str] = "toyq job"
    job_id_pattern: ClassVar[str] = r"toy-\d+"
    submit_command: ClassVar[str] = "toyq submit"
    cancel_command: ClassVar[str] = "toyq kill"
    scheduler_name: ClassVar[str] = "toyq"

    def directives(
        self, compute: AnyComputeConfig, benchmark: str, job_dir: str
    ) -> tuple[tuple[tuple[str, str | None], ...], ...]:
        return ((("name", f"gym-{benchmark}"), ("dir", job_dir)),)

    def node_host(self, node: int) -> str:
        return "localhost"

    def describe(self, answer: list[str]) -> SchedulerView:
        word = answer[0] if answer else ""
        return SchedulerView(word=word, waiting=word == "waiting", running=word == "running")

    def job_state(self, job_id: str, probe: JobProbe, rollouts: int, facts: dict[str, str]) -> JobState:
        recorded = recorded_outcome(probe)
        if recorded is not None:
            return recorded
        if probe.scheduler.waiting:
            return JobState(Status.QUEUED, "waiting in toyq")
        if probe.scheduler.running:
            return JobState(Status.RUNNING, f"{rollouts} rollout(s) written")
        return JobState(Status.UNKNOWN, f"toyq says {probe.scheduler.word or 'nothing'} of job {job_id}")
