"""gym eval watch's rules (verbs/watch/checkpoints.py): a checkpoint's step, readiness, and what the watcher does
next from what a scan and a probe found — row by row, as resume.py's and verbs/resubmit/recovery.py's rules are."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from nemo_gym.orchestration.verbs.watch.checkpoints import (
    Found,
    Resubmit,
    RunView,
    Submit,
    Update,
    last_change,
    next_steps,
    scan,
)
from nemo_gym.orchestration.watch_state import Checkpoint, CheckpointPhase, WatchState, step_of


@pytest.mark.parametrize(
    ("name", "step"),
    [
        ("step_1000", 1000),
        ("iter-500", 500),
        ("checkpoint-2000", 2000),
        ("global_step100", 100),
        ("ckpt.300", 300),
        ("epoch3-step00120", 120),
        ("run2-0450", 450),
        ("latest", None),
    ],
)
def test_the_step_is_the_named_one_else_the_last_number(name: str, step: int | None) -> None:
    assert step_of(name) == step


def state(*checkpoints: Checkpoint, max_pending: int | None = None, max_attempts: int = 3) -> WatchState:
    return WatchState(
        directory="/ckpts",
        key="services.policy.model",
        config="/c.yaml",
        max_pending=max_pending,
        max_attempts=max_attempts,
        checkpoints=list(checkpoints),
    )


def ckpt(step: int, phase: CheckpointPhase = CheckpointPhase.WAITING, **kw) -> Checkpoint:
    return Checkpoint(path=f"/ckpts/step_{step}", step=step, phase=phase, **kw)


def found(step: int, ready: bool = True) -> Found:
    return Found(f"/ckpts/step_{step}", step, ready)


def kinds(actions) -> list[tuple[str, int, str]]:
    return [(type(a).__name__, a.checkpoint.step, str(a.phase) if isinstance(a, Update) else "") for a in actions]


def test_new_checkpoints_are_seen_and_the_ready_ones_submitted_in_step_order() -> None:
    actions = next_steps(state(), [found(3000), found(1000), found(2000, ready=False)], {}, set())
    assert kinds(actions) == [
        ("Update", 1000, "waiting"),
        ("Update", 2000, "waiting"),
        ("Update", 3000, "waiting"),
        ("Submit", 1000, ""),
        ("Submit", 3000, ""),
    ]


def test_never_more_pending_than_max_pending() -> None:
    running = ckpt(1000, CheckpointPhase.RUNNING, run_id="r1", attempts=1)
    actions = next_steps(
        state(running, ckpt(2000), ckpt(3000), max_pending=2),
        [found(1000), found(2000), found(3000)],
        {"r1": RunView(False, False, True, "driver")},
        {"r1"},
    )
    assert kinds(actions) == [("Submit", 2000, "")]


def test_a_run_that_ended_frees_its_slot_in_the_same_look() -> None:
    actions = next_steps(
        state(ckpt(1000, CheckpointPhase.RUNNING, run_id="r1", attempts=1), ckpt(2000), max_pending=1),
        [found(1000), found(2000)],
        {"r1": RunView(True, True, False, "succeeded")},
        {"r1"},
    )
    assert kinds(actions) == [("Update", 1000, "done"), ("Submit", 2000, "")]


def test_an_infrastructure_failure_is_resubmitted_up_to_the_budget_then_stays_failed() -> None:
    failing = RunView(True, False, False, "service policy died", retry=True)
    first = ckpt(1000, CheckpointPhase.RUNNING, run_id="r1", attempts=1)
    assert kinds(next_steps(state(first), [found(1000)], {"r1": failing}, {"r1"})) == [
        ("Update", 1000, "failed"),
        ("Resubmit", 1000, ""),
    ]
    last = ckpt(1000, CheckpointPhase.RUNNING, run_id="r1", attempts=3)
    assert kinds(next_steps(state(last), [found(1000)], {"r1": failing}, {"r1"})) == [("Update", 1000, "failed")]


def test_a_failure_a_rerun_would_repeat_is_never_resubmitted() -> None:
    repeats = RunView(True, False, False, "driver failed with exit status 1", retry=False)
    actions = next_steps(
        state(ckpt(1000, CheckpointPhase.QUEUED, run_id="r1", attempts=1)), [found(1000)], {"r1": repeats}, set()
    )
    assert kinds(actions) == [("Update", 1000, "failed")]


def test_a_retry_waits_for_a_slot_and_is_not_forgotten() -> None:
    """A failed checkpoint to retry, with no slot free now, is resubmitted at a later look."""
    failed = ckpt(1000, CheckpointPhase.FAILED, run_id="r1", attempts=1, retry=True)
    busy = ckpt(2000, CheckpointPhase.RUNNING, run_id="r2", attempts=1)
    view = {"r2": RunView(False, False, True, "driver")}
    assert next_steps(state(failed, busy, max_pending=1), [found(1000), found(2000)], view, {"r1", "r2"}) == []
    view = {"r2": RunView(True, True, False, "succeeded")}
    actions = next_steps(state(failed, busy, max_pending=1), [found(1000), found(2000)], view, {"r1", "r2"})
    assert kinds(actions) == [("Update", 2000, "done"), ("Resubmit", 1000, "")]


def test_a_checkpoint_deleted_before_its_turn_is_skipped_and_one_that_ran_is_kept() -> None:
    actions = next_steps(state(ckpt(1000), ckpt(2000, CheckpointPhase.DONE, run_id="r2", attempts=1)), [], {}, {"r2"})
    assert kinds(actions) == [("Update", 1000, "skipped")]
    assert actions[0].detail == "deleted before its turn"


def test_a_watcher_stopped_mid_submit_never_submits_that_checkpoint_again() -> None:
    recorded = ckpt(1000, CheckpointPhase.SUBMITTING, run_id="r1", attempts=1)
    assert kinds(next_steps(state(recorded), [found(1000)], {}, {"r1"})) == [("Update", 1000, "queued")]
    lost = ckpt(1000, CheckpointPhase.SUBMITTING, run_id="r1", attempts=1)
    actions = next_steps(state(lost), [found(1000)], {}, set())
    assert kinds(actions) == [("Update", 1000, "unknown")]
    assert "not submitted again" in actions[0].detail


def test_a_run_the_probe_could_not_tell_keeps_its_phase() -> None:
    assert (
        next_steps(state(ckpt(1000, CheckpointPhase.QUEUED, run_id="r1", attempts=1)), [found(1000)], {}, {"r1"}) == []
    )


def test_ready_by_marker_or_after_settling(tmp_path: Path) -> None:
    marked, settling = tmp_path / "step_100", tmp_path / "step_200"
    for d in (marked, settling):
        d.mkdir()
        (d / "weights.bin").write_text("x")
    (tmp_path / "notes").mkdir()  # no step in its name: no checkpoint
    now = time.time()
    assert [f.step for f in scan(str(tmp_path), "*", None, 60, now)] == [100, 200]
    assert not any(f.ready for f in scan(str(tmp_path), "*", None, 60, now))
    old = now - 120
    for d in (marked, settling):
        for p in (d / "weights.bin", d):
            os.utime(p, (old, old))
    assert all(f.ready for f in scan(str(tmp_path), "*", None, 60, now))
    (marked / "DONE").write_text("")
    assert [(f.step, f.ready) for f in scan(str(tmp_path), "step_*", "DONE", 60, now)] == [(100, True), (200, False)]
    assert scan(str(tmp_path / "missing"), "*", None, 60, now) == []
    assert last_change(str(marked)) >= now - 5  # the marker just written


def test_the_state_reads_back_bounded() -> None:
    cp = Checkpoint(path="/x", step=1, detail="a\nb\x1b[31m" + "y" * 2000)
    assert "\n" not in cp.detail and "\x1b" not in cp.detail and len(cp.detail) == 500


def test_submits_and_resubmits_are_their_own_kinds() -> None:
    assert isinstance(next_steps(state(), [found(1)], {}, set())[-1], Submit)
    failed = ckpt(1, CheckpointPhase.FAILED, run_id="r", attempts=1, retry=True)
    assert isinstance(next_steps(state(failed), [found(1)], {}, set())[-1], Resubmit)
