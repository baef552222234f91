"""Feeding a submission through the site's limits: lanes of jobs, each queuing the next of its lane.

A site caps what one user may have queued at once (Slurm's MaxSubmitJobs counts every pending or
running job, each array task too), while a sweep is often hundreds of jobs. Rather than refusing a
sweep past the cap, its jobs are dealt round-robin into K lanes: the first job of each lane is
queued now; every job, as it starts, queues the next of its lane to start after it ends. A lane
therefore holds at most two of its jobs at once (the one running, the next waiting), so K lanes
whose first two jobs fit within the limits never go past them. The largest K that fits is chosen:
with room for 8 jobs, 30 jobs run in 4 lanes.

A lane stalls when the job that should queue the next never starts (cancelled while it waited, a
dependency Slurm gave up on) or tried and was refused: nothing will queue the rest of its lane.
Status tells each waiting job's turn (``turns``), and ``gym eval resubmit`` queues the job at the
stall, which then feeds the rest of its lane as it starts.

Pure rules: the caller says what fits (its backend's limits, asked once) and does the queuing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum


@dataclass(frozen=True)
class Lanes:
    """Jobs (by their index in the submission's order) dealt into lanes, each lane in run order."""

    lanes: tuple[tuple[int, ...], ...]

    def heads(self) -> list[int]:
        """The jobs queued at once: each lane's first."""
        return [lane[0] for lane in self.lanes]

    def next_of(self) -> dict[int, int]:
        """Each job that queues another -> the job it queues."""
        return {lane[i]: lane[i + 1] for lane in self.lanes for i in range(len(lane) - 1)}

    def fed_by(self) -> dict[int, int]:
        """Each job queued by another -> the job that queues it."""
        return {after: before for before, after in self.next_of().items()}


def dealt(count: int, lanes: int) -> Lanes:
    """``count`` jobs dealt round-robin into ``lanes`` lanes: the first wave is the first jobs."""
    return Lanes(tuple(tuple(range(start, count, lanes)) for start in range(min(lanes, count))))


def held_at_once(lanes: Lanes) -> list[int]:
    """The jobs a lane holds at most at once, in every lane: its first two (a lane's later pairs
    are of the same jobs' kind in a sweep; the planner checks the pair that starts it)."""
    return [job for lane in lanes.lanes for job in lane[:2]]


def plan_lanes(count: int, fits: Callable[[Sequence[int]], bool]) -> Lanes | None:
    """The most lanes (fewer than ``count``: all of them at once did not fit) whose jobs held at
    once ``fits`` the site's limits; None when not even one lane does. ``fits`` is asked about
    O(log count) times; more lanes never hold fewer jobs, so the answers are monotone."""
    low, high, best = 1, count - 1, None
    while low <= high:
        middle = (low + high) // 2
        lanes = dealt(count, middle)
        if fits(held_at_once(lanes)):
            best, low = lanes, middle + 1
        else:
            high = middle - 1
    return best


# -- a lane's jobs, once queued: which of them wait, and where a lane stalled ---------------------


class Turn(str, Enum):
    """Where a lane's job not queued yet stands."""

    WAITING = "waiting"  # the job before it will queue it as that one starts
    STALLED = "stalled"  # nothing will queue it: the job before it ended unstarted, or was refused
    BEHIND_A_STALL = "behind-a-stall"  # an earlier job of its lane is stalled; once fed, that one feeds this

    def __str__(self) -> str:
        return str(self.value)


@dataclass(frozen=True)
class LaneJob:
    """What status knows of one job (``run/benchmark``) when telling lanes' turns."""

    fed_by: str | None = None  # the job meant to queue it (None: queued by the submission)
    queued: bool = True  # a job of it was queued (by the submission, its lane or resubmit)
    ended: bool = False  # its state is final
    cancelled: bool = False  # cancelled before its lane queued it: its lane passes it over
    refused: bool = False  # the job before it tried to queue it and the scheduler refused


def turns(jobs: Mapping[str, LaneJob]) -> dict[str, tuple[Turn, str]]:
    """Each lane job that waits to be queued (not cancelled) -> its turn and the job its lane
    stalled at (itself when STALLED; "" when WAITING). A feeder not among ``jobs`` (a run not
    asked about) is taken to be on its way: WAITING."""
    told: dict[str, tuple[Turn, str]] = {}
    for label, job in jobs.items():
        if job.queued or job.cancelled or job.fed_by is None:
            continue
        told[label] = _turn(label, jobs)
    return told


def _turn(label: str, jobs: Mapping[str, LaneJob]) -> tuple[Turn, str]:
    """One waiting job's turn: back along its lane to the first job that decides it."""
    at, steps = label, 0
    while steps <= len(jobs):  # labels are read back: a loop among them is not followed for ever
        job = jobs[at]
        if job.refused:
            return (Turn.STALLED, at) if at == label else (Turn.BEHIND_A_STALL, at)
        before_label = feeder(job, jobs)
        if before_label is None:
            return Turn.WAITING, ""
        before = jobs[before_label]
        if before.queued:
            if not before.ended:
                return Turn.WAITING, ""
            return (Turn.STALLED, at) if at == label else (Turn.BEHIND_A_STALL, at)
        at, steps = before_label, steps + 1
    return Turn.WAITING, ""


def feeder(job: LaneJob, jobs: Mapping[str, LaneJob]) -> str | None:
    """The job that will queue ``job``: the one before it, past any its lane passes over
    (cancelled before queued); None when that is unknown here."""
    seen: set[str] = set()
    feeder = job.fed_by
    while feeder is not None and feeder in jobs and jobs[feeder].cancelled and not jobs[feeder].queued:
        if feeder in seen:
            return None
        seen.add(feeder)
        feeder = jobs[feeder].fed_by
    return feeder if feeder is not None and feeder in jobs else None
