"""Feeding a submission through the site's limits: lanes of jobs, each queuing the next of its lane.

A site caps what one user may have queued at once (Slurm's MaxSubmitJobs counts every pending or
running job, each array task too), while a sweep is often hundreds of jobs. Rather than refusing a
sweep past the cap, its jobs are dealt round-robin into K lanes: the first job of each lane is
queued now; every job, as it starts, queues the next of its lane to start after it ends. A lane
therefore holds at most two of its jobs at once (the one running, the next waiting), so K lanes
whose first two jobs fit within the limits never go past them. The largest K that fits is chosen:
with room for 8 jobs, 30 jobs run in 4 lanes.

Pure rules: the caller says what fits (its backend's limits, asked once) and does the queuing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass


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
