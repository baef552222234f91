"""Each job's state told from the probe's answer: the job's own word against the scheduler's, resume chains,
lanes, a sharded benchmark's shards folded into one status."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, replace

from nemo_gym.orchestration import usage
from nemo_gym.orchestration.backends import Backend
from nemo_gym.orchestration.backends.base import CANCELLED_BY_USER, JobProbe, JobState
from nemo_gym.orchestration.chain import Chain
from nemo_gym.orchestration.contract import Outcome, Status
from nemo_gym.orchestration.facts import ReceiptState
from nemo_gym.orchestration.observe.costs import benchmark_usage, own_records_by_job, run_usage
from nemo_gym.orchestration.observe.reading import ProbeAnswer
from nemo_gym.orchestration.observe.status import MISSING_NAMED, Attempt, JobStatus, SampleCheck, missing_text, rounded
from nemo_gym.orchestration.record import BenchmarkJob, SubmissionRecord
from nemo_gym.orchestration.usage import NO_USAGE, OwnRecord

_NO_PROBE = JobProbe()  # a job the probe did not reach
# A job that ended so is one a resumable chain may have resumed.
_RESUMABLE_ENDS = (Status.FAILED, Status.TIMED_OUT, Status.UNKNOWN, Status.CANCELLED, Status.PREEMPTED)


def chain_status(
    first_id: str, chain: Chain, probe: dict[str, JobProbe], rollouts: int, backend: Backend, facts: dict[str, str]
) -> tuple[JobState, str]:
    """The state of a benchmark and its current job's id, following its resume chain."""

    def state_of(job_id: str) -> JobState:
        return backend.job_state(job_id, probe.get(job_id, _NO_PROBE), rollouts, facts)

    latest = chain.latest
    if latest is None:  # not resumable, or its first job has not started yet
        return state_of(first_id), first_id
    history = chain.summary()
    if chain.end is not None:
        end_state, why = chain.end
        return JobState(end_state, why + (f" ({history})" if history else "")), latest
    latest_state = state_of(latest)
    state, detail = latest_state.status, latest_state.detail
    by_user = probe.get(latest, _NO_PROBE).cancelled_by_user
    if state not in _RESUMABLE_ENDS or state == Status.CANCELLED and by_user:
        return JobState(state, detail + (f" ({history})" if history and state != Status.QUEUED else "")), latest
    successor = chain.successors.get(latest)
    if successor is None:
        refused = chain.no_successor.get(latest)
        return JobState(state, detail + (f"; not resumed: {refused}" if refused else "")), latest
    after = f"job {latest} {state} ({detail})"
    next_probe = probe.get(successor, _NO_PROBE)
    scheduler = next_probe.scheduler
    if scheduler.waiting:
        waits = f"job {successor} waits in the queue ({scheduler.reason or 'no reason given'})"
        return JobState(Status.QUEUED, f"resuming: {after}; {waits}"), successor
    if scheduler.running:
        return JobState(Status.STARTING, f"resuming in job {successor}: {after}"), successor
    if scheduler.cancelled and next_probe.cancelled_by_user:
        return CANCELLED_BY_USER, successor
    said = scheduler.word or f"{backend.scheduler_name} forgot it"
    return JobState(state, f"{detail}; its resume job {successor} ended without starting ({said})"), latest


def exports_text(exports: dict[str, dict]) -> str:
    """What status adds to a benchmark's detail about its exports: only what needs attention (a failed
    export, one under way); the benchmark's own state never changes for an export."""
    notes = []
    for name, receipt in exports.items():
        if receipt.get("state") == ReceiptState.FAILED:
            notes.append(f"export {name} failed: {receipt.get('detail') or 'no detail'} (gym eval export retries)")
        elif receipt.get("state") == ReceiptState.RUNNING:
            notes.append(f"exporting to {name}")
    return "".join(f"; {note}" for note in notes)


def _waiting_in_lane(job: BenchmarkJob, chain: Chain, backend: Backend) -> JobStatus:
    """A lane's job its lane has not queued yet: waiting its turn, cancelled before it, or refused."""
    if chain.unfed is not None:
        state, detail = Status.FAILED, f"its lane could not queue it ({backend.submit_command}: {chain.unfed})"
    elif chain.cancelled:
        state, detail = Status.CANCELLED, "cancelled before its lane queued it"
    else:
        state, detail = Status.QUEUED, f"waiting its turn in its lane: {job.fed_by} queues it as that one starts"
    return JobStatus(job.benchmark, None, state, detail, 0, job.job_dir)


def statuses_from(
    record: SubmissionRecord,
    answer: ProbeAnswer | None,
    backend: Backend,
    known: Mapping[str, SampleCheck] | None = None,
) -> list[JobStatus]:
    """Each benchmark's status, in the record's order; a sharded benchmark's from its shards'."""
    statuses = []
    for job in record.benchmarks:
        if job.shards:
            shards = [_unit_status(shard, answer, backend, known) for shard in job.shards]
            statuses.append(sharded_status(job, shards, answer, known))
        else:
            statuses.append(_unit_status(job, answer, backend, known))
    if record.is_guest:
        # Another run's shared job ran these benchmarks: that run counts its GPU-hours, once.
        statuses = [replace(s, usage=NO_USAGE) for s in statuses]
    return statuses


