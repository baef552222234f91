"""Results users can trust, on a real NeMo Gym run (tests/data/quickstart-run, see its README): a
complete run is 12/12; the same run with rows removed is incomplete, names what is missing and
fails `gym eval results`; duplicates count once; a run directory is read where it lies.

The run directories are real directories read by the real scripts over the local connection (bash
and the host's python3), as `gym eval results DIR` reads them."""

from __future__ import annotations

import base64
import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nemo_gym.orchestration import contract, facts, library, results
from nemo_gym.orchestration.cli.main import main
from nemo_gym.orchestration.errors import UserError
from nemo_gym.orchestration.library import select, select_run
from nemo_gym.orchestration.observe import JobStatus
from nemo_gym.orchestration.record import run_in_directory
from nemo_gym.orchestration.rollouts import parse_expected, parse_rollouts

REAL_RUN = Path(__file__).resolve().parents[1] / "data" / "quickstart-run"
BENCH = "answer-judge"
EXPECTED_PAIRS = {(t, 0) for t in range(12)}


def copy_of_the_real_run(where: Path) -> Path:
    shutil.copytree(REAL_RUN, where)
    return where


def rollouts_file(run_dir: Path) -> Path:
    return run_dir / BENCH / contract.ROLLOUTS_FILE


def rows(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in rollouts_file(run_dir).read_text().splitlines()]


def write_rows(run_dir: Path, new_rows: list[dict]) -> None:
    rollouts_file(run_dir).write_text("".join(json.dumps(r) + "\n" for r in new_rows))


def without_tasks(run_dir: Path, tasks: set[int]) -> None:
    write_rows(run_dir, [r for r in rows(run_dir) if r["_ng_task_index"] not in tasks])


