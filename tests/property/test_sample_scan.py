"""The status probe's awk scan of a benchmark's samples (where the host may have no python3) agrees
with ``facts`` (what results and the exporters decide by) on generated rows of gym's shape: whole
rows (the indices near the end, any content before), duplicates, blank and torn lines, rows
without indices or with non-integer ones, garbage; and an expected list that is damaged says
nothing, as ``facts`` trusts none of it. A line over ``facts.MAX_ROW_BYTES`` is one unreadable
row on both sides, and costs the scan little. ``gym_missing_inputs``, which reads rows with the
scan's own awk, writes exactly the materialized lines ``facts`` says are missing, verbatim."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nemo_gym.orchestration import contract, facts, observe
from nemo_gym.orchestration.untrusted import Unreadable

BENCH = "b"
filler = st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\n"), max_size=40)
index = st.integers(min_value=-2, max_value=6)


@st.composite
def gym_row(draw) -> str:
    """One row as gym writes it: content first, the indices near the end (or none, or not integers)."""
    row: dict = {"responses_create_params": {"input": draw(filler)}, "reward": draw(st.sampled_from([0, 1, 0.5]))}
    task = draw(st.one_of(index, index, st.sampled_from([True, 3.0, "1", None])))
    rollout = draw(st.one_of(index, index, st.sampled_from([False, 2.5])))
    if draw(st.booleans()) or task is not None:
        row[facts.TASK_INDEX_KEY] = task
    row[facts.ROLLOUT_INDEX_KEY] = rollout
    row["agent_ref"] = {"name": draw(filler)}
    return json.dumps(
        row, ensure_ascii=draw(st.booleans()), separators=draw(st.sampled_from([(",", ":"), (", ", ": ")]))
    )


@st.composite
def line(draw) -> str:
    kind = draw(st.sampled_from(["row", "row", "row", "blank", "torn", "garbage"]))
    if kind == "row":
        return draw(gym_row())
    if kind == "blank":
        return draw(st.sampled_from(["", "  ", "\t"]))
    if kind == "torn":  # a row cut short by a killed driver: never ends in the object's brace
        text = draw(gym_row())
        return text[: draw(st.integers(min_value=1, max_value=len(text) - 2))].rstrip("}")
    return draw(st.sampled_from(["not json", "[1, 2]", "null", '"x"', "{", "}"]))


def scan_peak_mb(job_dir: Path, script: str | None = None) -> float:
    """The scan's peak memory (or ``script``'s), measured in a fresh process (this one's children
    include others)."""
    script = script or observe.check_samples_shell() + f"\ngym_check_samples {BENCH} {job_dir}\n"
    measure = (
        "import resource, subprocess, sys; subprocess.run(['bash', '-c', sys.argv[1]], stdout=subprocess.DEVNULL); "
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)"
    )
    return (
        int(subprocess.run([sys.executable, "-c", measure, script], capture_output=True, text=True, check=True).stdout)
        / 1024
    )


def expected_line(draw_pair: tuple[int, int]) -> str:
    return json.dumps({"problem": "p", facts.TASK_INDEX_KEY: draw_pair[0], facts.ROLLOUT_INDEX_KEY: draw_pair[1]})


def scan(job_dir: Path) -> observe.SampleCheck | None:
    script = observe.check_samples_shell() + f"\ngym_check_samples {BENCH} {job_dir}\n"
    out = subprocess.run(["bash", "-c", script], capture_output=True, text=True, check=True).stdout
    answer = observe.parse_probe(out, observe.backend_named("local"))
    return answer.checks.get(BENCH)


def decided(expected_lines: list[str], written_lines: list[str]) -> observe.SampleCheck | None:
    """What ``facts`` says of the same files, in the scan's terms."""
    try:
        expected = facts.expected_pairs(expected_lines)
    except Unreadable:
        return None
    written = facts.written_pairs(written_lines)
    check = facts.completeness(expected, written.pairs, written.duplicates)
    in_order = list(dict.fromkeys(p for r in facts.rows_of(expected_lines) for p in [r.pair]))
    missing = [p for p in in_order if p not in written.pairs]
    return observe.SampleCheck(
        check.expected or 0,
        check.written,
        check.duplicates,
        len(check.extra),
        len(missing),
        tuple(missing[: observe.MISSING_NAMED]),
        written.unreadable,
    )