def _unit_status(
    job: BenchmarkJob, answer: ProbeAnswer | None, backend: Backend, known: Mapping[str, SampleCheck] | None
) -> JobStatus:
    """One job's status (a benchmark's, or a shard's): its chain followed, its samples counted."""
    if not job.queued:
        return JobStatus(
            job.benchmark, None, Status.FAILED, f"{backend.submit_command} refused: {job.error}", 0, job.job_dir
        )
    if answer is None or job.benchmark not in answer.benchmarks:
        return _unanswered(job)
    rollouts, chain = answer.benchmarks[job.benchmark]
    first = chain.first(job.job_id)
    if not first:
        return _waiting_in_lane(job, chain, backend)
    probe = {job_id: p for (bench, job_id), p in answer.jobs.items() if bench == job.benchmark}
    shown, current = chain_status(chain.head(first), chain, probe, rollouts, backend, answer.facts)
    # Once the latest job succeeded, the job queued to resume it is void (Slurm drops it).
    ids = chain.attempt_ids(first, with_successor=shown.status != Status.SUCCEEDED)
    counted = answer.checks.get(job.benchmark) or (known or {}).get(job.benchmark)
    state, detail, check = _told_with_samples(shown.status, shown.detail, counted)
    running = current if not state.final else None
    job_usage = benchmark_usage(job.benchmark, job.gpus, ids, running, answer)
    exports = answer.exports.get(job.benchmark, {})
    seen = _Seen(
        chain, probe, rollouts, backend, answer, own_records_by_job(job.benchmark, ids, answer), job.gpus, running
    )
    added = chain.samples_added(ids, rollouts)
    scheduler = probe.get(current, _NO_PROBE).scheduler
    return JobStatus(
        job.benchmark,
        current,
        state,
        detail + exports_text(exports),
        rollouts,
        job.job_dir,
        ids,
        job_usage,
        check,
        exports,
        [replace(seen.attempt(i), samples_added=added[i]) for i in ids],
        chain.attempt - 1,
        held=scheduler.waiting or scheduler.running,
    )


def _unanswered(job: BenchmarkJob) -> JobStatus:
    recorded = [job.job_id] if job.job_id else []
    unanswered = [Attempt(i, Status.UNKNOWN, None, "no answer from the cluster") for i in recorded]
    return JobStatus(
        job.benchmark,
        job.job_id,
        Status.UNKNOWN,
        "no answer from the cluster",
        0,
        job.job_dir,
        recorded,
        history=unanswered,
    )


def _told_with_samples(state: Status, detail: str, check: SampleCheck | None) -> tuple[Status, str, SampleCheck | None]:
    """A job's state and detail with its samples counted: a success that left some missing is
    incomplete. A count taken while a job of the chain still runs is not the final count: dropped."""
    if not state.final:
        return state, detail, None
    if state == Status.SUCCEEDED and check is not None and check.missing:
        return Status.INCOMPLETE, f"{detail}, but {missing_text(check)}", check
    if check is not None and check.duplicates and state == Status.SUCCEEDED:
        detail += f" ({check.duplicates} duplicate row(s) counted once)"
    return state, detail, check


def sharded_status(
    job: BenchmarkJob, shards: list[JobStatus], answer: ProbeAnswer | None, known: Mapping[str, SampleCheck] | None
) -> JobStatus:
    """A sharded benchmark as one: its shards' states folded (``fold_shard_states``), their jobs and
    usage together, and its samples those its shards were merged into (before a merge, the
    shards' own counts summed)."""
    merged = (answer.merged if answer is not None else {}).get(job.benchmark)
    state, detail = fold_shard_states([(s.state, s.detail) for s in shards], merged is not None)
    check = None
    if state.final:
        check = (answer.checks if answer is not None else {}).get(job.benchmark) or (known or {}).get(job.benchmark)
        if check is None and merged is None and all(s.check is not None for s in shards):
            check = sum_checks([s.check for s in shards if s.check is not None])
    if state == Status.SUCCEEDED and check is not None and check.missing:
        state, detail = Status.INCOMPLETE, f"{detail}, but {missing_text(check)}"
    exports = (answer.exports if answer is not None else {}).get(job.benchmark, {})
    return JobStatus(
        job.benchmark,
        shard_ids_label([s.job_id for s in shards]),
        state,
        detail + exports_text(exports),
        merged if merged is not None else sum(s.rollouts for s in shards),
        job.job_dir,
        [i for s in shards for i in s.chain],
        usage.total([s.usage for s in shards]),
        check,
        exports,
        [attempt for s in shards for attempt in s.history],
        sum(s.resubmits for s in shards),
        shards=shards,
        held=any(s.held for s in shards),
    )


