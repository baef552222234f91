"""The typed vocabularies: each enum's values are the words the job scripts print and the records
hold, and what is read back (untrusted) maps to a member or fails closed, never a traceback."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from render_helpers import stage

from nemo_gym.orchestration import contract as c
from nemo_gym.orchestration import facts, shared_queue
from nemo_gym.orchestration.backends import slurm_node
from nemo_gym.orchestration.chain import CHAIN_END_STATES, Action, parse_chain
from nemo_gym.orchestration.contract import Cause, Outcome, Phase, StateFile, Status
from nemo_gym.orchestration.exporters import run_exports
from nemo_gym.orchestration.exporters.run_exports import ExportResult
from nemo_gym.orchestration.facts import ReceiptState
from nemo_gym.orchestration.resume import outcome_of

GOLDENS = Path(__file__).parent.parent / "golden" / "expected"


def printed(*patterns: str) -> set[str]:
    """The words the rendered scripts of every golden scenario print where ``patterns`` match."""
    words: set[str] = set()
    for path in GOLDENS.rglob("*.sh"):
        text = path.read_text()
        for pattern in patterns:
            words |= set(re.findall(pattern, text))
    return words


def values(enum: type) -> set[str]:
    return {member.value for member in enum}


# -- each enum's words are the bash side's -------------------------------------------------------------


def test_phase_is_every_phase_the_scripts_write_and_no_other() -> None:
    written = printed(r"gym_phase ([a-z]+)", r'gym_bench_phase "\$bench" ([a-z]+)', r"\bphase=([a-z]+)")
    assert written == values(Phase)


def test_cause_is_every_cause_the_scripts_record_and_no_other() -> None:
    recorded = printed(r'gym_finish \S+ "[^"\n]*" ([a-z-]+)', r"printf '([a-z-]+)'\n", r"\bcause=([a-z-]+)\n")
    # A shared deployment's job finishes with the cause its decider (shared_queue.py) answers.
    decided = re.findall(r"\bc\.Cause\.([A-Z_]+)", Path(shared_queue.__file__).read_text())
    assert recorded | {Cause[name].value for name in decided} == values(Cause)


def test_the_causes_after_which_a_job_exports_are_the_job_scripts_case() -> None:
    # No golden has a job of its own that exports (the export scenario shares one job).
    staged = stage(GOLDENS.parent / "configs" / "export.yaml", overrides=["job.deployment=per_benchmark"])
    [case] = re.findall(r'case "\$cause" in\n\s*"" \| ([a-z| -]+)\)', staged.job_script("b"))
    assert case.split(" | ") == [cause.value for cause in Cause.exporting()]
    assert {cause for cause in Cause if cause.exports} == {Cause.SERVICE_DIED, Cause.DRIVER_FAILED, Cause.DRIVER_KILLED}


def test_status_takes_the_states_the_scripts_export_with_and_every_phase() -> None:
    assert printed(r"echo ([a-z]+) \|\| echo ([a-z]+)") == {("succeeded", "failed")}
    assert {"succeeded", "failed"} <= values(Status)
    assert {Status.of(phase).value for phase in Phase} <= values(Status)


def test_status_words_are_those_of_status_json_and_records() -> None:
    assert [s.value for s in Status] == [
        "queued",
        "starting",
        "running",
        "succeeded",
        "incomplete",
        "failed",
        "cancelled",
        "timed out",
        "preempted",
        "unknown",
    ]
    assert {s for s in Status if not s.final} == {Status.QUEUED, Status.STARTING, Status.RUNNING}


def test_outcome_and_action_words_are_those_of_the_chain_file() -> None:
    assert values(Outcome) == {
        "succeeded",
        "cancelled",
        "timeout",
        "preempted",
        "node-failure",
        "out-of-memory",
        "requeued",
        "unknown",
    } | values(Cause)
    assert values(Action) == {"free", "retry", "stop"}
    assert {word for word, _ in slurm_node.ending_groups()} <= set(Cause)


def test_receipt_and_export_words_are_those_of_the_receipts() -> None:
    assert values(ReceiptState) == {"running", "done", "failed"}
    assert values(ExportResult) == {"done", "failed", "skipped", "refused"}
    for state in ReceiptState:
        receipt = facts.parse_receipt(f'{{"state": "{state}"}}'.encode())
        assert receipt is not None and receipt.state is state


@pytest.mark.parametrize("enum", [Phase, Cause, Status, Outcome, Action, ReceiptState, ExportResult])
def test_a_member_is_its_word_wherever_it_is_printed(enum) -> None:
    for member in enum:
        assert str(member) == f"{member}" == format(member) == member.value == member


# -- what each cause carries ---------------------------------------------------------------------------


def test_a_rerun_repeats_a_service_that_never_started_a_failing_driver_and_a_full_disk_only() -> None:
    repeating = {Cause.STARTUP_FAILED, Cause.DRIVER_FAILED, Cause.DISK_FULL}
    assert {cause for cause in Cause if cause.repeats_on_rerun} == repeating
    assert {o for o in Outcome if o.stops_the_chain} == {
        Outcome.SUCCEEDED,
        Outcome.CANCELLED,
        Outcome.STARTUP_FAILED,
        Outcome.DRIVER_FAILED,
        Outcome.DISK_FULL,
    }


def test_an_outcome_of_a_causes_word_tells_it_as_the_cause_does() -> None:
    for cause in Cause:
        assert Outcome.of(cause).cause is cause and Outcome.of(cause).text == cause.text
    assert all(outcome.text for outcome in Outcome)


# -- read back: a member, or the safe one -----------------------------------------------------------------


@pytest.mark.parametrize("word", ["", "Failed", "succ\ufffdeeded", " failed", None, 3, ["failed"]])
def test_a_word_no_member_has_is_none(word) -> None:
    for enum in (Phase, Cause, Status, Outcome, Action):
        assert enum.from_word(word) is None


def test_a_chain_file_s_unknown_words_are_unknown_outcomes_stops_and_unknown_ends() -> None:
    chain = parse_chain("verdict\t100\tmelted\t5\t3\tleap\twhy\nend\tqueued\twhy\n")
    assert chain.verdicts[0].outcome is Outcome.UNKNOWN and chain.verdicts[0].action is Action.STOP
    assert chain.end == (Status.UNKNOWN, "why") and chain.retries() == 0 and chain.summary() == ""


def test_a_cause_file_s_unknown_word_is_no_cause() -> None:
    assert outcome_of(Phase.FAILED, False, None, Cause.from_word("melted")) is Outcome.UNKNOWN


def test_an_export_state_that_is_no_status_is_a_usage_error(capsys) -> None:
    assert run_exports.main(["/nonexistent", "--state", "melted"]) == run_exports.EXIT_USAGE
    assert "--state 'melted' is not a state (queued, starting," in capsys.readouterr().err


def test_the_state_file_is_read_once_for_every_field() -> None:
    state = StateFile.parse("phase=running\ndetail=driver\ntime=2026-12-01T00:00:00Z\nattempt=2\nnew_key=x\n")
    assert state == StateFile(Phase.RUNNING, "running", "driver", "2026-12-01T00:00:00Z", requeue=2)
    assert StateFile.parse("phase=melted\n") == StateFile(None, "melted") and StateFile.parse("phase=melted").written
    assert not StateFile.parse("").written and StateFile.parse("attempt=\u00b2").requeue == 0


@given(st.text(max_size=300))
def test_any_state_file_text_parses(text: str) -> None:
    state = StateFile.parse(text)
    assert state.phase is None or isinstance(state.phase, Phase)
    assert state.requeue >= 0 and state.written == (state.phase_word != "")


_KINDS = st.sampled_from([c.RECORD_START, c.RECORD_SUCCESSOR, c.RECORD_VERDICT, c.RECORD_END])


@given(st.lists(st.tuples(_KINDS, st.lists(st.text(max_size=12), max_size=8)), max_size=6))
def test_any_chain_file_text_parses(rows: list[tuple[str, list[str]]]) -> None:
    chain = parse_chain("\n".join("\t".join([kind, *cells]) for kind, cells in rows))
    assert all(isinstance(v.outcome, Outcome) and isinstance(v.action, Action) for v in chain.verdicts)
    assert chain.end is None or chain.end[0] in CHAIN_END_STATES + (Status.UNKNOWN,)
