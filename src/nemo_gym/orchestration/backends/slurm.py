"""Slurm: one batch job per submitted job (``sbatch``), each step an ``srun`` over its nodes."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, ClassVar

from nemo_gym.orchestration import contract, shipping
from nemo_gym.orchestration.api import AnyComputeConfig, NodePool, SlurmComputeConfig
from nemo_gym.orchestration.backends import slurm_host, slurm_node
from nemo_gym.orchestration.backends.base import (
    CANCELLED_BY_USER,
    UNANSWERED,
    Backend,
    JobProbe,
    JobState,
    QueueDemand,
    QueueRequest,
    SchedulerView,
    Secrets,
    recorded_outcome,
    running_state,
    self_recorded_end,
    unanswered_state,
)
from nemo_gym.orchestration.contract import Phase, StateFile, Status
from nemo_gym.orchestration.rules import pools_differ
from nemo_gym.orchestration.shipping import Program
from nemo_gym.orchestration.templating import render_template

if TYPE_CHECKING:
    from nemo_gym.orchestration.backends import slurm_arrays, slurm_limits
    from nemo_gym.orchestration.plan.model import JobPlan, RunPlan

# Job arrays (slurm_arrays) and the site's limits (slurm_limits) are read when jobs are queued:
# imported there, so rendering (a dry run) never loads them.


def _options(extra: dict[str, str]) -> list[tuple[str, str | None]]:
    return [(k, v if v != "" else None) for k, v in extra.items()]


# Options by which a config already says how its nodes are shared: the config's word stands.
_SHARING_OPTIONS = ("exclusive", "oversubscribe", "share")


def _allocation(pool: NodePool, nodes: int, extra: dict[str, str], whole_nodes: bool) -> list[tuple[str, str | None]]:
    """What one component allocates: the pool's partition, nodes, tasks and GPUs a node, its options."""
    out: list[tuple[str, str | None]] = [
        ("partition", pool.partition),
        ("nodes", str(nodes)),
        ("ntasks-per-node", str(pool.ntasks_per_node)),
    ]
    if pool.gpus_per_node is not None:
        out.append(("gpus-per-node", str(pool.gpus_per_node)))
    if whole_nodes and not any(option in extra for option in _SHARING_OPTIONS):
        out.append(("exclusive", None))
    return out + _options(extra)


def _apptainer_image(image: str) -> str:
    if image.endswith(".sif") or image.startswith("/") or "://" in image:
        return image
    return "docker://" + image.replace("#", "/")


# What the probe brings back is the node's text, untrusted: a field is read from its first 4 KiB,
# and a word shown to the user is cut where no real scheduler word reaches.
_ANSWER_FIELD_CAP = 4096
_SHOWN_CAP = 200

# A job's id, or a job array task's (ID_TASK): a POSIX ERE, so that Python's re and the templates'
# bash [[ =~ ]], grep -E and awk all take it.
_JOB_ID_ERE = slurm_host.JOB_ID_PATTERN
_UNANSWERED = "?"  # the probe's line for a job slurmctld could not be asked about, then why


# Slurm requeues a preempted job where the site's PreemptMode is REQUEUE (the job then reads as
# requeued); PREEMPTED is the state of one it cancelled instead.
PREEMPTED_BY_SLURM = JobState(
    Status.PREEMPTED,
    "preempted by a higher-priority job, and not requeued: this site cancels preempted jobs (PREEMPTED)",
)


