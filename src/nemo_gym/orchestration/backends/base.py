"""The backend seam: everything that differs between running a plan on Slurm and on this machine.

A backend plans its jobs' scheduler options, prints each step's launch line and the job's shell
fragments (its identity, what a TERM means), adds the run files it needs, writes the lines that
submit the jobs, and reads what its scheduler says of a job for status and cancel. Everything
else — the plan, the job scripts, the probes' own files, the record — is shared.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar

from nemo_gym.orchestration import contract
from nemo_gym.orchestration.contract import Cause, Phase, StateFile, Status
from nemo_gym.orchestration.verbs.resubmit.recovery import Remedy

if TYPE_CHECKING:
    from nemo_gym.orchestration.api import AnyComputeConfig, SubmitConfig
    from nemo_gym.orchestration.plan.model import JobPlan, RunPlan


@dataclass(frozen=True)
class QueueDemand:
    """One job about to be queued, as the site's limits weigh it: its run, and what its backend
    queues it under (``Backend.queue_facts``: the backend's own words, also kept in the run's
    record, so that a resubmission is weighed as its submission was)."""

    run_id: str
    facts: dict[str, str]


# A run's secrets, as its jobs are given them where they are queued: (name, value) pairs.
Secrets = tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class JobToQueue:
    """One job of a submission, as its backend's template queues it."""

    unit: str
    job_dir: str
    fed_by: str | None = None  # queued later, by this job of its lane (``run/benchmark``)
    array_task: tuple[int, int] | None = None  # (array k, task i): queued with an array, before
    words: Mapping[str, str] = field(default_factory=dict)  # its backend's own words for it


@dataclass(frozen=True)
class RunToQueue:
    run_id: str
    run_dir: str
    secrets: Secrets
    jobs: tuple[JobToQueue, ...]


@dataclass(frozen=True)
class QueueRequest:
    """Everything a submission queues, as pure data for the backend's ``queue_runs`` macro."""

    runs: tuple[RunToQueue, ...]
    arrays: tuple[object, ...] = ()  # what its backend queues first, for jobs that say ``array_task``


@dataclass(frozen=True)
class SchedulerView:
    """What a scheduler says of one job, in neutral terms: its backend's ``describe`` reads the
    scheduler's own answer into it. Empty when the scheduler does not know the job (or there is
    no scheduler)."""

    word: str = ""  # the scheduler's own word for the job's state, as shown to the user; "" unknown
    waiting: bool = False  # queued, not started yet
    running: bool = False  # holds its allocation: starting, running or being ended
    cancelled: bool = False  # ended by a cancel (by the user or an administrator)
    reason: str = ""  # why it waits or ended, in the scheduler's words
    restarts: int = 0  # how often the scheduler started it again (a requeue)
    exit_code: str = ""
    time_limit: str = ""


@dataclass(frozen=True)
class JobProbe:
    """One job as the status probe found it: its own state file and what the scheduler says."""

    own: StateFile = StateFile()
    scheduler: SchedulerView = SchedulerView()
    cancelled_by_user: bool = False
    job_end: str | None = None  # the exit status of the job's own job-end event, if it wrote one
    cause: Cause | None = None  # why it failed, as it recorded (None: none, or a word this version does not know)

    @property
    def phase(self) -> Phase | None:
        return self.own.phase

    @property
    def detail(self) -> str:
        return self.own.detail


@dataclass(frozen=True)
class JobState:
    """How one job is shown: its status, and the words that say why."""

    status: Status
    detail: str


CANCELLED_BY_USER = JobState(Status.CANCELLED, "cancelled by the user (gym eval cancel)")