def fold_shard_states(states: list[tuple[Status, str]], merged: bool) -> tuple[Status, str]:
    """A sharded benchmark's state from its shards' (state, detail), in order: running while any
    shard is, queued while any waits; once every shard has ended, succeeded only if each did and
    their rollouts were merged, else what went wrong first (a failure before a cancel)."""
    count = len(states)
    done = sum(1 for state, _ in states if state == Status.SUCCEEDED)
    ended = [(k, state, detail) for k, (state, detail) in enumerate(states, 1) if state.final]
    bad = [(k, state, detail) for k, state, detail in ended if state != Status.SUCCEEDED]
    worst = next((b for b in bad if b[1] != Status.CANCELLED), bad[0] if bad else None)
    trouble = f"; shard {worst[0]} {worst[1]}: {worst[2]}" if worst else ""
    if len(ended) < count:
        live = [state for state, _ in states if not state.final]
        state = next((s for s in (Status.RUNNING, Status.STARTING) if s in live), live[0])
        return state, f"{done} of {count} shards done, {len(live)} {state}{trouble}"
    if worst is None:
        if not merged:
            return Status.FAILED, f"all {count} shards finished, but none merged them (see the last one's driver log)"
        return Status.SUCCEEDED, f"{count} shards finished and merged"
    return worst[1], f"{done} of {count} shards succeeded{trouble}"


def sum_checks(checks: list[SampleCheck]) -> SampleCheck:
    """Shards' sample counts as one benchmark's (their pairs are disjoint)."""
    return SampleCheck(
        sum(c.expected for c in checks),
        sum(c.written for c in checks),
        sum(c.duplicates for c in checks),
        sum(c.extra for c in checks),
        sum(c.missing for c in checks),
        tuple(p for c in checks for p in c.first_missing)[:MISSING_NAMED],
        sum(c.unreadable for c in checks),
    )


def shard_ids_label(ids: list[str | None]) -> str | None:
    """The shards' current jobs in one word: ``1200_[0-2]`` for an array's consecutive tasks,
    else the ids joined by commas."""
    known = [i for i in ids if i]
    if not known:
        return None
    arrays = {i.rpartition("_")[0] for i in known}
    tasks = [i.rpartition("_")[2] for i in known]
    if len(arrays) == 1 and "" not in arrays and all(t.isdigit() for t in tasks):
        numbers = [int(t) for t in tasks]
        if numbers == list(range(numbers[0], numbers[0] + len(numbers))) and len(numbers) > 1:
            return f"{next(iter(arrays))}_[{numbers[0]}-{numbers[-1]}]"
    return ",".join(known)


@dataclass(frozen=True)
class _Seen:
    """What one probe saw of a benchmark, for telling each of its jobs."""

    chain: Chain
    probe: dict[str, JobProbe]
    rollouts: int
    backend: Backend
    answer: ProbeAnswer
    own: dict[str, list[OwnRecord]]
    gpus: int | None
    running: str | None  # the job still running, if any (its usage counts to now)

    def attempt(self, job_id: str) -> Attempt:
        verdict = self.chain.verdict_on(job_id)
        probed = self.probe.get(job_id)
        if probed is not None:
            shown = self.backend.job_state(job_id, probed, self.rollouts, self.answer.facts)
            state, detail, cause = shown.status, shown.detail, probed.cause
        elif verdict is not None:  # older than the probe looks: the chain's verdict tells it
            state, detail, cause = _VERDICT_STATES.get(verdict.outcome, Status.FAILED), verdict.why, None
        else:
            state, detail, cause = Status.UNKNOWN, "not probed, and the chain has no verdict on it", None
        if cause is None and verdict is not None:
            cause = verdict.outcome.cause
        records = [r for r in self.own.get(job_id, []) if r.current] or self.own.get(job_id, [])
        spent = usage.job_usage(
            job_id, self.answer.accounting, self.own, self.gpus, self.answer.now, job_id == self.running
        )
        return Attempt(
            job_id,
            state,
            cause,
            detail,
            started=records[-1].start if records else None,
            ended=records[-1].end if records else None,
            gpu_hours=rounded(spent.gpu_hours, 4),
            verdict=f"{verdict.why} -> {verdict.action}" if verdict is not None else "",
        )


# How a job the probe did not reach is shown, from the outcome the chain's verdict found.
_VERDICT_STATES = {
    Outcome.SUCCEEDED: Status.SUCCEEDED,
    Outcome.CANCELLED: Status.CANCELLED,
    Outcome.UNKNOWN: Status.UNKNOWN,
    Outcome.TIMEOUT: Status.TIMED_OUT,
    Outcome.WALLTIME: Status.TIMED_OUT,
    Outcome.PREEMPTED: Status.PREEMPTED,
}


def statuses_json(record: SubmissionRecord, statuses: list[JobStatus]) -> str:
    total = run_usage(statuses)
    return json.dumps(
        {
            "run": record.gym_job_id,
            "run_dir": record.run_dir,
            "jobs": [s.as_dict() for s in statuses],
            "gpu_hours": rounded(total.gpu_hours, 4),
            "wall_seconds": rounded(total.wall_seconds, 1),
        },
        indent=2,
    )
