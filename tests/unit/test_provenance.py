"""What a benchmark's numbers were made from and what they are: the inputs digest (the tasks it
was asked) and the results fingerprint (the scores it got), read from real run directories, and
compare refusing to call apples oranges."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st
from test_compare import BENCH, REAL_RUN, cli, real_rows, write_rows
from test_gate import policy_file, run_gate

from nemo_gym.orchestration import contract, facts, library
from nemo_gym.orchestration.record import run_in_directory


def copy_of_the_real_run(tmp_path: Path, name: str) -> Path:
    run_dir = tmp_path / name
    shutil.copytree(REAL_RUN, run_dir)
    return run_dir


def inputs_rows(run_dir: Path) -> list[dict]:
    path = run_dir / BENCH / contract.MATERIALIZED_INPUTS_FILE
    return [json.loads(line) for line in path.read_text().splitlines()]


def write_inputs(run_dir: Path, rows: list[dict]) -> None:
    path = run_dir / BENCH / contract.MATERIALIZED_INPUTS_FILE
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def result_of(run_dir: Path):
    [run] = library.results([run_in_directory(str(run_dir))])
    return run.benchmarks[0]


def test_results_carry_both_digests_and_one_changed_reward_changes_the_fingerprint(tmp_path) -> None:
    run_dir = copy_of_the_real_run(tmp_path, "run")
    before = result_of(run_dir)
    assert len(before.inputs_digest) == 64 and len(before.results_fingerprint) == 64
    rows = real_rows(run_dir)
    rows[3] = {**rows[3], "reward": 1.0 - rows[3]["reward"]}
    write_rows(run_dir, rows)
    after = result_of(run_dir)
    assert after.results_fingerprint != before.results_fingerprint
    assert after.inputs_digest == before.inputs_digest
    document = json.loads(library.results_json([library.results([run_in_directory(str(run_dir))])[0]]))
    assert document["benchmarks"][0]["results_fingerprint"] == after.results_fingerprint


def test_the_fingerprint_ignores_row_order_and_how_a_number_is_written() -> None:
    scores = {(0, 0): 1.0, (1, 0): 0.0, (0, 1): 0.5}
    shuffled = dict(reversed(list(scores.items())))
    ints = {(0, 0): 1, (1, 0): 0, (0, 1): 0.5}
    assert facts.results_fingerprint(scores) == facts.results_fingerprint(shuffled) == facts.results_fingerprint(ints)
    assert facts.results_fingerprint({}) is None


def test_the_inputs_digest_ignores_repeats_and_order_but_not_a_changed_prompt() -> None:
    rows = [{"_ng_task_index": t, "_ng_rollout_index": 0, "problem": f"p{t}"} for t in range(3)]
    lines = [json.dumps(r) for r in rows]
    repeated = [json.dumps({**r, "_ng_rollout_index": k}) for k in range(4) for r in reversed(rows)]
    assert facts.inputs_digest(lines) == facts.inputs_digest(repeated)
    changed = [*lines[:2], json.dumps({**rows[2], "problem": "another"})]
    assert facts.inputs_digest(changed) != facts.inputs_digest(lines)
    assert facts.inputs_digest([]) is None


def one_prompt_changed(tmp_path: Path) -> tuple[Path, Path]:
    base = copy_of_the_real_run(tmp_path, "base")
    candidate = copy_of_the_real_run(tmp_path, "candidate")
    rows = inputs_rows(candidate)
    rows = [{**r, "problem": r["problem"] + " (reworded)"} if r["_ng_task_index"] == 5 else r for r in rows]
    write_inputs(candidate, rows)
    return base, candidate


def test_compare_flags_runs_asked_different_tasks_and_the_gate_fails_closed_on_it(tmp_path, capsys) -> None:
    base, candidate = one_prompt_changed(tmp_path)
    code, out, _ = cli(capsys, "compare", str(base), str(candidate), "--fail-on-regression")
    assert code == 3, out
    assert "the runs were asked different tasks (inputs digest" in out
    assert "Cannot be compared: answer-judge: the runs were asked different tasks" in out
    code, out, _ = cli(capsys, "compare", str(base), str(candidate), "--fail-on-regression", "--allow-different-inputs")
    assert code == 0 and "asked different tasks" in out and "regression gate: passed" in out, out
    code, out, _ = cli(capsys, "compare", str(base), str(candidate), "--json")
    [bench] = json.loads(out)["benchmarks"]
    assert bench["comparable"] is False and any("different tasks" in f for f in bench["flags"])


def test_the_gate_calls_a_benchmark_asked_different_tasks_missing(tmp_path, capsys) -> None:
    base, candidate = one_prompt_changed(tmp_path)
    policy = policy_file(tmp_path, {"min_paired": 5, "benchmarks": {BENCH: {"tier": "critical"}}})
    code, out, _ = run_gate(capsys, base, candidate, policy)
    assert code == 4 and "asked different tasks" in out, out


def test_the_same_inputs_compare_clean(tmp_path, capsys) -> None:
    base = copy_of_the_real_run(tmp_path, "base")
    candidate = copy_of_the_real_run(tmp_path, "candidate")
    code, out, _ = cli(capsys, "compare", str(base), str(candidate), "--fail-on-regression")
    assert code == 0 and "different tasks" not in out, out


def test_results_read_what_the_job_recorded_it_ran_bounded(tmp_path) -> None:
    run_dir = copy_of_the_real_run(tmp_path, "run")
    (run_dir / BENCH / ".gym").mkdir(exist_ok=True)
    junk = "".join(f"key{i}=v{i}\n" for i in range(100))
    (run_dir / BENCH / contract.PROVENANCE_FILE).write_text(
        "x" * 10_000 + "\ngym_version=NeMo Gym v0.7.0\nvllm_version.policy=0.32.0\nbad key=x\n=novalue\nnoequals\n"
        "vllm_version.policy=0.32.1\n" + junk
    )
    provenance = result_of(run_dir).provenance
    assert provenance["gym_version"] == "NeMo Gym v0.7.0"
    assert provenance["vllm_version.policy"] == "0.32.1"  # the last line of a key counts
    assert "bad key" not in provenance and len(provenance) == facts.PROVENANCE_MAX_KEYS


@settings(max_examples=200)
@given(st.text(max_size=300))
def test_any_provenance_text_gives_short_printable_entries(text: str) -> None:
    found = facts.parse_provenance(text)
    assert len(found) <= facts.PROVENANCE_MAX_KEYS
    for key, value in found.items():
        assert re.fullmatch(r"[A-Za-z0-9_.-]{1,64}", key)
        assert value and value.isprintable() and len(value) <= facts.PROVENANCE_VALUE_CHARS


def test_past_its_bound_the_newest_lines_of_the_provenance_file_count(tmp_path) -> None:
    run_dir = copy_of_the_real_run(tmp_path, "run")
    (run_dir / BENCH / ".gym").mkdir(exist_ok=True)
    lines = "".join(f"gym_version=NeMo Gym v0.7.{i} (attempt {i})\n" for i in range(200))  # appended per job
    (run_dir / BENCH / contract.PROVENANCE_FILE).write_text(lines)
    assert len(lines) > facts.PROVENANCE_MAX_BYTES
    assert result_of(run_dir).provenance == {"gym_version": "NeMo Gym v0.7.199 (attempt 199)"}


def test_a_sharded_benchmark_shows_what_its_shards_ran(tmp_path) -> None:
    run_dir = copy_of_the_real_run(tmp_path, "run")
    shard = Path(contract.shard_dir(str(run_dir / BENCH), 2))
    (shard / ".gym").mkdir(parents=True)
    (shard / contract.PROVENANCE_FILE).write_text("gym_version=NeMo Gym v0.7.0\n")
    assert result_of(run_dir).provenance == {"gym_version": "NeMo Gym v0.7.0"}