def recorded_outcome(probe: JobProbe) -> JobState | None:
    """The end a job recorded itself (succeeded, failed, cancelled), if it did."""
    if probe.phase is not None and probe.phase.ended:
        if probe.phase == Phase.FAILED and probe.cause == Cause.WALLTIME:
            # Its own record says its walltime ended it: timed out, as the scheduler says too once it
            # has caught up (it may still call the job COMPLETING when the probe looks).
            return JobState(Status.TIMED_OUT, f"walltime reached ({probe.scheduler.time_limit or 'its limit'})")
        if probe.phase == Phase.FAILED and probe.cause == Cause.PREEMPTED:
            # Its own record says a preemption ended it: preempted, never failed (the scheduler may
            # have forgotten it, or still call it COMPLETING).
            return JobState(Status.PREEMPTED, probe.detail)
        if probe.phase == Phase.FAILED and probe.cause == Cause.CANCELLED:
            # Its own record says a cancel ended it (while the scheduler may still call it COMPLETING):
            # cancelled, never failed, and the user's if a cancel marker says so.
            return CANCELLED_BY_USER if probe.cancelled_by_user else JobState(Status.CANCELLED, probe.detail)
        if probe.phase == Phase.CANCELLED and probe.cancelled_by_user:
            # A shared job skipped it, cancelled alone (gym eval cancel of its run), and goes on.
            return CANCELLED_BY_USER
        return JobState(Status.of(probe.phase), probe.detail)
    return None


def self_recorded_end(probe: JobProbe) -> JobState | None:
    """The end a job recorded itself and confirmed with its job-end event: the job's own word that it
    has ended, which no answer of the scheduler about a job of the same id can undo."""
    recorded = recorded_outcome(probe)
    if recorded is None or probe.job_end is None:
        return None
    if (recorded.status == Status.SUCCEEDED) != (probe.job_end == "0"):
        return None  # the two records disagree: neither is the job's settled word
    return recorded


# SchedulerView.word of a job its scheduler could not be asked about (its controller down, its API
# out of reach): not a job the scheduler forgot, nor one that ended.
UNANSWERED = "unanswered"


def unanswered_state(scheduler: str, view: SchedulerView, probe: JobProbe, rollouts: int) -> JobState:
    """A job its scheduler could not be asked about: shown as the job itself last wrote, and said
    to be that, never ended by a scheduler that said nothing."""
    why = f"{scheduler} cannot be reached" + (f" ({view.reason})" if view.reason else "")
    if probe.own.written:
        last = running_state(probe, rollouts)
        return JobState(last.status, f"{why}; as the job last wrote: {last.detail}")
    return JobState(Status.QUEUED, f"{why}; the job has written nothing yet, so it was last known queued")


def running_state(probe: JobProbe, rollouts: int) -> JobState:
    """A job whose scheduler (or runner) still runs it, as far as its own phase tells."""
    if probe.phase == Phase.RUNNING:
        return JobState(Status.RUNNING, f"driver running, {rollouts} rollout(s) written")
    if probe.phase == Phase.QUEUED:
        return JobState(Status.QUEUED, probe.detail or "waiting for the jobs before it")
    return JobState(Status.STARTING, probe.detail or "starting")