def job_with(tmp_path: Path, expected_lines: list[str], written_lines: list[str]) -> Path:
    job = tmp_path / "job"
    (job / "artifacts").mkdir(parents=True, exist_ok=True)
    (job / contract.MATERIALIZED_INPUTS_FILE).write_text("".join(f"{x}\n" for x in expected_lines))
    (job / contract.ROLLOUTS_FILE).write_text("".join(f"{x}\n" for x in written_lines))
    return job


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    expected=st.lists(st.tuples(index, index), max_size=8),
    damaged=st.sampled_from([None, None, None, "", "{", '{"x": 1}']),
    written=st.lists(line(), max_size=12),
)
def test_the_scan_agrees_with_facts_on_generated_rows(
    tmp_path: Path, each_awk: str, expected, damaged, written
) -> None:
    expected_lines = [expected_line(p) for p in expected] + ([damaged] if damaged is not None else [])
    assert scan(job_with(tmp_path, expected_lines, written)) == decided(expected_lines, written)


def test_a_row_over_the_bound_is_one_unreadable_row_and_costs_the_scan_little(tmp_path: Path) -> None:
    big = json.dumps({"x": "a" * (facts.MAX_ROW_BYTES + 10), facts.TASK_INDEX_KEY: 1, facts.ROLLOUT_INDEX_KEY: 0})
    small = [expected_line((0, 0)), expected_line((1, 0))]
    job = job_with(tmp_path, small, [expected_line((0, 0)), big])
    started = time.monotonic()
    check = scan(job)
    seconds = time.monotonic() - started
    peak_mb = scan_peak_mb(job)
    assert check == decided(small, [expected_line((0, 0)), big]) == observe.SampleCheck(2, 1, 0, 0, 1, ((1, 0),), 1)
    # awk holds at most MAX_ROW_BYTES + 1 of any line (cut streams), in a few buffers: a longer row
    # costs no more (a 200 MB one once took ~4 s and ~3 GB in the scan's regex).
    assert peak_mb < 5 * facts.MAX_ROW_BYTES / 2**20 and seconds < 10, (peak_mb, seconds)


# -- gym_missing_inputs ------------------------------------------------------------------------------


@st.composite
def materialized_line(draw) -> str:
    """A line of the expected list: an input with any content before its indices, or blank."""
    if draw(st.integers(min_value=0, max_value=7)) == 0:
        return draw(st.sampled_from(["", "  ", "\t"]))
    task, rollout = draw(index), draw(index)
    row = {"responses_create_params": {"input": draw(filler)}, facts.TASK_INDEX_KEY: task}
    row[facts.ROLLOUT_INDEX_KEY] = rollout
    return json.dumps(
        row, ensure_ascii=draw(st.booleans()), separators=draw(st.sampled_from([(",", ":"), (", ", ": ")]))
    )


def missing_inputs(job_dir: Path, out: Path) -> tuple[int, str]:
    script = observe.missing_inputs_shell() + '\ngym_missing_inputs "$1" "$2"\n'
    proc = subprocess.run(["bash", "-c", script, "gym", str(job_dir), str(out)], capture_output=True, check=False)
    assert proc.stderr == b"", proc.stderr
    return proc.returncode, proc.stdout.decode()


def missing_lines(expected_lines: list[str], written_lines: list[str]) -> list[str] | None:
    """The materialized lines ``facts`` says are missing: the first line of each expected pair not
    written, in the file's order (None: the list is untrusted)."""
    try:
        expected = facts.expected_pairs(expected_lines)
    except Unreadable:
        return None
    written = facts.written_pairs(written_lines).pairs
    first: dict = {}
    for row in facts.rows_of(expected_lines):
        first.setdefault(row.pair, expected_lines[row.number - 1])
    assert set(first) == expected
    return [text for pair, text in first.items() if pair not in written]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    expected=st.lists(materialized_line(), max_size=10),
    damaged=st.sampled_from([None, None, None, "", "{", '{"x": 1}']),
    written=st.lists(st.one_of(line(), materialized_line()), max_size=12),
)
def test_missing_inputs_are_the_lines_facts_says_are_missing(
    tmp_path: Path, each_awk: str, expected, damaged, written
) -> None:
    expected_lines = expected + ([damaged] if damaged is not None else [])
    out = tmp_path / "missing.jsonl"
    out.unlink(missing_ok=True)
    rc, printed = missing_inputs(job_with(tmp_path, expected_lines, written), out)
    want = missing_lines(expected_lines, written)
    if want is None:
        assert (rc, printed, out.exists()) == (1, "", False)
        return
    assert (rc, printed) == (0, f"{len(want)}\n")
    assert out.read_bytes() == "".join(f"{x}\n" for x in want).encode()


