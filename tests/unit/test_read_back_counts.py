"""Counts and scheduler words read back from a node are untrusted text: digits that are not ASCII,
huge fields and a judge called without its scheduler end in a safe value or a usage line, never in
an exception that turns a whole status into an internal error."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nemo_gym.orchestration import contract, resume, usage
from nemo_gym.orchestration.backends import backend_named
from nemo_gym.orchestration.backends.slurm_node import successor_id
from nemo_gym.orchestration.observe import parse_probe

SLURM = backend_named("slurm")


@pytest.mark.parametrize(("text", "count"), [("12", 12), (" 7\n", 7), ("²", 0), ("١٢", 0), ("-3", 0), ("", 0)])
def test_a_count_is_ascii_digits_or_zero(text: str, count: int) -> None:
    assert contract.read_count(text) == count


def test_a_superscript_restart_count_is_no_restart() -> None:
    view = SLURM.describe(["JobState=RUNNING Restarts=² Reason=None", ""])
    assert view.running and view.restarts == 0


def test_a_huge_scheduler_answer_is_cut_where_it_is_shown() -> None:
    view = SLURM.describe([f"JobState=PENDING Reason={'x' * 100_000}", ""])
    assert view.waiting and len(view.reason) <= 200


@given(st.text(max_size=200), st.text(max_size=200))
def test_any_scheduler_answer_describes_without_raising(scontrol: str, sacct: str) -> None:
    SLURM.describe([scontrol, sacct])


def test_accounting_and_clock_records_with_other_digits_are_skipped() -> None:
    assert usage.parse_accounting_row(["1²", "10", "gres/gpu=1"]) is None
    assert usage.parse_accounting_row(["12", "1²", "gres/gpu=²"]) == usage.AccountingRow("12", 0, 0)
    answer = parse_probe(f"{contract.PROBE_MARKER}T\x1f1²\n", SLURM)
    assert answer.now is None


def test_a_successor_id_is_ascii_digits() -> None:
    assert successor_id("Submitted\n123;cluster\n") == "123" and successor_id("12²\n") is None


def test_the_judge_without_its_scheduler_prints_its_usage(monkeypatch, capsys) -> None:
    monkeypatch.setenv(contract.ENV_JOB_DIR, "/nonexistent")
    monkeypatch.setenv(contract.ENV_JOB_ID, "1")
    assert resume.main(["begin", "", "0"]) == 2
    assert "--scheduler MODULE" in capsys.readouterr().err


def test_every_probe_record_kind_has_its_reader_and_the_probe_prints_only_those() -> None:
    from nemo_gym.orchestration.observe import _RECORD_READERS

    assert set(_RECORD_READERS) == set(contract.ProbeRecord)
    golden = Path(__file__).parent.parent / "golden" / "expected"
    printed = set()
    for probe in golden.glob("*/submit-side/probe.sh"):
        text = probe.read_text()
        # printf '<marker>J\x1f…' in bash (the separator escaped or raw), printf "%sE\037…", m in awk (m is the marker)
        printed |= set(re.findall(re.escape(contract.PROBE_MARKER) + r"([A-Z])(?:\\x1f|\x1f)", text))
        printed |= set(re.findall(r'printf "%s([A-Z])\\037', text))
        printed |= set(re.findall(r"printf '%s([A-Z])\\x1f", text))
        # a record's marker and kind handed to a function that prints the fields after it
        printed |= set(re.findall(re.escape(contract.PROBE_MARKER) + r"([A-Z])$", text, re.MULTILINE))
    assert printed == {kind.value for kind in contract.ProbeRecord}, printed


def test_a_benchmark_record_with_other_digits_counts_no_rollouts() -> None:
    answer = parse_probe(f"{contract.PROBE_MARKER}B\x1fbench\x1f1²\x1f\n", SLURM)
    assert answer.benchmarks["bench"][0] == 0
