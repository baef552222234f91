"""The recovery planner as plain functions: every state x evidence combination of its table, row
by row (as test_resume_rules.py holds the resume judge), the budget, and that any evidence at all
yields exactly one plan."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nemo_gym.orchestration.contract import Cause, Status
from nemo_gym.orchestration.feeding import Turn
from nemo_gym.orchestration.verbs.resubmit import recovery
from nemo_gym.orchestration.verbs.resubmit.recovery import Evidence, Plan, Remedy, Samples, pairs_text, plan

COMPLETE = Samples(expected=12, written=12, missing=0)
FOUR_MISSING = Samples(expected=12, written=8, missing=4, missing_named=((0, 1), (2, 0), (5, 3), (11, 1)))
UNKNOWN_SAMPLES = None
SAMPLES = {"complete": COMPLETE, "four missing": FOUR_MISSING, "unknown": UNKNOWN_SAMPLES}
REPEATING = [cause for cause in Cause if cause.repeats_on_rerun]
NOT_REPEATING = [cause for cause in Cause if not cause.repeats_on_rerun]


def remedy(
    status: Status,
    cause: Cause | None = None,
    samples: Samples | None = None,
    attempts: int = 1,
    previous: Cause | None = None,
) -> Remedy:
    return plan(Evidence(status, cause, samples, attempts, previous_cause=previous)).remedy


# -- the table, row by row ------------------------------------------------------------------------------

# (status, samples, cause, the job before's cause) -> remedy, with the budget not spent (2 of 3
# attempts: a job before the latest, whose cause is the last column).
TABLE = [
    # still going: nothing to resubmit, whatever else is known
    *[
        (s, k, c, None, Remedy.WAIT)
        for s in (Status.QUEUED, Status.STARTING, Status.RUNNING)
        for k in SAMPLES
        for c in (None, Cause.DRIVER_FAILED)
    ],
    # ended well
    *[(s, "complete", None, None, Remedy.NOTHING) for s in (Status.SUCCEEDED, Status.INCOMPLETE)],
    *[(s, "four missing", None, None, Remedy.GENERATE_MISSING) for s in (Status.SUCCEEDED, Status.INCOMPLETE)],
    *[(s, "unknown", None, None, Remedy.UNKNOWN) for s in (Status.SUCCEEDED, Status.INCOMPLETE)],
    # ended badly: a cause a rerun may repeat stops once it did (the job before had it too),
    # whatever was written; the first time, and any other cause, re-queues
    *[
        (s, k, c, c, Remedy.STOP_WOULD_REPEAT)
        for s in (Status.FAILED, Status.CANCELLED, Status.TIMED_OUT, Status.PREEMPTED)
        for k in SAMPLES
        for c in REPEATING
    ],
    *[
        (s, k, c, before, Remedy.REQUEUE)
        for s in (Status.FAILED, Status.CANCELLED, Status.TIMED_OUT, Status.PREEMPTED)
        for k in SAMPLES
        for c in REPEATING
        for before in [None, *(other for other in Cause if other != c)]
    ],
    *[
        (s, k, c, before, Remedy.REQUEUE)
        for s in (Status.FAILED, Status.CANCELLED, Status.TIMED_OUT, Status.PREEMPTED)
        for k in SAMPLES
        for c in [None, *NOT_REPEATING]
        for before in (None, c)
    ],
    # nothing tells its state
    *[(Status.UNKNOWN, k, c, None, Remedy.UNKNOWN) for k in SAMPLES for c in (None, Cause.SIGNAL)],
]


@pytest.mark.parametrize(
    ("status", "samples", "cause", "before", "expected"),
    TABLE,
    ids=[f"{s}-{k}-{c}-after-{b}" for s, k, c, b, _ in TABLE],
)
def test_row(status: Status, samples: str, cause: Cause | None, before: Cause | None, expected: Remedy) -> None:
    attempts = 1 if before is None else 2
    assert remedy(status, cause, SAMPLES[samples], attempts, before) == expected


# A job that cannot be told to keep what is on disk: every remedy that would queue one stops.
BLOCKED = "its job cannot be told to keep the samples on disk"


@pytest.mark.parametrize(("status", "samples", "cause", "before", "expected"), TABLE)
def test_row_of_a_benchmark_that_cannot_continue(status, samples, cause, before, expected) -> None:
    made = plan(
        Evidence(status, cause, SAMPLES[samples], 1 if before is None else 2, blocked=BLOCKED, previous_cause=before)
    )
    if expected.acts:
        assert made.remedy == Remedy.STOP_CANNOT_CONTINUE
        assert made.text.startswith(f"stop: {BLOCKED} (it would need: ")
    else:
        assert made.remedy == expected


def test_the_table_covers_every_status() -> None:
    assert {row[0] for row in TABLE} == set(Status)


# -- what each plan line says -----------------------------------------------------------------------------


def test_nothing_to_do_says_how_many_samples() -> None:
    assert plan(Evidence(Status.SUCCEEDED, samples=COMPLETE)).text == "nothing to do: it succeeded with all 12 samples"


def test_generate_missing_names_the_pairs_and_carries_them() -> None:
    made = plan(Evidence(Status.INCOMPLETE, samples=FOUR_MISSING))
    assert made == Plan(
        Remedy.GENERATE_MISSING,
        "generate the 4 missing of 12 samples: task 0 rollout 1, task 2 rollout 0, task 5 rollout 3, task 11 rollout 1",
        ((0, 1), (2, 0), (5, 3), (11, 1)),
    )


def test_generate_missing_names_twenty_pairs_and_counts_the_rest() -> None:
    named = tuple((t, 0) for t in range(30))
    made = plan(Evidence(Status.INCOMPLETE, samples=Samples(100, 50, 50, named)))
    assert made.missing == named[:20]
    assert made.text.endswith("task 19 rollout 0 and 30 more")


@pytest.mark.parametrize(
    ("cause", "fix"),
    [(Cause.DRIVER_FAILED, "gym eval logs RUN BENCHMARK --driver"), (Cause.STARTUP_FAILED, "--service NAME")],
)
def test_a_repeating_cause_says_why_and_what_to_fix(cause: Cause, fix: str) -> None:
    first = plan(Evidence(Status.FAILED, cause)).text
    assert first.startswith(f"re-queue: {cause.text}; continue from what is on disk (should it fail so again, ")
    assert fix in first
    text = plan(Evidence(Status.FAILED, cause, attempts=2, previous_cause=cause)).text
    assert text.startswith(f"stop: {cause.text} ({cause}) twice in a row, so a rerun would fail the same way; see ")
    assert fix in text


@pytest.mark.parametrize(
    ("status", "cause", "why"),
    [
        (Status.TIMED_OUT, Cause.WALLTIME, "it reached its walltime"),
        (Status.FAILED, Cause.SERVICE_DIED, "a service died while the driver ran"),
        (Status.FAILED, None, "it failed"),
        (Status.CANCELLED, None, "it was cancelled"),
        (Status.TIMED_OUT, None, "it timed out"),
        (Status.PREEMPTED, Cause.PREEMPTED, "it was preempted"),
        (Status.PREEMPTED, None, "it was preempted"),
    ],
)
def test_a_requeue_says_why_and_what_it_keeps(status: Status, cause: Cause | None, why: str) -> None:
    assert (
        plan(Evidence(status, cause, FOUR_MISSING)).text
        == f"re-queue: {why}; continue from what is on disk, keeping its 8 samples written"
    )
    assert plan(Evidence(status, cause)).text == f"re-queue: {why}; continue from what is on disk"


def test_unknown_completeness_is_refused_with_the_reason() -> None:
    assert plan(Evidence(Status.SUCCEEDED)).text.startswith(
        "refused: its completeness is unknown (no list of expected samples"
    )


# -- the budget -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "cause", "samples"),
    [
        (Status.INCOMPLETE, None, FOUR_MISSING),
        (Status.FAILED, Cause.SERVICE_DIED, None),
        (Status.TIMED_OUT, None, COMPLETE),
    ],
)
def test_a_remedy_that_acts_stops_once_the_attempts_are_spent(status: Status, cause: Cause | None, samples) -> None:
    assert plan(Evidence(status, cause, samples, attempts=2, max_attempts=3)).remedy.acts
    spent = plan(Evidence(status, cause, samples, attempts=3, max_attempts=3))
    assert spent == Plan(
        Remedy.STOP_BUDGET_SPENT, "stop: 3 of 3 attempts made; to allow another, pass --max-attempts 4"
    )


def test_a_spent_budget_does_not_hide_what_needs_no_attempt() -> None:
    assert remedy(Status.SUCCEEDED, samples=COMPLETE, attempts=9) == Remedy.NOTHING
    assert remedy(Status.RUNNING, attempts=9) == Remedy.WAIT
    # More attempts would not help: the cause is named, not the budget.
    assert (
        remedy(Status.FAILED, Cause.DRIVER_FAILED, attempts=9, previous=Cause.DRIVER_FAILED) == Remedy.STOP_WOULD_REPEAT
    )


def test_the_default_budget_is_the_documented_flag() -> None:
    assert Evidence(Status.FAILED).max_attempts == recovery.DEFAULT_MAX_ATTEMPTS == 3
    assert recovery.MAX_ATTEMPTS_FLAG == "--max-attempts"


# -- any evidence --------------------------------------------------------------------------------------------

pairs = st.tuples(st.integers(-(2**40), 2**40), st.integers(-5, 10**6))
samples = st.none() | st.builds(
    Samples,
    st.integers(-5, 10**9),
    st.integers(-5, 10**9),
    st.integers(-5, 10**9),
    st.lists(pairs, max_size=40).map(tuple),
)
evidence = st.builds(
    Evidence,
    st.sampled_from(Status),
    st.none() | st.sampled_from(Cause),
    samples,
    st.integers(-5, 10**6),
    st.integers(-5, 10**6),
    st.sampled_from(["", "its job cannot continue"]),
    st.none() | st.sampled_from(Cause),
)


@given(evidence)
def test_any_evidence_yields_exactly_one_plan(found: Evidence) -> None:
    made = plan(found)
    assert isinstance(made, Plan) and made.remedy in set(Remedy) and made.text
    assert len(made.missing) <= recovery.PAIRS_NAMED
    assert made.remedy == Remedy.GENERATE_MISSING or made.missing == ()
    assert plan(found) == made  # a function of the evidence alone


def test_pairs_text_without_names_still_counts() -> None:
    assert pairs_text((), 3) == "3 pair(s), not named"
    assert pairs_text(((1, 2),), 1) == "task 1 rollout 2"


def test_the_planner_is_stdlib_only() -> None:
    source = Path(recovery.__file__).read_text()
    imported = {
        (node.module or "") if isinstance(node, ast.ImportFrom) else alias.name
        for node in ast.walk(ast.parse(source))
        if isinstance(node, (ast.Import, ast.ImportFrom))
        for alias in node.names
    }
    ours = {name for name in imported if name.startswith("nemo_gym")}
    # each itself stdlib only
    assert ours == {"nemo_gym.orchestration.contract", "nemo_gym.orchestration.feeding"}
    feeding = (Path(recovery.__file__).parents[2] / "feeding.py").read_text()
    assert "import nemo_gym" not in feeding and "from nemo_gym" not in feeding
    assert {name.split(".")[0] for name in imported - ours} <= set(sys.stdlib_module_names)


LANE_TURNS = [
    # a lane's job its lane stalled at is fed, whatever its state says (failed, never run), with
    # no attempt spent and nothing it could keep on disk
    (Turn.STALLED, Status.FAILED, 3, Remedy.FEED),
    (Turn.BEHIND_A_STALL, Status.FAILED, 1, Remedy.WAIT),
    (Turn.WAITING, Status.QUEUED, 1, Remedy.WAIT),
]


@pytest.mark.parametrize(("turn", "status", "attempts", "expected"), LANE_TURNS)
def test_a_lane_job_is_fed_where_its_lane_stalled_and_waits_behind_it(turn, status, attempts, expected) -> None:
    made = plan(Evidence(status, attempts=attempts, turn=turn, stalled_at="run-1/math"))
    assert made.remedy == expected and made.remedy.acts == (expected == Remedy.FEED)
    if turn == Turn.BEHIND_A_STALL:
        assert "stalled at run-1/math" in made.text