class SlurmBackend(Backend):
    name: ClassVar[str] = "slurm"
    job_kind: ClassVar[str] = "Slurm job"
    job_id_pattern: ClassVar[str] = _JOB_ID_ERE
    submit_command: ClassVar[str] = slurm_node.NodeScheduler.submit_command
    cancel_command: ClassVar[str] = "scancel"
    scheduler_name: ClassVar[str] = "Slurm"
    accounting_text: ClassVar[str | None] = "from Slurm's accounting"
    node_scheduler: ClassVar[str | None] = "slurm_node"
    feeds_lanes: ClassVar[bool] = True
    claims_ports: ClassVar[bool] = True
    cancel_marks_chain: ClassVar[bool] = True

    # -- planning ---------------------------------------------------------------------------------

    def directives(
        self, compute: AnyComputeConfig, benchmark: str, job_dir: str
    ) -> tuple[tuple[tuple[str, str | None], ...], ...]:
        """One component, or one per pool when the pools differ (a heterogeneous job: Slurm takes the
        job-wide options, name, account, time, directory and log, from the first)."""
        if not isinstance(compute, SlurmComputeConfig):
            raise TypeError(f"the Slurm backend runs slurm computes, not {compute.type}")
        job_wide: list[tuple[str, str | None]] = [("job-name", f"gym-{benchmark}"), ("account", compute.account)]
        if compute.walltime:
            job_wide.append(("time", compute.walltime))
        job_wide += [("chdir", job_dir), ("output", f"{job_dir}/{contract.job_log_pattern()}")]
        pools = list(compute.node_pools.values())
        if pools and pools_differ(compute.node_pools):
            components = [
                _allocation(
                    pool, pool.nodes, {**pool.extra_args, **compute.extra_args}, compute.exclusive_nodes is not False
                )
                for pool in pools
            ]
            return (tuple(job_wide + components[0]), *(tuple(c) for c in components[1:]))
        extra: dict[str, str] = {}
        for pool in pools:
            extra.update(pool.extra_args)
        extra.update(compute.extra_args)
        if not pools:
            return (tuple(job_wide + _options(extra)),)
        return (
            tuple(
                job_wide
                + _allocation(pools[0], sum(p.nodes for p in pools), extra, compute.exclusive_nodes is not False)
            ),
        )

    def job_id_attributes(self) -> tuple[tuple[str, str], ...]:
        return (("slurm_job_id", "SLURM_JOB_ID"),)

    # -- rendering --------------------------------------------------------------------------------

    def template_vars(self) -> dict[str, object]:
        return {
            "ending_groups": slurm_node.ending_groups,
            "task_id_variable": _TASK_ID_VARIABLE,
            "job_id_ere": _JOB_ID_ERE,
            "host_program": shipping.inline(Program.SCHEDULER_HOST),
            "lane_feeder_run": shipping.launch_words(Program.LANE_FEEDER, tree='"$gym_feeder"'),
            "node_scheduler": self.node_scheduler,
            "unanswered": _UNANSWERED,
            "apptainer_image": _apptainer_image,
        }

    def node_host(self, node: int) -> str:
        return f"$(gym_node_name {node})"

    # -- submission -------------------------------------------------------------------------------

    def queue_request(
        self, plans: list[RunPlan], secrets: list[Secrets], fed: Mapping[str, str] | None = None, together: int = 1
    ) -> QueueRequest:
        # The jobs of one shape go as job arrays (slurm_arrays), queued first; each run's part then
        # tells its tasks' ids as it tells a single job's.
        from nemo_gym.orchestration.backends import slurm_arrays

        fed = fed or {}
        units = [(job, run_secrets) for plan, run_secrets in zip(plans, secrets) for job in plan.submitted_jobs]
        found = slurm_arrays.arrays(units, fed, together)
        tasks = {job_dir: (k, i) for k, array in enumerate(found) for i, job_dir in enumerate(array.job_dirs)}
        request = super().queue_request(plans, secrets, fed, together)
        runs = tuple(
            replace(run, jobs=tuple(replace(job, array_task=tasks.get(job.job_dir)) for job in run.jobs))
            for run in request.runs
        )
        return QueueRequest(runs, tuple(_array_to_queue(array, self.template_vars()) for array in found))

    # -- site limits ------------------------------------------------------------------------------

    def queue_facts(self, job: JobPlan) -> dict[str, str]:
        options = dict(job.directives[0])
        facts = {key: options.get(key) or "" for key in ("account", "partition", "qos", "array")}
        if job.resume is not None:
            facts["successor"] = "1"  # a resumable job queues its successor as it starts: two at once
        if len(job.directives) > 1:
            facts["components"] = str(len(job.directives))  # a heterogeneous job: a job record each
        return {key: value for key, value in facts.items() if value}

    def limits_request(self, demands: list[QueueDemand]) -> dict[str, object] | None:
        from nemo_gym.orchestration.backends import slurm_limits

        queued = _queued(demands)
        return {
            "accounts": sorted({q.account for q in queued}),
            # Several jobs may go as a job array: how big one may be.
            "arrays": len(demands) > 1 or any(q.array_highest is not None for q in queued),
            "qos": sorted({q.qos.casefold() for q in queued if q.qos}),  # Slurm keeps QOS names lowercase
            "cap": slurm_limits.ANSWER_CAP,
        }

    def most_queued_together(self, answers: dict[str, str]) -> int:
        # A job array's indices run from 0 to MaxArraySize - 1 (0: the site has no arrays).
        from nemo_gym.orchestration.backends import slurm_arrays, slurm_limits

        largest = slurm_limits.max_array_size(answers.get("config", ""))
        return slurm_arrays.DEFAULT_MAX_ARRAY_SIZE if largest is None else largest

    def limits_problems(self, answers: dict[str, str], demands: list[QueueDemand]) -> list[str]:
        from nemo_gym.orchestration.backends import slurm_limits

        queued = _queued(demands)
        runs = len({d.run_id for d in demands})
        needed: dict[slurm_limits.SubmitLimit, int] = {}
        for q in queued:
            association = answers.get(f"account:{q.account}", "")
            qos = q.qos or slurm_limits.default_qos(
                answers.get("qos-defaults", ""), q.account, q.partition, slurm_limits.cluster_name(association)
            )
            limits = slurm_limits.association_limits(association, q.account, q.partition)
            if qos:
                limits += slurm_limits.qos_limits(
                    answers.get("qos", ""), answers.get("qos-table", ""), qos, answers.get("user", "").strip()
                )
            for limit in limits:
                needed[limit] = needed.get(limit, 0) + q.jobs
        problems = [
            _over_the_limit(limit, n, runs)
            for limit, n in sorted(needed.items(), key=lambda item: (item[0].qos or "", item[0].account, item[0].name))
            if n > limit.room()
        ]
        largest = slurm_limits.max_array_size(answers.get("config", ""))
        highest = max((q.array_highest for q in queued if q.array_highest is not None), default=None)
        if largest is not None and highest is not None and highest >= largest:
            problems.append(
                f"compute.extra_args.array: index {highest} is past the site's MaxArraySize={largest} (indices run "
                f"from 0 to {largest - 1}); nothing was submitted: ask for a smaller array"
            )
        return problems

    # -- status -----------------------------------------------------------------------------------

    def describe(self, answer: list[str]) -> SchedulerView:
        """scontrol's line and sacct's ``State|ExitCode`` (``describe_job`` in its template)."""
        scontrol, sacct = (field[:_ANSWER_FIELD_CAP] for field in (answer + ["", ""])[:2])
        if scontrol.startswith(_UNANSWERED):
            return SchedulerView(word=UNANSWERED, reason=scontrol[1:].strip()[:_SHOWN_CAP])
        fields = slurm_node.parse_scontrol_line(scontrol)
        state = fields.get("JobState", "")
        exit_code = fields.get("ExitCode", "")
        if not state and sacct.strip():
            # sacct remembers what scontrol forgot (MinJobAge), where there is accounting.
            cols = sacct.strip().split("|")
            state = slurm_node.state_word(cols[0])
            exit_code = cols[1] if len(cols) > 1 else ""
        restarts = fields.get("Restarts", "")
        word = slurm_node.state_word(state)
        return SchedulerView(
            word=state[:_SHOWN_CAP],
            waiting=word == slurm_node.PENDING,
            running=slurm_node.is_running(state),
            cancelled=word == slurm_node.CANCELLED,
            reason=fields.get("Reason", "")[:_SHOWN_CAP],
            restarts=contract.read_count(restarts),
            exit_code=exit_code[:_SHOWN_CAP],
            time_limit=fields.get("TimeLimit", "")[:_SHOWN_CAP],
        )

    def job_state(self, job_id: str, probe: JobProbe, rollouts: int, facts: dict[str, str]) -> JobState:
        view = probe.scheduler
        state = slurm_node.state_word(view.word)
        if view.restarts > probe.own.requeue and probe.own.written:
            # Written by an earlier run of a job Slurm has requeued since: not this run's state.
            probe = JobProbe(StateFile(), view, probe.cancelled_by_user)
        reason = view.reason or "no reason given"
        if probe.cancelled_by_user and probe.phase != Phase.SUCCEEDED and not view.running:
            return CANCELLED_BY_USER
        if view.restarts and (
            state in ("PENDING", "COMPLETING") and not probe.own.written or state.startswith("REQUEUE")
        ):
            return JobState(
                Status.QUEUED,
                (
                    f"requeued by Slurm after a node failure or preemption (attempt {view.restarts + 1}); "
                    f"waiting in the queue ({reason})"
                ),
            )
        by_slurm = self._ended_by_slurm(state, view)
        own_end = self_recorded_end(probe)
        if own_end is not None and (state == "PENDING" or by_slurm is not None and own_end.status == Status.SUCCEEDED):
            # A job that ended by itself is neither queued nor ended by Slurm: Slurm speaks of another
            # job of this id (a copied run's ids name other jobs on another cluster, or after a reset).
            return JobState(own_end.status, f"{own_end.detail} ({contradiction(job_id, probe)})")
        if by_slurm is not None:
            return by_slurm
        recorded = recorded_outcome(probe)
        if recorded is not None:
            return recorded
        if view.word == UNANSWERED:
            return unanswered_state("Slurm", view, probe, rollouts)
        if state == "FAILED":
            return JobState(
                Status.FAILED, f"the job failed (exit code {view.exit_code or '?'}) before it recorded a reason"
            )
        if state == "COMPLETED":
            return JobState(Status.UNKNOWN, "Slurm says COMPLETED but the job recorded no outcome")
        if view.running:
            return running_state(probe, rollouts)
        last = f" (last phase: {probe.own.phase_word})" if probe.own.written else ""
        return JobState(Status.UNKNOWN, f"Slurm no longer knows job {job_id} and the job recorded no outcome{last}")

    @staticmethod
    def _ended_by_slurm(state: str, view: SchedulerView) -> JobState | None:
        """States in which Slurm's word beats whatever the job wrote."""
        if state == "PENDING":
            return JobState(Status.QUEUED, f"waiting in the Slurm queue ({view.reason or 'no reason given'})")
        if state == "CANCELLED":
            return JobState(Status.CANCELLED, "cancelled (scancel, by the user or an administrator)")
        if state == "TIMEOUT":
            return JobState(Status.TIMED_OUT, f"walltime reached ({view.time_limit or 'its limit'})")
        if state in ("NODE_FAIL", "BOOT_FAIL"):
            return JobState(Status.FAILED, f"a node failed ({state})")
        if state == "OUT_OF_MEMORY":
            return JobState(Status.FAILED, "out of memory")
        if state == "PREEMPTED":
            return PREEMPTED_BY_SLURM
        return None

    # -- cancel -----------------------------------------------------------------------------------


