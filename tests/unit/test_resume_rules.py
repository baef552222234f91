"""The resume rules as plain functions: every row of the README's table, the caps, and how a job's
outcome is told. (test_resume_decisions.py runs the same judge the way a job does, under bash.)"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

import nemo_gym.orchestration
from nemo_gym.orchestration import contract as c
from nemo_gym.orchestration.backends import slurm_node
from nemo_gym.orchestration.chain import Chain, chain_record, parse_chain
from nemo_gym.orchestration.resume import Caps, judge, opening, outcome_of, resume_action

CAPS = Caps(max_retries=3, max_walltime="", max_walltime_seconds=0)


def chain(*records: tuple) -> Chain:
    return parse_chain("".join(chain_record(*r) for r in records))


def first_job_ran(rollouts_at_start: int = 0) -> Chain:
    return chain(("start", "100", 1000, rollouts_at_start), ("successor", "101", "100"))


# -- the README's table, row by row ------------------------------------------------------------------


@pytest.mark.parametrize("outcome", ["timeout", "preempted", "walltime", "requeued"])
def test_row_1_cut_short_after_new_rollouts_resumes_for_free(outcome) -> None:
    ruling = judge(first_job_ran(10), "100", c.Outcome(outcome), elapsed=60, rollouts_now=25, caps=CAPS)
    assert ruling.verdict.action == "free" and ruling.end is None
    assert ruling.verdict.why.endswith("after 60s, 15 new rollout(s)")


@pytest.mark.parametrize("outcome", ["timeout", "preempted", "walltime", "requeued"])
def test_row_2_cut_short_without_new_rollouts_spends_a_retry(outcome) -> None:
    ruling = judge(first_job_ran(10), "100", c.Outcome(outcome), elapsed=60, rollouts_now=10, caps=CAPS)
    assert ruling.verdict.action == "retry" and ruling.end is None


@pytest.mark.parametrize(
    "outcome", ["node-failure", "out-of-memory", "service-died", "driver-killed", "signal", "unknown"]
)
def test_row_2_failures_a_rerun_may_not_repeat_spend_a_retry_even_after_progress(outcome) -> None:
    ruling = judge(first_job_ran(0), "100", c.Outcome(outcome), elapsed=5, rollouts_now=50, caps=CAPS)
    assert ruling.verdict.action == "retry" and ruling.end is None


@pytest.mark.parametrize(
    ("outcome", "text"), [("startup-failed", "a service did not start"), ("driver-failed", "the driver failed")]
)
def test_row_3_a_failure_a_rerun_would_repeat_stops(outcome, text) -> None:
    ruling = judge(first_job_ran(0), "100", c.Outcome(outcome), elapsed=5, rollouts_now=50, caps=CAPS)
    assert ruling.verdict.action == "stop"
    assert ruling.end == ("failed", f"not resumed: {text} in job 100, and a rerun would fail the same way")


@pytest.mark.parametrize(
    ("outcome", "end"),
    [("cancelled", ("cancelled", "job 100 was cancelled")), ("succeeded", ("succeeded", "job 100 finished"))],
)
def test_row_4_cancelled_or_succeeded_stops(outcome, end) -> None:
    ruling = judge(first_job_ran(0), "100", c.Outcome(outcome), elapsed=5, rollouts_now=50, caps=CAPS)
    assert ruling.verdict.action == "stop" and ruling.end == end


# -- the caps ----------------------------------------------------------------------------------------


def test_retries_are_counted_over_the_chain_and_the_one_past_the_cap_gives_up() -> None:
    earlier = [("verdict", str(90 + i), "node-failure", 10, 0, "retry", "x") for i in range(3)]
    past_cap = judge(chain(*earlier, ("start", "100", 0, 0)), "100", c.Outcome.NODE_FAILURE, 10, 0, CAPS)
    assert past_cap.end is not None and past_cap.end[0] == "failed"
    assert past_cap.end[1].startswith("gave up: 4 resumes without progress or after failures (max_retries 3)")
    at_cap = judge(chain(*earlier[:2], ("start", "100", 0, 0)), "100", c.Outcome.NODE_FAILURE, 10, 0, CAPS)
    assert at_cap.end is None


def test_free_resumes_never_spend_retries() -> None:
    earlier = [("verdict", str(90 + i), "timeout", 10, i + 1, "free", "x") for i in range(10)]
    ruling = judge(chain(*earlier, ("start", "100", 0, 10)), "100", c.Outcome.TIMEOUT, 10, 11, Caps(0, "", 0))
    assert ruling.verdict.action == "free" and ruling.end is None


def test_max_walltime_is_summed_over_the_chain_this_job_included() -> None:
    caps = Caps(3, "0:30", 30)
    earlier = chain(("verdict", "99", "timeout", 20, 2, "free", "x"), ("start", "100", 0, 2))
    assert judge(earlier, "100", c.Outcome.TIMEOUT, 9, 4, caps).end is None
    ended = judge(earlier, "100", c.Outcome.TIMEOUT, 10, 4, caps).end
    assert ended == ("timed out", "max_walltime 0:30 reached: the chain's jobs ran 30s together")


def test_the_chain_limit_holds_whatever_the_caps() -> None:
    starts = [("start", str(i), 0, i) for i in range(c.CHAIN_LIMIT)]
    ruling = judge(chain(*starts), str(c.CHAIN_LIMIT - 1), c.Outcome.TIMEOUT, 10, 10**6, Caps(10**6, "", 0))
    assert ruling.end == ("failed", f"gave up: the chain reached {c.CHAIN_LIMIT} jobs")


# -- how an outcome is told -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("phase", "cancelled", "slurm", "cause", "outcome"),
    [
        ("succeeded", True, "CANCELLED", "signal", "succeeded"),  # its own success beats everything
        ("failed", True, "TIMEOUT", "walltime", "cancelled"),  # then the user's cancel marker
        ("failed", False, "TIMEOUT", "service-died", "timeout"),  # then Slurm's word
        ("failed", False, "DEADLINE", None, "timeout"),
        ("failed", False, "BOOT_FAIL", None, "node-failure"),
        ("failed", False, "CANCELLED by 0", None, "cancelled"),  # sacct's spelling
        ("failed", False, "FAILED", "service-died", "service-died"),  # Slurm's FAILED says nothing new
        ("failed", False, "", "preempted", "preempted"),  # Slurm forgot: the job's own record
        (None, False, "", None, "unknown"),  # nothing anywhere: the node was lost
    ],
)
def test_outcome_precedence(phase, cancelled, slurm, cause, outcome) -> None:
    # Slurm's word reaches the rules as the outcome it gives (backends/slurm_node.py, on the node).
    from_slurm = slurm_node.outcome(slurm) if slurm else None
    assert outcome_of(c.Phase.from_word(phase), cancelled, from_slurm, c.Cause.from_word(cause)) is c.Outcome(outcome)


def test_every_cause_a_job_records_has_a_rule_and_words() -> None:
    for cause in c.CAUSES:
        assert resume_action(c.Outcome.of(cause), 1) in ("free", "retry", "stop")
        assert c.Outcome.of(cause).text == cause.text != c.Outcome.UNKNOWN.text, cause


# -- what a starting job does first ---------------------------------------------------------------


def test_opening_of_each_kind_of_start() -> None:
    running = first_job_ran()
    assert opening(Chain(), "100", "", 0, False).kind == "start"
    assert opening(running, "101", "100", 0, False)[:4] == ("judge", "", "100", None)
    assert opening(running, "555", "100", 0, False).kind == "stop"  # not the recorded successor
    assert opening(running, "100", "", 1, False)[:5] == ("judge", "", "100", "requeued", ".gym/100.attempt-1")
    assert opening(running, "101", "100", 0, True).kind == "end"  # the user's cancel marker
    moved_on = chain(("start", "100", 0, 0), ("start", "101", 0, 0))
    assert opening(moved_on, "100", "", 1, False).kind == "stop"  # requeued after the chain moved on
    ended = chain(("start", "100", 0, 0), ("end", "failed", "x"))
    assert opening(ended, "101", "100", 0, False).kind == "stop"


@pytest.mark.parametrize(
    ("stdout", "found"),
    [
        ("900\n", "900"),
        ("900;gpu-cluster\n", "900"),
        ("note: quota 80%\n901\n", "901"),
        ("sbatch: error\n", None),
        ("", None),
    ],
)
def test_successor_id_is_the_last_line_of_sbatch_parsable(stdout, found) -> None:
    assert slurm_node.successor_id(stdout) == found


# -- what the node must have ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "module", ["resume.py", "chain.py", "contract.py", "facts.py", "untrusted.py", "backends/slurm_node.py"]
)
def test_node_side_modules_parse_as_python_3_8(module) -> None:
    source = (Path(nemo_gym.orchestration.__file__).parent / module).read_text()
    ast.parse(source, feature_version=(3, 8))
    imports = {
        alias.name.split(".")[0]
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Import)
        for alias in node.names
    }
    # Staged flat beside each other under steps/: each other's modules, and the stdlib only.
    staged = {"contract", "facts", "untrusted"}
    assert imports - staged <= set(sys.stdlib_module_names), imports
