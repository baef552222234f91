"""Lanes as status tells them: each job its lane has not queued yet, waiting its turn or stalled
(``feeding.turns``, over every run asked about, since a lane runs across a sweep's runs).

A job stalled at is ``failed`` with what happened and what to do (``gym eval resubmit`` queues
it); one behind a stall is ``failed`` too, naming the stall: nothing will queue either by itself,
and a run whose jobs all wait on nothing would never end. A sharded benchmark's state is folded
again from its shards'."""

from __future__ import annotations

from dataclasses import replace

from nemo_gym.orchestration.contract import Status
from nemo_gym.orchestration.feeding import LaneJob, Turn, feeder, turns
from nemo_gym.orchestration.observe.folding import fold_shard_states
from nemo_gym.orchestration.observe.status import JobStatus
from nemo_gym.orchestration.record import SubmissionRecord

RunJobs = tuple[SubmissionRecord, list[JobStatus]]


def with_lane_turns(runs: list[RunJobs]) -> list[list[JobStatus]]:
    """Each run's statuses, a lane's waiting jobs told their turn; runs without lanes as they were."""
    if not any(unit.fed_by for record, _ in runs for unit in record.units):
        return [jobs for _, jobs in runs]
    units = _units(runs)
    statuses = {label: status for label, status, _ in units}
    lane = _Lane({label: lane_job(status, fed_by) for label, status, fed_by in units}, statuses)
    return [[lane.told_job(record, job) for job in jobs] for record, jobs in runs]


def lane_job(status: JobStatus, fed_by: str | None) -> LaneJob:
    """What the lane rules need of one job's status."""
    unqueued = status.job_id is None
    return LaneJob(
        fed_by=fed_by,
        queued=not unqueued,
        ended=status.state.final,
        cancelled=unqueued and status.state == Status.CANCELLED,
        refused=unqueued and status.state == Status.FAILED,
    )


def _units(runs: list[RunJobs]) -> list[tuple[str, JobStatus, str | None]]:
    """Every job (``run/benchmark``, a shard as ``B@k``), its status and the job meant to queue it."""
    out = []
    for record, jobs in runs:
        fed_by = {unit.benchmark: unit.fed_by for unit in record.units}
        for job in jobs:
            for unit in job.shards or [job]:
                out.append((f"{record.gym_job_id}/{unit.benchmark}", unit, fed_by.get(unit.benchmark)))
    return out


class _Lane:
    """Every job's lane facts and status, and each waiting job's turn."""

    def __init__(self, jobs: dict[str, LaneJob], statuses: dict[str, JobStatus]) -> None:
        self.jobs, self.statuses, self.told = jobs, statuses, turns(jobs)

    def told_job(self, record: SubmissionRecord, job: JobStatus) -> JobStatus:
        if not job.shards:
            return self.told_unit(record, job)
        shards = [self.told_unit(record, shard) for shard in job.shards]
        if shards == job.shards:
            return job
        state, detail = fold_shard_states([(s.state, s.detail) for s in shards], merged=False)
        return replace(job, state=state, detail=detail, shards=shards)

    def told_unit(self, record: SubmissionRecord, unit: JobStatus) -> JobStatus:
        label = f"{record.gym_job_id}/{unit.benchmark}"
        if label not in self.told:
            return unit
        turn, at = self.told[label]
        if turn == Turn.WAITING:
            return replace(unit, turn=turn)
        if turn == Turn.BEHIND_A_STALL:
            detail = (
                f"not queued: its lane stalled at {at}; gym eval resubmit queues that one, which queues this in turn"
            )
            return replace(unit, state=Status.FAILED, detail=detail, turn=turn, stalled_at=at)
        if unit.state == Status.FAILED:  # the job before it tried, and the scheduler refused
            return replace(unit, detail=f"{unit.detail}; gym eval resubmit queues it", turn=turn, stalled_at=label)
        before = feeder(self.jobs[label], self.jobs) or "the job before it"
        ended = self.statuses[before].state if before in self.statuses else "over"
        detail = (
            f"never queued: its lane stalled: {before} ended ({ended}) without queuing it; gym eval resubmit queues it"
        )
        return replace(unit, state=Status.FAILED, detail=detail, turn=turn, stalled_at=label)
