"""gym eval watch over the fake connection and fake Slurm (the real scripts, run by bash): each ready
checkpoint becomes one run of one growing sweep, its state kept in the sweep's record, a watcher
started again goes on where it was, and --max-pending holds."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from nemo_gym.orchestration import contract
from nemo_gym.orchestration.library import WatchSettings, select, watch_checkpoints
from nemo_gym.orchestration.record import all_sweeps, indexed_run, load_sweep_record
from nemo_gym.orchestration.watch_state import CheckpointPhase

HOST = "login.fake"


@pytest.fixture
def config_file(base, tmp_path: Path) -> Path:
    base["compute"]["cluster"]["hostname"] = HOST
    base["job"]["output_path"] = str(tmp_path / "runs")
    base["driver"]["policy_model"] = "policy"
    path = tmp_path / "eval.yaml"
    path.write_text(yaml.safe_dump(base, sort_keys=False))
    return path


@pytest.fixture
def checkpoints(tmp_path: Path) -> Path:
    root = tmp_path / "training"
    root.mkdir()
    return root


def checkpoint(root: Path, name: str, ready: bool = True) -> Path:
    path = root / name
    path.mkdir()
    (path / "model.safetensors").write_text("weights")
    if ready:
        (path / "DONE").write_text("")
    return path


def settings(config_file: Path, root: Path, **changes) -> WatchSettings:
    return WatchSettings(
        config=str(config_file), overrides=(), directory=str(root), **{"ready_file": "DONE", **changes}
    )


def look(conn, config_file, root, events=None, **changes):
    return watch_checkpoints(
        settings(config_file, root, **changes),
        once=True,
        on_event=events.append if events is not None else (lambda event: None),
        connect=conn.connect,
    )


def finish(record, cluster, phase: str = "succeeded") -> None:
    for job in record.units:
        state = Path(job.job_dir) / contract.state_dir(job.job_id)
        state.mkdir(parents=True, exist_ok=True)
        (state / contract.STATE_FILE).write_text(f"phase={phase}\ndetail=driver finished\nattempt=0\n")
        cluster.set_state(job.job_id, "COMPLETED" if phase == "succeeded" else "FAILED")


def test_each_ready_checkpoint_is_one_run_of_one_sweep_in_step_order(config_file, checkpoints, conn, cluster) -> None:
    checkpoint(checkpoints, "step_2000")
    checkpoint(checkpoints, "step_1000")
    checkpoint(checkpoints, "step_3000", ready=False)
    events: list = []
    sweep = look(conn, config_file, checkpoints, events)
    assert [(c.step, c.phase) for c in sweep.watch.checkpoints] == [
        (1000, CheckpointPhase.QUEUED),
        (2000, CheckpointPhase.QUEUED),
        (3000, CheckpointPhase.WAITING),
    ]
    records = [indexed_run(r.run_id) for r in sweep.runs]
    assert [r.sweep_values for r in records] == [
        {"services.policy.model": str(checkpoints / f"step_{n}")} for n in (1000, 2000)
    ]
    assert [e.line().split(":")[0] for e in events if "submitted" in e.text] == [
        f"step 1000 ({checkpoints / 'step_1000'})",
        f"step 2000 ({checkpoints / 'step_2000'})",
    ]
    # The training step goes with each run, for its exports.
    for record, step in zip(records, (1000, 2000)):
        spec = (Path(record.run_dir) / "resolved-config.yaml").read_text()
        assert f"training_step: {step}" in spec
    # The sweep is gym eval's like any other: status, results and the rest name it.
    assert [r.gym_job_id for r in select([sweep.sweep_id]).records] == [r.run_id for r in sweep.runs]
    assert load_sweep_record((Path(records[0].run_dir) / contract.SWEEP_RECORD_FILE).read_text()).sweep_id == (
        sweep.sweep_id
    )
    assert len(cluster.calls("sbatch")) == 2


def test_a_watcher_started_again_goes_on_where_it_was_and_submits_nothing_twice(
    config_file, checkpoints, conn, cluster
) -> None:
    checkpoint(checkpoints, "step_100")
    first = look(conn, config_file, checkpoints)
    again = look(conn, config_file, checkpoints)
    assert again.sweep_id == first.sweep_id and len(all_sweeps()) == 1
    assert len(cluster.calls("sbatch")) == 1
    finish(indexed_run(first.runs[0].run_id), cluster)
    checkpoint(checkpoints, "step_200")
    events: list = []
    later = look(conn, config_file, checkpoints, events)
    assert [(c.step, c.phase) for c in later.watch.checkpoints] == [
        (100, CheckpointPhase.DONE),
        (200, CheckpointPhase.QUEUED),
    ]
    assert len(cluster.calls("sbatch")) == 2 and [r.run_id for r in later.runs][0] == first.runs[0].run_id


def test_never_more_than_max_pending_of_its_runs_queued_or_running(config_file, checkpoints, conn, cluster) -> None:
    for step in (1, 2, 3):
        checkpoint(checkpoints, f"iter-{step}")
    sweep = look(conn, config_file, checkpoints, max_pending=2)
    assert [c.phase for c in sweep.watch.checkpoints] == [
        CheckpointPhase.QUEUED,
        CheckpointPhase.QUEUED,
        CheckpointPhase.WAITING,
    ]
    finish(indexed_run(sweep.runs[0].run_id), cluster)
    sweep = look(conn, config_file, checkpoints, max_pending=2)
    assert [c.phase for c in sweep.watch.checkpoints] == [
        CheckpointPhase.DONE,
        CheckpointPhase.QUEUED,
        CheckpointPhase.QUEUED,
    ]


def test_a_checkpoint_gone_before_its_turn_is_skipped_and_said(config_file, checkpoints, conn, cluster) -> None:
    waiting = checkpoint(checkpoints, "step_5", ready=False)
    look(conn, config_file, checkpoints)
    (waiting / "model.safetensors").unlink()
    waiting.rmdir()
    events: list = []
    sweep = look(conn, config_file, checkpoints, events)
    [cp] = sweep.watch.checkpoints
    assert (cp.phase, cp.detail) == (CheckpointPhase.SKIPPED, "deleted before its turn")
    assert [e.text for e in events] == ["skipped: deleted before its turn"]
    assert not cluster.calls("sbatch")


def test_a_failure_a_rerun_would_repeat_is_recorded_failed_and_never_resubmitted(
    config_file, checkpoints, conn, cluster
) -> None:
    checkpoint(checkpoints, "step_7")
    sweep = look(conn, config_file, checkpoints)
    record = indexed_run(sweep.runs[0].run_id)
    for job in record.units:
        state = Path(job.job_dir) / contract.state_dir(job.job_id)
        state.mkdir(parents=True, exist_ok=True)
        (state / contract.STATE_FILE).write_text("phase=failed\ndetail=driver failed with exit status 1\nattempt=0\n")
        (state / contract.CAUSE_FILE).write_text("driver-failed\n")
        cluster.set_state(job.job_id, "FAILED")
    sweep = look(conn, config_file, checkpoints)
    [cp] = sweep.watch.checkpoints
    assert (cp.phase, cp.retry, cp.attempts) == (CheckpointPhase.FAILED, False, 1)
    assert len(cluster.calls("sbatch")) == 1


def test_a_directory_that_is_not_there_is_refused_in_one_line(config_file, tmp_path, conn) -> None:
    from nemo_gym.orchestration.errors import UserError

    with pytest.raises(UserError, match="is no directory"):
        look(conn, config_file, tmp_path / "nowhere")


@pytest.mark.parametrize("ready", ["../../../etc/passwd", "/etc/passwd", "a/../../b", "", "x\x1b"])
def test_a_ready_file_outside_the_checkpoint_is_refused_before_any_look(config_file, checkpoints, conn, ready) -> None:
    """Else a file elsewhere that exists would make every checkpoint ready at once."""
    from nemo_gym.orchestration.errors import UserError

    checkpoint(checkpoints, "step_1000", ready=False)
    with pytest.raises(UserError, match="is not a file inside a checkpoint"):
        look(conn, config_file, checkpoints, ready_file=ready)


def test_a_key_the_config_lacks_is_refused_before_any_look(config_file, checkpoints, conn) -> None:
    """Else every checkpoint fails to submit, and --once exits 0 having evaluated nothing."""
    from nemo_gym.orchestration.errors import UserError

    checkpoint(checkpoints, "step_1000")
    with pytest.raises(UserError, match="--key services.nothere.model: the config cannot take"):
        look(conn, config_file, checkpoints, key="services.nothere.model")
    assert not all_sweeps()


@pytest.mark.parametrize(
    ("flag", "value"), [("--settle", "nan"), ("--every", "inf"), ("--every", "0"), ("--max-attempts", "0")]
)
def test_values_that_would_silently_disable_the_watch_are_usage_errors(
    config_file, checkpoints, capsys, flag, value
) -> None:
    from nemo_gym.orchestration.cli.main import main

    with pytest.raises(SystemExit) as exited:
        main(["eval", "watch", str(checkpoints), "-c", str(config_file), "--once", flag, value])
    assert exited.value.code == 2 and f"argument {flag}" in capsys.readouterr().err


def test_a_look_over_many_seen_checkpoints_writes_the_record_once(config_file, checkpoints, conn, monkeypatch) -> None:
    """A look costs per new checkpoint, not per seen one: 5,000 step directories once took 41 s of
    CPU a look, the whole record rewritten for each."""
    from nemo_gym.orchestration.verbs.watch import use_case as watching

    for step in range(300):
        checkpoint(checkpoints, f"step_{step}", ready=False)
    writes = []
    real = watching.write_sweep_index
    monkeypatch.setattr(watching, "write_sweep_index", lambda sweep: writes.append(1) or real(sweep))
    sweep = look(conn, config_file, checkpoints)
    assert len(sweep.watch.checkpoints) == 300 and all(
        c.phase == CheckpointPhase.WAITING for c in sweep.watch.checkpoints
    )
    assert len(writes) <= 2  # the new sweep, then the look's one write
    assert len(all_sweeps()[0].watch.checkpoints) == 300  # and written


def test_a_finished_checkpoint_is_written_into_the_results_store_by_the_watcher(
    config_file, checkpoints, conn, cluster, tmp_path, monkeypatch
) -> None:
    """The watcher reads its runs' status as ``gym eval status`` does, and so feeds the history:
    once a checkpoint's run ended, its results are in the store, under its model and step."""
    from nemo_gym.orchestration.store import open_store

    url = f"sqlite:///{tmp_path / 'results.sqlite'}"
    monkeypatch.setenv("GYM_RESULTS_URL", url)
    checkpoint(checkpoints, "step_1000")
    sweep = look(conn, config_file, checkpoints)
    record = indexed_run(sweep.runs[0].run_id)
    real = Path(__file__).resolve().parents[1] / "data" / "quickstart-run" / "answer-judge" / "artifacts"
    for job in record.units:
        (Path(job.job_dir) / contract.ARTIFACTS_DIR).mkdir(parents=True, exist_ok=True)
        for name in ("rollouts.jsonl", "rollouts_materialized_inputs.jsonl", "rollouts_aggregate_metrics.json"):
            (Path(job.job_dir) / contract.ARTIFACTS_DIR / name).write_text((real / name).read_text())
    finish(record, cluster)
    look(conn, config_file, checkpoints)
    store = open_store(url)
    [entry] = store.entries()
    store.close()
    assert (entry.run_id, entry.benchmark, entry.model, entry.step) == (
        record.gym_job_id,
        "answer-judge",
        str(checkpoints / "step_1000"),
        1000,
    )
    assert (entry.samples, entry.expected_samples, entry.complete) == (12, 12, True)
