"""A sharded benchmark's node side (shards.py): each shard's slice of the prepared inputs, and which
shard merges; and how status folds a sharded benchmark's shards into one."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nemo_gym.orchestration import contract, shards
from nemo_gym.orchestration.contract import Status
from nemo_gym.orchestration.observe import SampleCheck, fold_shard_states, shard_ids_label, sum_checks

SHARDS_PY = Path(shards.__file__)
KEY = shards.TASK_INDEX_KEY


def line(row: dict) -> str:
    return json.dumps(row) + "\n"


def indices(lines) -> list[int]:
    return [json.loads(text)[KEY] for text in lines]


def test_a_shard_takes_every_nth_task_stamped_with_its_index_over_the_whole_file() -> None:
    rows = [line({"q": i}) for i in range(7)]
    assert [indices(shards.slice_lines(rows, k, 3)) for k in (1, 2, 3)] == [[0, 3, 6], [1, 4], [2, 5]]
    [first] = list(shards.slice_lines(rows, 2, 7))
    assert json.loads(first) == {"q": 1, KEY: 1}


def test_identical_rows_are_one_task_as_gym_numbers_them_and_stay_in_one_shard() -> None:
    """gym gives identical input lines one task index (its rollouts continue across them)."""
    rows = [line({"q": "a"}), line({"q": "b"}), line({"q": "a"}), line({"q": "c"})]
    assert [indices(shards.slice_lines(rows, k, 2)) for k in (1, 2)] == [[0, 0, 2], [1]]


def test_a_row_s_own_index_is_kept_and_numbers_only_the_rows_without_one() -> None:
    rows = [line({"q": "a", KEY: 40}), line({"q": "b"}), line({"q": "c"})]
    assert [indices(shards.slice_lines(rows, k, 2)) for k in (1, 2)] == [[40, 0], [1]]
    assert next(shards.slice_lines(rows, 1, 2)) == rows[0]  # kept as written


def test_limit_counts_the_first_lines_as_gym_does_and_zero_means_all() -> None:
    rows = [line({"q": i}) for i in range(10)]
    assert indices(shards.slice_lines(rows, 1, 2, limit=5)) == [0, 2, 4]
    assert indices(shards.slice_lines(rows, 1, 2, limit=0)) == [0, 2, 4, 6, 8]


def test_a_last_line_without_its_newline_gets_one() -> None:
    rows = [line({"q": 0}), json.dumps({"q": 1, KEY: 1})]
    assert list(shards.slice_lines(rows, 2, 2)) == [rows[1] + "\n"]


@pytest.mark.parametrize("bad", ["not json\n", "[1, 2]\n", "\n"])
def test_a_line_that_is_no_json_object_is_refused_naming_its_line(bad: str) -> None:
    with pytest.raises(shards.BadInput, match="line 2"):
        list(shards.slice_lines([line({"q": 0}), bad], 1, 2))


def test_a_shard_outside_its_count_is_refused() -> None:
    with pytest.raises(ValueError, match="not one of 1..3"):
        list(shards.slice_lines([], 4, 3))


row_value = st.one_of(st.integers(0, 3), st.text(max_size=3))


@given(
    rows=st.lists(st.fixed_dictionaries({"q": row_value}, optional={KEY: st.integers(0, 50)}).map(line), max_size=30),
    count=st.integers(1, 6),
    limit=st.one_of(st.none(), st.integers(0, 35)),
)
def test_the_shards_partition_the_rows_each_row_in_the_shard_its_index_names(rows, count, limit) -> None:
    whole = list(shards.slice_lines(rows, 1, 1, limit))
    parts = [list(shards.slice_lines(rows, k, count, limit)) for k in range(1, count + 1)]
    assert sorted(line for part in parts for line in part) == sorted(whole)
    for k, part in enumerate(parts, 1):
        assert all(index % count == k - 1 for index in indices(part))


def test_the_merge_is_due_once_every_shard_is_done_and_not_again_for_the_same_jobs() -> None:
    done = {1: "11 100", 2: "12 101"}
    assert not shards.merge_due(done, 3, None)
    done[3] = "13 102"
    assert shards.merge_due(done, 3, None)
    covered = shards.done_text(done, 3)
    assert not shards.merge_due(done, 3, covered)
    # A shard run again (resubmitted) finishes anew: the merge covers it again.
    assert shards.merge_due({**done, 2: "20 300"}, 3, covered)


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SHARDS_PY), *args], capture_output=True, text=True)


def test_the_node_side_from_slice_to_merge(tmp_path: Path) -> None:
    """As each shard's driver runs it: slice, finished, merge-due; gather and merged by the last."""
    bench = tmp_path / "bench"
    for k in (1, 2):
        prepared = Path(contract.shard_dir(str(bench), k)) / contract.PREPARED_DATA_DIR
        prepared.mkdir(parents=True)
        (prepared / "benchmark.jsonl").write_text("".join(line({"q": i}) for i in range(5)))
        sliced = run("slice", str(prepared), "benchmark", str(k), "2", "4")
        assert sliced.returncode == 0, sliced.stderr
        assert indices((prepared / "benchmark.jsonl").read_text().splitlines()) == [[0, 2], [1, 3]][k - 1]
        artifacts = Path(contract.shard_dir(str(bench), k)) / contract.ARTIFACTS_DIR
        (Path(contract.shard_dir(str(bench), k)) / contract.MATERIALIZED_INPUTS_FILE).write_text(f"m{k}\n")
        if k == 1:
            (artifacts / "rollouts_failures.jsonl").write_text("f1")  # no newline: one is added
    seen = tmp_path / "seen"
    assert run("merge-due", str(bench), "2", str(seen)).returncode == shards.EXIT_NOT_DUE
    assert run("finished", str(bench), "1", "100_0").returncode == 0
    assert run("merge-due", str(bench), "2", str(seen)).returncode == shards.EXIT_NOT_DUE
    assert run("finished", str(bench), "2", "100_1").returncode == 0
    assert run("merge-due", str(bench), "2", str(seen)).returncode == shards.EXIT_DUE
    assert run("gather", str(bench), "2").returncode == 0
    assert (bench / contract.MATERIALIZED_INPUTS_FILE).read_text() == "m1\nm2\n"
    assert (bench / contract.FAILURES_FILE).read_text() == "f1\n"
    # Shard 2 finishes again while the merge runs (resubmitted): the merge records what it saw, so
    # the next look finds shard 2's new rows not merged yet.
    assert run("starting", str(bench), "2").returncode == 0
    assert run("merge-due", str(bench), "2", str(tmp_path / "other")).returncode == shards.EXIT_NOT_DUE
    assert run("finished", str(bench), "2", "200").returncode == 0
    assert run("merged", str(bench), str(seen)).returncode == 0
    assert run("merge-due", str(bench), "2", str(seen)).returncode == shards.EXIT_DUE
    assert run("merged", str(bench), str(seen)).returncode == 0
    assert run("merge-due", str(bench), "2", str(seen)).returncode == shards.EXIT_NOT_DUE