# How an array's script tells a task's job script the task's id (identity in its template).
_TASK_ID_VARIABLE = "GYM_ARRAY_TASK_JOB_ID"


@dataclass(frozen=True)
class ArrayToQueue:
    """One job array as the template queues it: its script (rendered) and manifest written into
    its first task's job directory, then one sbatch with its runs' secrets."""

    home: str  # where its script and manifest are written
    script: str
    manifest: str
    script_text: str
    job_dirs: tuple[str, ...]
    indices: str
    secrets: Secrets


def _array_to_queue(array: slurm_arrays.Array, backend_vars: dict[str, object]) -> ArrayToQueue:
    from nemo_gym.orchestration.backends import slurm_arrays

    script, manifest = (f"{array.home}/{name}" for name in (slurm_arrays.ARRAY_SCRIPT, slurm_arrays.ARRAY_MANIFEST))
    text = render_template(
        "slurm-array.sh.j2",
        backend_vars=backend_vars,
        options=array.options,
        tasks=len(array.job_dirs),
        manifest=manifest,
        task_log=contract.job_log("${SLURM_ARRAY_JOB_ID}_${gym_task}"),
    )
    home = f"{array.home}/{contract.MARKERS_DIR}"
    return ArrayToQueue(home, script, manifest, text.rstrip(), array.job_dirs, array.indices, array.secrets)


