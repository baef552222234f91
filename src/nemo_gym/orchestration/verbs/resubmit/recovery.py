"""The recovery planner: what ``gym eval resubmit`` would do for one benchmark, decided from the
run's own evidence only (its state, its cause, its samples, its attempts), as a pure function.

Like ``resume.py``'s rules, the decision is a table with plain unit tests
(``tests/unit/test_recovery_rules.py``); the callers (``gym eval info``, later ``resubmit``) do the
I/O. The rules, first match wins:

* a lane's job nothing will queue (its lane stalled at it: ``feeding.turns``) -> feed: queue it now,
  as its lane would have (not an attempt: no job of it ran); one behind such a stall -> wait, as
  the job at the stall queues it in its turn;
* still queued, starting or running -> wait: nothing to resubmit yet;
* its state unknown -> unknown: refuse to guess;
* ended well (succeeded, incomplete): without the list of expected samples -> unknown (nothing can
  be said to be missing); all of them written -> nothing; some missing -> generate only those;
* ended badly (failed, cancelled, timed out): a cause a rerun may well repeat (the driver's own
  failure, a service that never started) that the job before it had too (it did repeat) -> stop,
  saying what to fix; else re-queue, continuing from what is on disk (the first time, with what to
  look at should it be the config's: a flaky node and a bad config fail alike once);
* either remedy is an attempt: once ``max_attempts`` have been made -> stop, saying how to extend;
* either remedy, for a benchmark whose job cannot be told to keep what is on disk (its own
  command, a shared deployment's, a run of an older version: ``Evidence.blocked`` says which) ->
  stop, saying why, rather than generate a scored sample again.

Stdlib only.
"""

from __future__ import annotations

from enum import Enum
from typing import NamedTuple

from nemo_gym.orchestration.contract import Cause, Status
from nemo_gym.orchestration.feeding import Turn

# Attempts a benchmark may have (its first job included) before resubmit stops; ``--max-attempts``.
DEFAULT_MAX_ATTEMPTS = 3
MAX_ATTEMPTS_FLAG = "--max-attempts"
# How many missing (task, rollout) pairs a plan line names; the rest are counted.
PAIRS_NAMED = 20

Pair = tuple[int, int]


class Remedy(str, Enum):
    """What resubmit does for a benchmark."""

    NOTHING = "nothing"  # succeeded, every expected sample written
    GENERATE_MISSING = "generate-missing"  # only the missing (task, rollout) pairs, in a new attempt
    REQUEUE = "requeue"  # ended badly: queued again, continuing from what is on disk
    STOP_BUDGET_SPENT = "stop-budget-spent"
    STOP_WOULD_REPEAT = "stop-would-repeat"
    STOP_CANNOT_CONTINUE = "stop-cannot-continue"  # its job would start over: scored samples again
    FEED = "feed"  # a lane's job nothing else will queue: queued now, its first job
    WAIT = "wait"  # a job of it is still queued or running
    UNKNOWN = "unknown"  # its state or completeness cannot be told: refused

    def __str__(self) -> str:
        return str(self.value)

    @property
    def acts(self) -> bool:
        """Whether resubmit would queue a job for it."""
        return self in (Remedy.GENERATE_MISSING, Remedy.REQUEUE, Remedy.FEED)


class Samples(NamedTuple):
    """A benchmark's samples against the expected ones, as the sample check counted them."""

    expected: int
    written: int  # expected pairs written
    missing: int
    missing_named: tuple[Pair, ...] = ()  # the first of them, in the expected list's order


class Evidence(NamedTuple):
    """What the run's own files say of one benchmark."""

    status: Status
    cause: Cause | None = None  # what its latest job recorded, if it failed
    samples: Samples | None = None  # None: unknown (no expected list, or not counted yet)
    attempts: int = 1  # jobs it has had so far
    max_attempts: int = DEFAULT_MAX_ATTEMPTS
    blocked: str = ""  # why a job of it cannot keep what is on disk; "" when it can
    previous_cause: Cause | None = None  # what the job before the latest recorded, if it failed
    turn: Turn | None = None  # a lane's job not queued yet: where it stands
    stalled_at: str = ""  # its lane's job (run/benchmark) at the stall, when it is behind one


class Plan(NamedTuple):
    remedy: Remedy
    text: str  # the plan line, for people
    missing: tuple[Pair, ...] = ()  # GENERATE_MISSING: the pairs named (the first PAIRS_NAMED)


# What to look at and fix when a cause would repeat on a rerun.
_FIX = {
    Cause.STARTUP_FAILED: "see the failing service's step log (gym eval logs RUN BENCHMARK --service NAME), "
    "fix its config or container, then submit again",
    Cause.DRIVER_FAILED: "see the driver's log (gym eval logs RUN BENCHMARK --driver), "
    "fix what it reports, then submit again",
    Cause.DISK_FULL: "free space on the filesystem named (or raise its quota), then resubmit",
}
_FIX_ANY = "see the job's log (gym eval logs RUN BENCHMARK), fix what it reports, then submit again"

