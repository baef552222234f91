"""The status probe's awk scan of a benchmark's samples (where the host may have no python3) agrees
with ``facts`` (what results and the exporters decide by) on generated rows of gym's shape: whole
rows (the indices near the end, any content before), duplicates, blank and torn lines, rows
without indices or with non-integer ones, garbage; and an expected list that is damaged says
nothing, as ``facts`` trusts none of it. A line over ``facts.MAX_ROW_BYTES`` is one unreadable
row on both sides, and costs the scan little."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

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


def scan_peak_mb(job_dir: Path) -> float:
    """The scan's peak memory, measured in a fresh process (this one's children include others)."""
    script = observe.check_samples_shell() + f"\ngym_check_samples {BENCH} {job_dir}\n"
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
def test_the_scan_agrees_with_facts_on_generated_rows(tmp_path: Path, expected, damaged, written) -> None:
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