def test_the_prepared_file_is_the_split_s_or_the_only_one(tmp_path: Path) -> None:
    (tmp_path / "benchmark.jsonl").write_text("")
    (tmp_path / "benchmark_metrics.json").write_text("{}")
    assert shards.prepared_file(str(tmp_path), "") == str(tmp_path / "benchmark.jsonl")
    (tmp_path / "train.jsonl").write_text("")
    with pytest.raises(ValueError, match="set the benchmark's run.split"):
        shards.prepared_file(str(tmp_path), "")
    assert shards.prepared_file(str(tmp_path), "train") == str(tmp_path / "train.jsonl")


def test_a_bad_call_prints_its_usage_and_exits_2(tmp_path) -> None:
    assert run("nonsense").returncode == shards.EXIT_USAGE
    assert "usage: shards.py" in run("finished", "only-one").stderr
    missing = run("merged", str(tmp_path), str(tmp_path / "never-written"))
    assert missing.returncode == shards.EXIT_USAGE and "merge-due writes them" in missing.stderr


# -- status: the shards folded into one benchmark ---------------------------------------------------


def test_a_sharded_benchmark_runs_while_any_shard_runs_and_says_how_far_it_is() -> None:
    state, detail = fold_shard_states(
        [(Status.SUCCEEDED, "x"), (Status.RUNNING, "driver"), (Status.QUEUED, "q")], False
    )
    assert state == Status.RUNNING and detail == "1 of 3 shards done, 2 running"
    state, detail = fold_shard_states([(Status.QUEUED, "q"), (Status.QUEUED, "q")], False)
    assert (state, detail) == (Status.QUEUED, "0 of 2 shards done, 2 queued")


def test_a_failed_shard_is_said_while_the_others_run_and_fails_the_benchmark_once_all_ended() -> None:
    shards_now = [(Status.FAILED, "driver failed with exit status 1"), (Status.RUNNING, "driver")]
    state, detail = fold_shard_states(shards_now, False)
    assert state == Status.RUNNING and "shard 1 failed: driver failed with exit status 1" in detail
    state, detail = fold_shard_states([(Status.CANCELLED, "c"), (Status.FAILED, "f"), (Status.SUCCEEDED, "s")], False)
    assert state == Status.FAILED and detail == "1 of 3 shards succeeded; shard 2 failed: f"


def test_every_shard_succeeded_is_success_only_once_they_were_merged() -> None:
    assert fold_shard_states([(Status.SUCCEEDED, "")] * 2, True) == (Status.SUCCEEDED, "2 shards finished and merged")
    state, detail = fold_shard_states([(Status.SUCCEEDED, "")] * 2, False)
    assert state == Status.FAILED and "none merged them" in detail


def test_cancelled_shards_cancel_the_benchmark() -> None:
    assert fold_shard_states([(Status.CANCELLED, "by you"), (Status.SUCCEEDED, "")], False)[0] == Status.CANCELLED


def test_shards_counts_add_up_and_their_ids_read_as_one_word() -> None:
    total = sum_checks([SampleCheck(4, 4, 0, 0, 0, ()), SampleCheck(4, 3, 1, 0, 1, ((5, 0),))])
    assert total == SampleCheck(8, 7, 1, 0, 1, ((5, 0),))
    assert shard_ids_label(["1200_0", "1200_1", "1200_2"]) == "1200_[0-2]"
    assert shard_ids_label(["1200_0", "1300", None]) == "1200_0,1300"
    assert shard_ids_label([None]) is None
