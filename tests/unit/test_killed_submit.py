"""A gym eval submit killed after its jobs were queued but before its runs were recorded (the
terminal closed, SIGKILL): the next submit of the same config records what that one queued and
queues nothing again (journal.py, verbs/submit/use_case.py), over the fake connection and the fake
Slurm. The kill is staged by stopping the submit where a kill would (a BaseException out of the
recording, which no handler of ours catches), its process then gone (a pid that has ended)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from test_site_limits import config_file, three_checkpoints

from nemo_gym.orchestration import contract, journal, library, submission
from nemo_gym.orchestration.errors import UserError
from nemo_gym.orchestration.record import all_records
from nemo_gym.orchestration.verbs.submit import use_case as submitting


class Killed(BaseException):
    """What SIGKILL leaves a process: nothing after this point runs."""


def ended_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def killed_while_recording(prepared, conn, monkeypatch, pid: int | None = None) -> None:
    def kill(*args, **kwargs):
        raise Killed

    with monkeypatch.context() as patch:
        patch.setattr(submitting, "_write_records", kill)
        with pytest.raises(Killed):
            library.submit(prepared, connect=conn.connect)
    [left] = journal.pending()
    document = json.loads(left.path.read_text())
    left.path.write_text(json.dumps({**document, "pid": pid or ended_pid()}))


def test_the_next_submit_of_the_same_sweep_records_what_the_killed_one_queued_and_queues_nothing(
    base, tmp_path, write_config, conn, cluster, monkeypatch
) -> None:
    path = config_file(base, tmp_path, write_config, "a", "b")
    first = three_checkpoints(path)
    killed_while_recording(first, conn, monkeypatch)
    assert len(cluster.calls("sbatch")) == 6 and not all_records()
    again = library.submit(three_checkpoints(path), connect=conn.connect)
    assert len(cluster.calls("sbatch")) == 6  # nothing queued twice
    assert again.sweep is not None and again.sweep.sweep_id == first.sweep_id
    assert [r.gym_job_id for r in again.records] == [run.plan.run_id for run in first.runs]
    assert [b.job_id for r in again.records for b in r.benchmarks] == ["100", "101", "102", "103", "104", "105"]
    assert again.interrupted is None and again.adopted is not None and "queueing 6 of 6 job(s)" in again.adopted
    assert "nothing was queued again" in again.adopted
    assert sorted(r.gym_job_id for r in all_records()) == sorted(r.gym_job_id for r in again.records)
    assert journal.pending() == []
    # Recorded now: a third submit of it is a new sweep, as any repeat of a finished submission is.
    third = library.submit(three_checkpoints(path), connect=conn.connect)
    assert third.adopted is None and third.sweep.sweep_id != first.sweep_id
    assert len(cluster.calls("sbatch")) == 12


def test_another_config_or_a_submission_that_queued_nothing_is_a_new_submission(
    base, tmp_path, write_config, conn, cluster, monkeypatch
) -> None:
    path = config_file(base, tmp_path, write_config, "a", "b")
    killed_while_recording(three_checkpoints(path), conn, monkeypatch)
    other = library.prepare(library.compose(path, ["services.policy.model=/ckpt/z,/ckpt/y,/ckpt/x"], multirun=True))
    fresh = library.submit(other, connect=conn.connect)
    assert fresh.adopted is None and len(cluster.calls("sbatch")) == 12
    assert len(journal.pending()) == 1  # the killed one's, still to be found by its own config

    def refuse(*args, **kwargs):
        raise Killed

    lone = library.prepare(library.compose(path, ["services.policy.model=/ckpt/q"]))
    with monkeypatch.context() as patch:
        patch.setattr(submission, "stage_and_submit", refuse)  # killed before anything was staged (read when called)
        with pytest.raises(Killed):
            library.submit(lone, connect=conn.connect)
    pending = next(j for j in journal.pending() if j.sweep_id is None)
    pending.path.write_text(json.dumps({**json.loads(pending.path.read_text()), "pid": ended_pid()}))
    again = library.submit(
        library.prepare(library.compose(path, ["services.policy.model=/ckpt/q"])), connect=conn.connect
    )
    assert again.adopted is None and len(cluster.calls("sbatch")) == 14
    assert again.records[0].gym_job_id != lone.runs[0].plan.run_id


def test_a_submit_of_the_same_config_still_running_is_refused_naming_it(
    base, tmp_path, write_config, conn, cluster, monkeypatch
) -> None:
    path = config_file(base, tmp_path, write_config, "a", "b")
    killed_while_recording(three_checkpoints(path), conn, monkeypatch, pid=os.getpid())
    with pytest.raises(UserError) as refused:
        library.submit(three_checkpoints(path), connect=conn.connect)
    [line] = refused.value.problems
    assert line.startswith(f"another gym eval submit of this config is under way (pid {os.getpid()}, since ")
    assert line.endswith("nothing was submitted") and len(cluster.calls("sbatch")) == 6


@pytest.mark.parametrize(
    "document",
    [
        "not json",
        json.dumps([1, 2]),
        json.dumps({"name": "../../x", "digest": "d", "origin": "o", "pid": 1, "started": "s", "run_ids": ["../x"]}),
        json.dumps({"name": "gym-job-20260101T000000Z-000000", "digest": "d", "origin": "o", "pid": -1,
                    "started": "s", "run_ids": ["gym-job-20260101T000000Z-000000"]}),
    ],
)  # fmt: skip
def test_a_journal_read_back_that_is_not_one_is_passed_over(tmp_path, monkeypatch, document: str) -> None:
    folder = tmp_path / "cache" / "nemo-gym" / "jobs" / journal.JOURNAL_DIR
    folder.mkdir(parents=True)
    (folder / "gym-job-20260101T000000Z-000000.pending.json").write_text(document)
    assert journal.pending() == []


def test_a_killed_submit_that_queued_only_some_jobs_records_those_and_names_the_rest(
    base, tmp_path, write_config, conn, cluster, monkeypatch
) -> None:
    """What its run directories say was queued is all that counts: a run whose submitted log has no
    answer (the script stopped before its sbatch) is recorded as not queued, named, never queued
    by this submit behind the user's back."""
    path = config_file(base, tmp_path, write_config, "a", "b")
    first = three_checkpoints(path)
    killed_while_recording(first, conn, monkeypatch)
    (Path(first.runs[2].plan.run_dir) / contract.SUBMITTED_LOG).unlink()
    again = library.submit(three_checkpoints(path), connect=conn.connect)
    assert len(cluster.calls("sbatch")) == 6 and again.adopted is None
    assert [bool(b.job_id) for r in again.records for b in r.benchmarks] == [True] * 4 + [False] * 2
    last = first.runs[2].plan.run_id
    assert again.interrupted is not None and "queueing 4 of 6 job(s)" in again.interrupted
    assert f"not queued: {last}/a, {last}/b (cancel it with gym eval cancel {first.sweep_id}" in again.interrupted