_STILL_GOING = (Status.QUEUED, Status.STARTING, Status.RUNNING)
_ENDED_WELL = (Status.SUCCEEDED, Status.INCOMPLETE)
_ENDED_BADLY = (Status.FAILED, Status.CANCELLED, Status.TIMED_OUT, Status.PREEMPTED)
_ENDED_TEXT = {
    Status.FAILED: "it failed",
    Status.CANCELLED: "it was cancelled",
    Status.TIMED_OUT: "it timed out",
    Status.PREEMPTED: "it was preempted",
}


def plan(evidence: Evidence) -> Plan:
    """The one plan for a benchmark's evidence (never raises: evidence is read back, untrusted)."""
    planned = _plan(evidence)
    if planned.remedy.acts and evidence.blocked:
        return Plan(Remedy.STOP_CANNOT_CONTINUE, f"stop: {evidence.blocked} (it would need: {planned.text})")
    return planned


def _plan(evidence: Evidence) -> Plan:
    if evidence.turn is not None:
        return _lane_turn(evidence.turn, evidence.stalled_at)
    status = evidence.status
    if status in _STILL_GOING:
        return Plan(Remedy.WAIT, f"wait: it is {status}; nothing to resubmit until it ends")
    if status in _ENDED_WELL:
        return _after_a_good_end(evidence)
    if status in _ENDED_BADLY:
        return _after_a_bad_end(evidence)
    return Plan(
        Remedy.UNKNOWN,
        f"refused: its state is {status}, so what it needs cannot be told; "
        "run gym eval status again once the cluster answers",
    )


def _lane_turn(turn: Turn, stalled_at: str) -> Plan:
    if turn == Turn.STALLED:
        return Plan(
            Remedy.FEED,
            "queue it: its lane stalled here (the job before it ended without queuing it); "
            "as it starts it queues the rest of its lane",
        )
    if turn == Turn.BEHIND_A_STALL:
        return Plan(
            Remedy.WAIT, f"wait: its lane stalled at {stalled_at}, which resubmit queues; that queues this in turn"
        )
    return Plan(Remedy.WAIT, "wait: the job before it in its lane queues it as that one starts")


def _after_a_good_end(evidence: Evidence) -> Plan:
    samples = evidence.samples
    if samples is None:
        return Plan(
            Remedy.UNKNOWN,
            "refused: its completeness is unknown (no list of expected samples, "
            "or they were not counted), so nothing can be said to be missing",
        )
    if samples.missing <= 0:
        return Plan(Remedy.NOTHING, f"nothing to do: it succeeded with all {samples.expected} samples")
    spent = _budget_spent(evidence)
    if spent is not None:
        return spent
    named = tuple(samples.missing_named[:PAIRS_NAMED])
    return Plan(
        Remedy.GENERATE_MISSING,
        f"generate the {samples.missing} missing of {samples.expected} samples: {pairs_text(named, samples.missing)}",
        named,
    )


def _after_a_bad_end(evidence: Evidence) -> Plan:
    cause = evidence.cause
    may_repeat = cause is not None and cause.repeats_on_rerun
    if cause is not None and may_repeat and evidence.previous_cause == cause:
        return Plan(
            Remedy.STOP_WOULD_REPEAT,
            f"stop: {cause.text} ({cause}) twice in a row, so a rerun would fail the same way; {_fix(cause)}",
        )
    spent = _budget_spent(evidence)
    if spent is not None:
        return spent
    why = cause.text if cause is not None else _ENDED_TEXT[evidence.status]
    kept = f", keeping its {evidence.samples.written} samples written" if evidence.samples else ""
    unless = f" (should it fail so again, resubmit stops: {_fix(cause)})" if cause is not None and may_repeat else ""
    return Plan(Remedy.REQUEUE, f"re-queue: {why}; continue from what is on disk{kept}{unless}")


def _fix(cause: Cause) -> str:
    return _FIX.get(cause, _FIX_ANY)


def _budget_spent(evidence: Evidence) -> Plan | None:
    if evidence.attempts < evidence.max_attempts:
        return None
    more = max(evidence.attempts, 0) + 1
    return Plan(
        Remedy.STOP_BUDGET_SPENT,
        (
            f"stop: {evidence.attempts} of {evidence.max_attempts} attempts made; "
            f"to allow another, pass {MAX_ATTEMPTS_FLAG} {more}"
        ),
    )


def pairs_text(named: tuple[Pair, ...], total: int) -> str:
    """``task 3 rollout 0, task 7 rollout 1 and 5 more``: the pairs named, the rest counted."""
    shown = ", ".join(f"task {task} rollout {rollout}" for task, rollout in named[:PAIRS_NAMED])
    rest = total - min(len(named), PAIRS_NAMED)
    if rest <= 0:
        return shown
    return f"{shown} and {rest} more" if shown else f"{rest} pair(s), not named"