@dataclass(frozen=True)
class _Queued:
    """What one submitted job holds in the queue at once, and under which association."""

    account: str
    partition: str
    jobs: int  # one, one per array task, and one more for a resumable job's successor
    array_highest: int | None
    qos: str | None = None  # as the job asks (extra_args.qos); None: its association's default


def _queued(demands: list[QueueDemand]) -> list[_Queued]:
    from nemo_gym.orchestration.backends import slurm_limits

    found = []
    for demand in demands:
        facts = demand.facts
        tasks = slurm_limits.array_tasks(facts["array"]) if facts.get("array") else None
        found.append(
            _Queued(
                facts.get("account", ""),
                facts.get("partition", ""),
                (tasks.count if tasks else 1) * _count(facts.get("components")) + (1 if facts.get("successor") else 0),
                tasks.highest if tasks else None,
                facts.get("qos") or None,
            )
        )
    return found


def _count(word: str | None) -> int:
    return int(word) if word and word.isdigit() and 0 < int(word) < 10_000 else 1


def _over_the_limit(limit: slurm_limits.SubmitLimit, needed: int, runs: int) -> str:
    what = f"the {runs} runs need" if runs > 1 else "the run needs"
    where = f"QOS {limit.qos}" if limit.qos is not None else f"compute.account {limit.account}"
    other = ", or choose another QOS (compute.extra_args.qos)" if limit.qos is not None else ""
    return (
        f"{where}: {what} {needed} Slurm job(s) queued at once, but the site lets you queue "
        f"{limit.room()} more ({limit.describe()}); nothing was submitted: submit fewer runs or benchmarks at a "
        f"time, or wait until {limit.wait_for()}{other}"
    )


def contradiction(job_id: str, probe: JobProbe) -> str:
    """The flag of a Slurm answer that contradicts the job's own job-end record."""
    return (
        f"the job's own job-end record (exit status {probe.job_end}) wins over Slurm, which says "
        f"{slurm_node.state_word(probe.scheduler.word)} of job {job_id}: another job of this id?"
    )