class Backend(ABC):
    name: ClassVar[str]  # the compute ``type`` it runs; the record's ``executor``
    job_kind: ClassVar[str]  # how its jobs are called to the user: "Slurm job", "local job"
    job_id_pattern: ClassVar[str]  # a regex matching its job ids exactly
    # Whether its cancel_job macro writes contract.CHAIN_CANCELLED_FILE, which a job not started yet
    # reads as it starts (and status as the user's cancel).
    cancel_marks_chain: ClassVar[bool] = False
    # Its own words, for messages about what it did or refused: what queues a job, what cancels
    # one, who keeps its jobs (the Slurm backend's commands and "Slurm"; the local runner's).
    submit_command: ClassVar[str]
    cancel_command: ClassVar[str]
    scheduler_name: ClassVar[str]
    # Where its jobs' costs come from when it keeps accounts (usage.SOURCE_ACCOUNTING), for the
    # total's line; None when it keeps none.
    accounting_text: ClassVar[str | None] = None
    # Its module in ``backends/`` that the resume judge talks to its scheduler through on the node
    # (``resume.Scheduler``; stdlib, Python 3.8), or None: then it runs no resumable benchmark.
    node_scheduler: ClassVar[str | None] = None
    # Whether its jobs can queue the next of their lane as they start (``feeding``; its template's
    # ``feed_lane``), so that a submission past the site's limits is fed through them.
    feeds_lanes: ClassVar[bool] = False
    # Whether its jobs' servers share a node's ports with other jobs' (no network of their own per
    # job): then a job of one node claims its servers' ports on its node when it starts (ports.py).
    claims_ports: ClassVar[bool] = False
    # Whether a job script can stop its services' steps and launch them again (a warm lane whose
    # server broke in a reload starts it again): not where each service is a container of its own.
    restarts_services: ClassVar[bool] = True

    @property
    def supports_resume(self) -> bool:
        return self.node_scheduler is not None

    def config_problem(self, config: SubmitConfig, compute_name: str) -> tuple[str, str] | None:
        """What of a validated config this backend cannot run: (its YAML path, why and the fix),
        or None. Asked by ``api.SubmitConfig``'s validation, so a refusal is one line at the key."""
        return None

    def config_warnings(self, config: SubmitConfig, compute_name: str, environ: Mapping[str, str]) -> list[str]:
        """What it runs otherwise than the user may expect, one line each (``preflight``'s
        warnings: --dry-run and submit), given the submitting shell's environment."""
        return []

    # -- planning ---------------------------------------------------------------------------------

    def directives(
        self, compute: AnyComputeConfig, benchmark: str, job_dir: str
    ) -> tuple[tuple[tuple[str, str | None], ...], ...]:
        """The scheduler options of one job, one tuple per component (several make a heterogeneous
        job), each of (option, value) pairs; value None for a bare flag. Data in the plan: its
        template's ``directives`` macro prints them into the job script."""
        return ()

    def job_id_attributes(self) -> tuple[tuple[str, str], ...]:
        """Telemetry resource attributes read from the job's env: (attribute, variable)."""
        return ()

    # -- rendering --------------------------------------------------------------------------------

    @abstractmethod
    def node_host(self, node: int) -> str:
        """A shell word for allocation node ``node``'s name, as the job script's shell can use it."""

    def template(self) -> str:
        """Its shell fragments, as Jinja macros: of the job script ``directives`` (its header),
        ``identity``, ``ending_cause``, ``term_handling`` and ``launch_step`` (how a step's script is
        started on its nodes, given its ``Launch`` and the container runtime); of the step library
        ``this_node``; of the status probe ``describe_job`` (below), ``probe_accounting`` (the
        scheduler's accounting records, with every job id of the run in ``$gym_all_ids``) and
        ``probe_tail`` (run-wide facts, given the run's directory)."""
        return f"backend-{self.name}.sh.j2"

    def template_vars(self) -> dict[str, object]:
        """What its template's macros read besides the contract ``c`` (its own tables)."""
        return {}

    def run_files(self, plan: RunPlan) -> dict[str, str]:
        """Files it adds to the run directory (relative path -> text)."""
        return {}

    # -- submission -------------------------------------------------------------------------------

    def queue_request(
        self, plans: list[RunPlan], secrets: list[Secrets], fed: Mapping[str, str] | None = None, together: int = 1
    ) -> QueueRequest:
        """What its template's ``queue_runs`` macro queues, once the runs' directories are in
        place (a sweep's runs; often just one): each run's jobs, each run's secrets (``secrets``,
        per run: exported only where its jobs are queued). ``fed``: the jobs (by job directory) not
        queued now, because the job named (``run/benchmark``) queues them as it starts
        (``feeding``; only a backend that ``feeds_lanes`` is given any). ``together``: the most
        jobs the scheduler takes in one call (``most_queued_together``). The macro prints one
        ``contract.RUN_MARKER<run id>`` line per run, then one
        ``contract.JOB_MARKER<benchmark>:<status>:<output>`` line per job (``queue.sh.j2``), a
        fed job's status ``contract.FED_STATUS``."""
        fed = fed or {}
        runs = tuple(
            RunToQueue(
                plan.run_id,
                plan.run_dir,
                run_secrets,
                tuple(self.job_to_queue(plan, job, fed.get(job.job_dir)) for job in plan.submitted_jobs),
            )
            for plan, run_secrets in zip(plans, secrets)
        )
        return QueueRequest(runs)

    def job_to_queue(self, plan: RunPlan, job: JobPlan, fed_by: str | None) -> JobToQueue:
        """One job as its template's ``queue_runs`` queues it (a backend adds its own words)."""
        return JobToQueue(job.unit, job.job_dir, fed_by)

    # -- site limits ------------------------------------------------------------------------------

    # Before a submission writes anything, the site's limits on what the user may have queued are
    # asked (templates/site-limits.sh.j2 calls its template's ``site_limits(request)`` macro, whose
    # answers follow ``contract.LIMITS_MARKER<name>`` lines), so that a submission that cannot fit
    # is refused whole instead of half-queued; a resubmission likewise.

    def queue_facts(self, job: JobPlan) -> dict[str, str]:
        """What the job is queued under, as the site's limits weigh it (the scheduler's words);
        kept in the record for a resubmission."""
        return {}

    def limits_request(self, demands: list[QueueDemand]) -> dict[str, object] | None:
        """What ``site_limits`` asks the scheduler for these jobs (None: nothing to ask)."""
        return None

    def most_queued_together(self, answers: dict[str, str]) -> int:
        """How many jobs of one shape one call to the scheduler may queue together, by what the
        site's ``answers`` say (1: each job is queued on its own)."""
        return 1

    def limits_problems(self, answers: dict[str, str], demands: list[QueueDemand]) -> list[str]:
        """Why these jobs cannot all be queued within the limits ``answers`` state (by marker
        name); empty when they fit, or when the scheduler did not say."""
        return []

    # -- resubmit ---------------------------------------------------------------------------------

    # gym eval resubmit queues a benchmark's staged job script again (templates/resubmit.sh.j2)
    # with its template's macros: ``queue_held_job(job)`` queues it so that it cannot start yet,
    # setting gym_id (empty when refused), gym_rc and gym_out; ``release_job()`` lets "$gym_id"
    # start once the chain records it; ``start_queued(run)`` runs after a run's jobs (with what
    # ``requeue_context`` adds to ``run``).

    def is_job_id(self, text: str) -> bool:
        """Whether ``text`` (read back: a record, a chain file) is a job id this scheduler gives."""
        return re.fullmatch(self.job_id_pattern, text) is not None

    def requeued_id(self, first_id: str, attempt: int) -> str:
        """The id a job queued again is given in advance ("" when its scheduler assigns one)."""
        return ""

    def requeue_context(self, run_id: str, run_dir: str, jobs: list[RequeuedJob]) -> dict[str, str]:
        """What ``start_queued`` is given of a run besides its jobs."""
        return {}

    # -- status and cancel ------------------------------------------------------------------------

    # The status probe asks the scheduler of each job as TorchX's ``describe`` does, in two
    # halves: its template's ``describe_job`` macro defines the bash function
    # ``gym_describe_job ID``, which sets ``gym_answer`` to the scheduler's answer about job ID,
    # one line (fields separated by ``contract.FIELD_SEPARATOR``; empty when it has no scheduler), and
    # ``describe`` reads those fields back into a neutral ``SchedulerView``.

    def describe(self, answer: list[str]) -> SchedulerView:
        """A job's ``SchedulerView`` from the fields its ``gym_describe_job`` answered."""
        return SchedulerView()

    def allocated_gpus(self, plan: RunPlan) -> dict[str, int]:
        """Benchmark -> the GPUs its job's allocation holds, recorded at submit for its GPU-hours
        where there is no accounting: what the plan gives it."""
        shared = plan.shared
        return {job.unit: (shared.gpus if shared is not None else job.gpus) for job in plan.jobs}

    @abstractmethod
    def job_state(self, job_id: str, probe: JobProbe, rollouts: int, facts: dict[str, str]) -> JobState:
        """The state of one job from its own state file and its scheduler's word.

        ``facts`` are the run-wide facts its template's ``probe_tail`` printed."""


@dataclass(frozen=True)
class RequeuedJob:
    """One benchmark gym eval resubmit queues again: what the resubmit script is given of it."""

    benchmark: str
    job_dir: str
    script: str  # its staged job script
    attempt: int  # the attempt the new job is (2 for the first resubmit)
    remedy: Remedy
    after: str  # the job it follows (the latest of the attempt before)
    local_id: str = ""  # the id given in advance (``Backend.requeued_id``), if its scheduler gives none
    queued_as: Mapping[str, str] = field(default_factory=dict)  # what it was submitted under (the record's)

    @property
    def attempt_dir(self) -> str:
        return contract.attempt_dir(self.attempt)

    @property
    def generates_missing(self) -> bool:
        return self.remedy == Remedy.GENERATE_MISSING

    @property
    def feeds(self) -> bool:
        """A lane's job its lane stalled at: queued as its first job, recorded as fed."""
        return self.remedy == Remedy.FEED