def cli(capsys, *args: str) -> tuple[int, str, str]:
    code = main(["eval", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_the_fixture_is_what_gym_wrote() -> None:
    written = parse_rollouts(rollouts_file(REAL_RUN).read_text().splitlines())
    expected = parse_expected((REAL_RUN / BENCH / contract.MATERIALIZED_INPUTS_FILE).read_text().splitlines())
    assert written.written == expected == EXPECTED_PAIRS


def test_a_complete_real_run_is_12_of_12_and_its_results_are_results(tmp_path, capsys) -> None:
    run_dir = copy_of_the_real_run(tmp_path / "run")
    run = library.results([run_in_directory(str(run_dir))])[0]
    [result] = run.benchmarks
    assert (result.state, result.complete, result.samples, result.expected_samples) == ("succeeded", True, 12, 12)
    assert result.missing == [] and result.duplicates == 0 and result.note is None
    assert result.value == 0.0 and result.scored_tasks == 12 and result.task_means == dict.fromkeys(range(12), 0.0)
    # gym's names made MLflow-safe, as every exporter names them (once gym's list index and group
    # were in the name: ``0/key_metrics/mean/reward``, which no exporter used).
    assert result.metrics["mean/reward"] == 0.0 and result.metrics["pass_1_avg-of-1_/accuracy"] == 0.0
    assert result.key_metrics[:2] == ["mean/reward", "pass_1_avg-of-1_/accuracy"]
    assert run.complete
    code, out, _ = cli(capsys, "results", str(run_dir))
    assert code == 0
    assert "answer-judge  succeeded  12/12    0.0000" in out


def test_the_run_with_rollouts_removed_is_incomplete_names_them_and_fails_results(tmp_path, capsys) -> None:
    run_dir = copy_of_the_real_run(tmp_path / "run")
    without_tasks(run_dir, {3, 7, 10})
    [result] = library.results([run_in_directory(str(run_dir))])[0].benchmarks
    assert (result.state, result.complete, result.samples, result.expected_samples) == ("incomplete", False, 9, 12)
    assert result.missing == [(3, 0), (7, 0), (10, 0)]
    assert result.note == "incomplete: 3 of 12 samples missing"

    code, out, _ = cli(capsys, "results", str(run_dir))
    assert code == 1
    assert "answer-judge  incomplete  9/12     0.0000 (partial)" in out
    assert "answer-judge: missing task 3 rollout 0, task 7 rollout 0, task 10 rollout 0" in out
    assert "mean/reward=" not in out  # gym's aggregate of a partial run is not shown as a result

    code, out, _ = cli(capsys, "results", str(run_dir), "--json")
    doc = json.loads(out)
    assert code == 1 and doc["complete"] is False
    [bench] = doc["benchmarks"]
    assert {k: bench[k] for k in ("state", "complete", "expected_samples", "samples")} == {
        "state": "incomplete",
        "complete": False,
        "expected_samples": 12,
        "samples": 9,
    }
    assert bench["missing"] == [{"task": 3, "rollout": 0}, {"task": 7, "rollout": 0}, {"task": 10, "rollout": 0}]

    code, out, _ = cli(capsys, "status", str(run_dir), "--json")
    [job] = json.loads(out)["jobs"]
    assert job["state"] == "incomplete"
    assert (
        job["detail"]
        == "driver finished, but 3 of 12 samples are missing (task 3 rollout 0, task 7 rollout 0, task 10 rollout 0)"
    )
    assert (job["complete"], job["samples"], job["expected_samples"], job["missing_samples"]) == (False, 9, 12, 3)


def test_duplicate_rollouts_count_once_and_are_reported(tmp_path, capsys) -> None:
    run_dir = copy_of_the_real_run(tmp_path / "run")
    original = rows(run_dir)
    first, second = original[0], original[1]
    write_rows(run_dir, [*original, {**first, "reward": 1.0}, second])  # a resumed driver wrote them again
    [result] = library.results([run_in_directory(str(run_dir))])[0].benchmarks
    assert (result.state, result.complete, result.samples, result.duplicates) == ("succeeded", True, 12, 2)
    assert result.value == 0.0  # the first row of a pair wins: the repeat's reward 1.0 is not counted
    assert result.note == "2 duplicate row(s) counted once"
    code, out, _ = cli(capsys, "results", str(run_dir))
    assert code == 0 and "answer-judge: 2 duplicate row(s) counted once" in out
    code, out, _ = cli(capsys, "status", str(run_dir), "--json")
    [job] = json.loads(out)["jobs"]
    assert job["duplicates"] == 2 and job["samples"] == 12 and job["state"] == "succeeded"
    assert job["detail"] == "driver finished (2 duplicate row(s) counted once)"


def test_a_truncated_last_row_is_missing_not_written(tmp_path) -> None:
    run_dir = copy_of_the_real_run(tmp_path / "run")
    text = rollouts_file(run_dir).read_text()
    last_start = text.rstrip("\n").rfind("\n") + 1
    last_task = json.loads(text[last_start:])["_ng_task_index"]
    cut = text[last_start:].index('"agent_ref"')  # after the indices: a naive scan would count it
    rollouts_file(run_dir).write_text(text[: last_start + cut])
    record = run_in_directory(str(run_dir))
    [result] = library.results([record])[0].benchmarks
    assert result.missing == [(last_task, 0)] and result.unreadable_lines == 1
    [job] = library.status([record])[0].jobs
    assert job.state == "incomplete" and job.check is not None and job.check.first_missing == ((last_task, 0),)


def without_python3(tmp_path: Path, monkeypatch) -> None:
    """A PATH with every tool of this one but python."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for directory in os.environ["PATH"].split(os.pathsep):
        for tool in Path(directory).glob("*") if Path(directory).is_dir() else ():
            if not tool.name.startswith("python") and not (bin_dir / tool.name).exists():
                (bin_dir / tool.name).symlink_to(tool)
    monkeypatch.setenv("PATH", str(bin_dir))


def test_results_are_the_same_where_the_host_has_no_python3(tmp_path, monkeypatch) -> None:
    run_dir = copy_of_the_real_run(tmp_path / "run")
    without_tasks(run_dir, {5})
    projected = library.results([run_in_directory(str(run_dir))])[0].benchmarks[0]
    without_python3(tmp_path, monkeypatch)  # the files come base64, not projected
    raw = library.results([run_in_directory(str(run_dir))])[0].benchmarks[0]
    assert raw.as_dict() == projected.as_dict() and raw.task_means == projected.task_means
    assert raw.missing == [(5, 0)]


def test_without_python3_a_row_over_the_bound_is_cut_where_it_lies(tmp_path, monkeypatch) -> None:
    """The files travel base64 without the projection, but each line only to one byte past the row
    bound: a row of 200 MB costs a bounded read on this side, counted oversized as the projection
    counts it."""
    run_dir = copy_of_the_real_run(tmp_path / "run")
    rows = run_dir / BENCH / contract.ROLLOUTS_FILE
    with rows.open("a") as fh:
        fh.write(json.dumps({"x": "a" * (facts.MAX_ROW_BYTES + 5), "_ng_task_index": 99, "_ng_rollout_index": 0}))
        fh.write("\n")
    projected = library.results([run_in_directory(str(run_dir))])[0].benchmarks[0]
    without_python3(tmp_path, monkeypatch)
    raw = library.results([run_in_directory(str(run_dir))])[0].benchmarks[0]
    assert raw.unreadable_lines == projected.unreadable_lines == 1
    assert raw.task_means == projected.task_means


def inputs_file(run_dir: Path) -> Path:
    return run_dir / BENCH / contract.MATERIALIZED_INPUTS_FILE


def test_a_run_without_the_expected_list_is_of_unknown_completeness_never_complete(tmp_path, capsys) -> None:
    run_dir = copy_of_the_real_run(tmp_path / "run")
    inputs_file(run_dir).unlink()  # gym before 0.7.0, or a file lost
    without_tasks(run_dir, set(range(6, 12)))  # 6 of 12 written: nothing can tell
    [result] = library.results([run_in_directory(str(run_dir))])[0].benchmarks
    assert (result.state, result.complete, result.samples, result.expected_samples) == ("succeeded", None, 6, None)
    unknown = "no rollouts_materialized_inputs.jsonl (gym before 0.7.0 writes none): nothing lists the samples the driver meant to write"
    assert result.completeness_reason == unknown
    code, out, _ = cli(capsys, "results", str(run_dir))
    assert code == 1
    assert "answer-judge  succeeded  6/?      0.0000 (unknown)" in out
    assert f"completeness unknown: {unknown}" in out
    code, out, _ = cli(capsys, "results", str(run_dir), "--json")
    doc = json.loads(out)
    assert code == 1 and doc["complete"] is None
    [bench] = doc["benchmarks"]
    assert bench["complete"] is None and bench["expected_samples"] is None
    assert bench["completeness_reason"] == unknown


@pytest.mark.parametrize(
    ("content", "why"),
    [
        (b"[" * 200_000 + b"\n", "line 1 of the materialized inputs is not a JSON object"),
        (
            b'{"_ng_task_index": 0, "_ng_rollout_index": 0}\n\xff\xfe\n',
            "line 2 of the materialized inputs is not a JSON object",
        ),
        (b"null\n", "line 1 of the materialized inputs is not a JSON object"),
    ],
    ids=["200000-deep", "not-utf-8", "not-an-object"],
)
def test_an_unreadable_expected_list_is_completeness_unknown_in_one_line(tmp_path, capsys, content, why) -> None:
    run_dir = copy_of_the_real_run(tmp_path / "run")
    inputs_file(run_dir).write_bytes(content)
    [result] = library.results([run_in_directory(str(run_dir))])[0].benchmarks
    assert result.complete is None and result.state == "succeeded"
    assert result.completeness_reason is not None and why in result.completeness_reason
    assert result.completeness_reason.startswith(
        "artifacts/rollouts_materialized_inputs.jsonl cannot be trusted (line "
    )
    code, out, err = cli(capsys, "results", str(run_dir), "--json")
    assert code == 1 and json.loads(out)["complete"] is None and err == ""


def test_a_failed_job_is_partial_never_a_result(tmp_path, capsys) -> None:
    run_dir = copy_of_the_real_run(tmp_path / "run")
    without_tasks(run_dir, set(range(4, 12)))
    [state_file] = (run_dir / BENCH / contract.MARKERS_DIR).glob(f"*/{contract.STATE_FILE}")
    state_file.write_text("phase=failed\ndetail=driver failed with exit status 1\nattempt=0\n")
    [result] = library.results([run_in_directory(str(run_dir))])[0].benchmarks
    assert (result.state, result.complete, result.samples) == ("failed", False, 4)
    assert result.note == "partial: the job failed; 4/12 samples on disk"
    code, out, _ = cli(capsys, "results", str(run_dir))
    assert code == 1 and "answer-judge  failed  4/12     0.0000 (partial)" in out


# -- where a run lies ----------------------------------------------------------------------------


def test_a_run_copied_elsewhere_is_read_where_it_lies(tmp_path, capsys) -> None:
    original = copy_of_the_real_run(tmp_path / "scratch" / "run")
    archived = tmp_path / "archive" / "gym-job-copy"
    shutil.copytree(original, archived)
    shutil.rmtree(original)  # the scratch copy is gone: only the archived one can be read
    without_tasks(archived, {0})
    record = select_run(str(archived))
    assert record.run_dir == str(archived) and record.hostname is None
    assert [b.job_dir for b in record.benchmarks] == [str(archived / BENCH)]
    code, out, _ = cli(capsys, "results", str(archived), "--json")
    doc = json.loads(out)
    assert doc["run_dir"] == str(archived) and doc["benchmarks"][0]["missing"] == [{"task": 0, "rollout": 0}]
    os.chdir(tmp_path / "archive")
    assert select_run("gym-job-copy").run_dir == str(archived)  # a bare name that holds a run's record
    assert select_run("./gym-job-copy").run_dir == str(archived)


def test_a_directory_that_is_not_a_run_is_one_clean_error(tmp_path, capsys) -> None:
    (tmp_path / "empty").mkdir()
    code, _, err = cli(capsys, "results", str(tmp_path / "empty"))
    assert code == 1
    assert (
        err
        == f"error: {tmp_path / 'empty'} is not a run directory (it has no gym-job.json); give the directory gym eval submit printed (<output_path>/<run id>)\n"
    )
    code, _, err = cli(capsys, "results", str(tmp_path / "nowhere"))
    assert code == 1 and err.startswith(f"error: no run directory {tmp_path / 'nowhere'};")
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / contract.RECORD_FILE).write_text("{not json")
    with pytest.raises(UserError, match="cannot read the run's record"):
        select_run(str(tmp_path / "bad"))


def test_several_runs_by_directory_in_the_order_given(tmp_path) -> None:
    a = copy_of_the_real_run(tmp_path / "a")
    b = copy_of_the_real_run(tmp_path / "b")
    assert [r.run_dir for r in select([str(b), str(a)]).records] == [str(b), str(a)]


# -- several runs side by side --------------------------------------------------------------------


def with_rewards(run_dir: Path, rewards: dict[int, float]) -> None:
    write_rows(run_dir, [{**r, "reward": rewards.get(r["_ng_task_index"], r["reward"])} for r in rows(run_dir)])


def test_several_runs_are_a_run_by_benchmark_table_with_k_of_n_where_incomplete(tmp_path, capsys) -> None:
    base = copy_of_the_real_run(tmp_path / "step-1000")
    better = copy_of_the_real_run(tmp_path / "step-2000")
    with_rewards(better, dict.fromkeys(range(6), 1.0))
    partial = copy_of_the_real_run(tmp_path / "step-3000")
    with_rewards(partial, dict.fromkeys(range(9), 1.0))
    without_tasks(partial, {9, 10, 11})
    code, out, _ = cli(capsys, "results", str(base), str(better), str(partial))
    assert code == 1  # one of them is incomplete
    lines = out.splitlines()
    assert lines[0] == "reward: mean over tasks; (k/n): samples written of those expected, where not complete"
    assert lines[1].split() == ["RUN", "answer-judge", "GPU-HOURS", "WALL"]
    # Copies of one run share its id: their directories name them.
    assert [line.split()[:3] for line in lines[2:5]] == [
        ["step-1000", "0.0000", "-"],
        ["step-2000", "0.5000", "-"],
        ["step-3000", "1.0000", "(9/12)"],
    ]
    run_id = json.loads((base / contract.RECORD_FILE).read_text())["gym_job_id"]
    assert lines[5].strip() == f"step-1000: {run_id} {base}"
    code, out, _ = cli(capsys, "results", str(base), str(better), "--json")
    docs = json.loads(out)["runs"]
    assert code == 0 and [d["run_dir"] for d in docs] == [str(base), str(better)]
    assert [d["benchmarks"][0]["value"] for d in docs] == [0.0, 0.5]


def test_a_metric_no_row_carries_is_one_error_naming_what_there_is(tmp_path, capsys) -> None:
    run_dir = copy_of_the_real_run(tmp_path / "run")
    code, _, err = cli(capsys, "results", str(run_dir), "--metric", "rewrd")
    assert code == 1
    assert (
        err
        == "error: no rollout carries a numeric 'rewrd'; the rows have: fn, fp, mask_sample, reward, tn, tp; choose one with --metric NAME\n"
    )
    code, out, _ = cli(capsys, "results", str(run_dir), "--metric", "tn", "--json")
    assert code == 0 and json.loads(out)["benchmarks"][0]["metric"] == "tn"


def test_cancel_refuses_a_directory(tmp_path, capsys) -> None:
    run_dir = copy_of_the_real_run(tmp_path / "run")
    code, _, err = cli(capsys, "cancel", str(run_dir))
    assert code == 1
    assert (
        err == f"error: gym eval cancel takes a run id from your index (gym eval list), not a directory ({run_dir})\n"
    )


# -- rows without a score, and files nobody should trust ------------------------------------------

NO_SCORE = st.one_of(
    st.sampled_from([float("nan"), float("inf"), float("-inf"), None, [1], {"v": 1}, 10**400]),
    st.text(max_size=4),
)


def test_rows_whose_metric_is_nan_infinite_or_a_string_make_the_value_partial_and_are_named(tmp_path, capsys) -> None:
    run_dir = copy_of_the_real_run(tmp_path / "run")
    bad = {0: float("nan"), 3: float("inf"), 5: float("-inf"), 7: "1.0", 9: None, 11: "n/a"}
    with_rewards(run_dir, {t: 1.0 for t in range(12)})
    write_rows(run_dir, [{**r, "reward": bad.get(r["_ng_task_index"], r["reward"])} for r in rows(run_dir)])
    [result] = library.results([run_in_directory(str(run_dir))])[0].benchmarks
    assert (result.value, result.scored_tasks, result.written_tasks, result.complete) == (1.0, 6, 12, False)
    assert [(u.task, u.why.value) for u in result.unscoreable] == [
        (0, "NaN or infinite"),
        (3, "NaN or infinite"),
        (5, "NaN or infinite"),
        (7, "not a number"),
        (9, "not a number"),
        (11, "not a number"),
    ]
    assert result.completeness_reason == "6 row(s) without a usable 'reward' score"
    code, out, _ = cli(capsys, "results", str(run_dir))
    assert code == 1
    assert "answer-judge  succeeded  12/12    1.0000 (partial, 6 unscored)" in out
    assert "partial value: 6 row(s) without a usable 'reward' score left out (scored 6 of 12 task(s))" in out
    assert (
        "answer-judge: no 'reward' score: task 0 rollout 0 (NaN or infinite), task 3 rollout 0 (NaN or infinite), "
        "task 5 rollout 0 (NaN or infinite), task 7 rollout 0 (not a number)"
    ) in out
    code, out, _ = cli(capsys, "results", str(run_dir), "--json")
    [bench] = json.loads(out)["benchmarks"]
    assert code == 1 and bench["complete"] is False and bench["unscoreable_rows"] == 6
    assert bench["unscoreable"][0] == {"task": 0, "rollout": 0, "why": "NaN or infinite"}


@settings(max_examples=150, deadline=None)
@given(st.dictionaries(st.integers(0, 11), NO_SCORE, max_size=12))
def test_any_unscoreable_row_makes_the_value_partial_over_the_rest(bad: dict[int, Any]) -> None:
    lines = [json.dumps({"_ng_task_index": t, "_ng_rollout_index": 0, "reward": bad.get(t, 1.0)}) for t in range(12)]
    expected = [json.dumps({"_ng_task_index": t, "_ng_rollout_index": 0}) for t in range(12)]
    found = results._Found(files=["m.json"], rollout_lines=lines, expected_lines=expected)
    status = JobStatus("b", "1", "succeeded", "", 12, "/run/b")
    result = results.benchmark_result("b", status, found, "reward")
    assert [u.task for u in result.unscoreable] == sorted(bad)
    assert result.complete is (not bad)
    assert result.value == (None if len(bad) == 12 else 1.0) and result.scored_tasks == 12 - len(bad)
    assert json.loads(json.dumps(result.as_dict(), allow_nan=False))["unscoreable_rows"] == len(bad)


@settings(max_examples=30, deadline=None)
@given(st.sampled_from([b"[" * 200_000, b'{"a":' * 100_000, b"[1, 2]", b"null", b'"x"', b"\xff\xfe", b"{", b""]))
def test_a_metrics_file_that_is_not_metrics_is_one_line_of_the_note(payload: bytes) -> None:
    found = results._Found()
    results._add_metrics_file(
        found, "/run/b/artifacts/rollouts_aggregate_metrics.json", base64.b64encode(payload).decode()
    )
    if payload in (b"[1, 2]",):
        # Readable, but a list holds no aggregates (facts.benchmark_metrics): the numbers of a
        # list were once metrics named by their index here, never in an export.
        assert found.unreadable_file is None and found.documents == [[1, 2]]
        assert facts.benchmark_metrics(found.documents).values == {}
        return
    assert found.unreadable_file is not None and found.files == []
    assert found.unreadable_file.startswith("/run/b/artifacts/rollouts_aggregate_metrics.json: ")
    assert "\n" not in found.unreadable_file and len(found.unreadable_file) < 300


def test_hostile_rollouts_and_metrics_read_where_they_lie_are_one_line_each(tmp_path, capsys) -> None:
    run_dir = copy_of_the_real_run(tmp_path / "run")
    text = rollouts_file(run_dir).read_text().splitlines()
    text[4] = "[" * 200_000
    rollouts_file(run_dir).write_text("\n".join(text) + "\n")
    (run_dir / BENCH / "artifacts" / "rollouts_aggregate_metrics.json").write_text("[" * 200_000)
    code, out, err = cli(capsys, "results", str(run_dir))
    assert code == 1 and err == "" and "Traceback" not in out
    assert "1 unreadable row(s) (line 5)" in out
    assert (
        "unreadable metrics file " in out
        and "rollouts_aggregate_metrics.json: JSON nested deeper than 64 levels" in out
    )


def test_a_metrics_file_over_the_bound_is_named_and_never_sent(tmp_path, capsys, monkeypatch) -> None:
    from nemo_gym.orchestration import untrusted

    run_dir = copy_of_the_real_run(tmp_path / "run")
    monkeypatch.setattr(untrusted, "MAX_DOCUMENT_BYTES", 100)  # the real metrics file is a few hundred bytes
    [result] = library.results([run_in_directory(str(run_dir))])[0].benchmarks
    metrics = run_dir / BENCH / "artifacts" / "rollouts_aggregate_metrics.json"
    assert result.complete is False and result.metrics == {}
    assert result.completeness_reason == f"unreadable metrics file {metrics}: larger than 100 bytes"


def test_many_runs_are_projected_in_batches_far_below_the_argument_limits() -> None:
    from nemo_gym.orchestration.results import BATCH_ARGUMENT_BYTES, BATCH_RUNS, _batches

    def run(i: int, path_length: int = 60) -> tuple[str, dict]:
        path = "/" + "p" * path_length
        return str(i), {"jobs": [], "files": [("math", path, path), ("code", path, path)]}

    assert [len(b) for b in _batches([run(i) for i in range(450)])] == [BATCH_RUNS, BATCH_RUNS, 50]
    long = _batches([run(i, 4000) for i in range(100)])
    assert len(long) > 1 and all(
        sum(len(w) + 1 for _, r in batch for f in r["files"] for w in f) <= BATCH_ARGUMENT_BYTES for batch in long
    )
    assert [r for batch in long for r, _ in batch] == [str(i) for i in range(100)]  # in order, none split