def test_an_untrusted_list_writes_nothing(tmp_path: Path) -> None:
    out = tmp_path / "missing.jsonl"
    for bad in ["{", "not json", json.dumps({facts.TASK_INDEX_KEY: 1, facts.ROLLOUT_INDEX_KEY: 2.5})]:
        job = job_with(tmp_path, [expected_line((0, 0)), bad, expected_line((1, 0))], [])
        assert missing_inputs(job, out) == (1, "") and not out.exists()
    big = json.dumps({"x": "a" * (facts.MAX_ROW_BYTES + 10), facts.TASK_INDEX_KEY: 1, facts.ROLLOUT_INDEX_KEY: 0})
    job = job_with(tmp_path, [expected_line((0, 0)), big], [])
    assert missing_inputs(job, out) == (1, "") and not out.exists()
    (job / contract.MATERIALIZED_INPUTS_FILE).unlink()
    assert missing_inputs(job, out) == (1, "") and not out.exists()


def test_no_rollouts_file_means_every_input_is_missing(tmp_path: Path, each_awk: str) -> None:
    lines = [expected_line((0, 0)), "", expected_line((0, 1)), expected_line((0, 0)) + " ", expected_line((1, 0))]
    job = job_with(tmp_path, lines, [])
    (job / contract.ROLLOUTS_FILE).unlink()
    out = tmp_path / "missing.jsonl"
    assert missing_inputs(job, out) == (0, "3\n")
    assert out.read_text() == "".join(f"{x}\n" for x in [lines[0], lines[2], lines[4]])
    # Everything written: OUT is there and empty.
    (job / contract.ROLLOUTS_FILE).write_text("".join(f"{x}\n" for x in lines))
    assert missing_inputs(job, out) == (0, "0\n") and out.read_bytes() == b""


def test_lines_are_copied_byte_for_byte(tmp_path: Path, each_awk: str) -> None:
    """A CRLF line, raw UTF-8 and a U+2028 inside a string, and a last line without its newline."""
    job = tmp_path / "job"
    (job / "artifacts").mkdir(parents=True)
    raw = (
        b'{"q": "caf\xc3\xa9 \xe2\x80\xa8", "_ng_task_index": 0, "_ng_rollout_index": 0}\r\n'
        b'{"q": "x", "_ng_task_index": 1, "_ng_rollout_index": 0}\n'
        b'{"q": "\\u00e9", "_ng_task_index": 2, "_ng_rollout_index": 0}'
    )
    (job / contract.MATERIALIZED_INPUTS_FILE).write_bytes(raw)
    (job / contract.ROLLOUTS_FILE).write_bytes(raw.split(b"\n")[1] + b"\n")
    out = tmp_path / "missing.jsonl"
    assert missing_inputs(job, out) == (0, "2\n")
    lines = raw.split(b"\n")
    assert out.read_bytes() == lines[0] + b"\n" + lines[2] + b"\n"


def test_a_row_over_the_bound_costs_the_missing_inputs_little(tmp_path: Path) -> None:
    big = json.dumps({"x": "a" * (facts.MAX_ROW_BYTES + 10), facts.TASK_INDEX_KEY: 1, facts.ROLLOUT_INDEX_KEY: 0})
    small = [expected_line((0, 0)), expected_line((1, 0))]
    out = tmp_path / "missing.jsonl"
    script = observe.missing_inputs_shell() + f"\ngym_missing_inputs {tmp_path / 'job'} {out}\n"
    for expected_lines, written_lines, result in [
        (small, [expected_line((0, 0)), big], (0, "1\n")),  # the big row is no sample
        (small + [big], [], (1, "")),  # the list is untrusted
    ]:
        job = job_with(tmp_path, expected_lines, written_lines)
        out.unlink(missing_ok=True)
        started = time.monotonic()
        assert missing_inputs(job, out) == result
        seconds = time.monotonic() - started
        peak_mb = scan_peak_mb(job, script)
        assert peak_mb < 5 * facts.MAX_ROW_BYTES / 2**20 and seconds < 10, (peak_mb, seconds)
    assert not out.exists()


@pytest.mark.skipif(shutil.which("shellcheck") is None, reason="shellcheck is not installed (scripts/test installs it)")
def test_the_functions_pass_shellcheck() -> None:
    script = observe.missing_inputs_shell() + 'gym_check_samples b "$1"\ngym_missing_inputs "$1" "$2"\n'
    proc = subprocess.run(["shellcheck", "-s", "bash", "-"], input=script, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout
