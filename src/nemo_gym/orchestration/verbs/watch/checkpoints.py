"""Watching a training run's checkpoints (``gym eval watch``): which directories are checkpoints,
which are ready, each checkpoint's state across its attempts, and what the watcher does next.

The decisions are pure functions over what a scan of the directory found (``Found``) and what a
status probe said of each checkpoint's run (``RunView``): ``next_steps`` returns the actions, which
the library's ``watch`` carries out and records. The state lives in the watch's sweep record
(``WatchState``), written after every change, so a watcher stopped at any point and started again
picks up where it was and never submits a checkpoint twice.
"""

from __future__ import annotations

import fnmatch
import os
from dataclasses import dataclass

from nemo_gym.orchestration.watch_state import Checkpoint, CheckpointPhase, WatchState, step_of

# How much of a checkpoint directory the settle rule looks at (a checkpoint is a few dozen files;
# a bound keeps a scan cheap whatever lies there).
SETTLE_FILES = 10_000


@dataclass(frozen=True)
class Found:
    """A checkpoint directory a scan found."""

    path: str
    step: int
    ready: bool


@dataclass(frozen=True)
class RunView:
    """What a probe says of a checkpoint's run."""

    final: bool
    succeeded: bool
    running: bool
    detail: str
    retry: bool = False  # gym eval resubmit's plan would queue something again (an infrastructure cause)


@dataclass(frozen=True)
class Submit:
    checkpoint: Checkpoint


@dataclass(frozen=True)
class Resubmit:
    checkpoint: Checkpoint


@dataclass(frozen=True)
class Update:
    """A checkpoint's new phase (and why), to record and say."""

    checkpoint: Checkpoint
    phase: CheckpointPhase
    detail: str
    retry: bool = False


Action = Submit | Resubmit | Update


def next_steps(state: WatchState, found: list[Found], runs: dict[str, RunView], known_runs: set[str]) -> list[Action]:
    """What to do now: each pending checkpoint's run as the probe found it (``runs``; a run the
    probe could not tell keeps its phase), a new checkpoint seen, one gone before its turn skipped,
    a failed one resubmitted (oldest first) while resubmit would retry it and its attempts allow,
    then the ready waiting ones submitted in step order, while a slot is free. ``known_runs``: the runs the index
    has a record of (a checkpoint left submitting is queued if its run is among them)."""
    actions: list[Action] = []
    phases = {c.path: c.phase for c in state.checkpoints}
    retry = {c.path: c.retry for c in state.checkpoints}
    for checkpoint in state.checkpoints:
        update = _observed(checkpoint, runs.get(checkpoint.run_id or ""), known_runs)
        if update is not None:
            actions.append(update)
            phases[checkpoint.path], retry[checkpoint.path] = update.phase, update.retry
    here = {f.path: f for f in found}
    for checkpoint in state.checkpoints:
        if phases[checkpoint.path] == CheckpointPhase.WAITING and checkpoint.path not in here:
            actions.append(Update(checkpoint, CheckpointPhase.SKIPPED, "deleted before its turn"))
            phases[checkpoint.path] = CheckpointPhase.SKIPPED
    seen = {c.path for c in state.checkpoints}
    new = [Checkpoint(path=f.path, step=f.step) for f in sorted(found, key=lambda f: (f.step, f.path))]
    actions += [Update(c, CheckpointPhase.WAITING, "seen") for c in new if c.path not in seen]
    slots = _free_slots(state.max_pending, phases)
    for checkpoint in state.checkpoints:
        failed = phases[checkpoint.path] == CheckpointPhase.FAILED and retry[checkpoint.path]
        if slots > 0 and failed and checkpoint.attempts < state.max_attempts:
            actions.append(Resubmit(checkpoint))
            slots -= 1
    candidates = [c for c in state.checkpoints if phases[c.path] == CheckpointPhase.WAITING] + [
        c for c in new if c.path not in seen
    ]
    for checkpoint in sorted(candidates, key=lambda c: (c.step, c.path)):
        if slots > 0 and here.get(checkpoint.path, Found("", 0, False)).ready:
            actions.append(Submit(checkpoint))
            slots -= 1
    return actions


def _observed(checkpoint: Checkpoint, view: RunView | None, known_runs: set[str]) -> Update | None:
    """A pending checkpoint's new phase from its run's view, when it changed."""
    if checkpoint.phase == CheckpointPhase.SUBMITTING:
        if checkpoint.run_id in known_runs:
            return Update(checkpoint, CheckpointPhase.QUEUED, "submitted (recorded before the watcher stopped)")
        return Update(
            checkpoint,
            CheckpointPhase.UNKNOWN,
            f"the watcher stopped while submitting run {checkpoint.run_id}, which has no record here: it may be "
            f"queued; not submitted again (see its directory, or gym eval status {checkpoint.run_id})",
        )
    if not checkpoint.phase.pending or view is None:
        return None
    if not view.final:
        phase = CheckpointPhase.RUNNING if view.running else CheckpointPhase.QUEUED
        return Update(checkpoint, phase, view.detail) if phase != checkpoint.phase else None
    if view.succeeded:
        return Update(checkpoint, CheckpointPhase.DONE, view.detail)
    return Update(checkpoint, CheckpointPhase.FAILED, view.detail, retry=view.retry)


def _free_slots(max_pending: int | None, phases: dict[str, CheckpointPhase]) -> int:
    if max_pending is None:
        return len(phases) + 1_000_000
    return max(0, max_pending - sum(1 for phase in phases.values() if phase.pending))


# -- the scan (thin I/O) ---------------------------------------------------------------------------


def scan(directory: str, pattern: str, ready_file: str | None, settle_seconds: float, now: float) -> list[Found]:
    """The checkpoint directories right under ``directory`` whose name matches ``pattern`` and says a
    step; each ready once ``ready_file`` is in it, or (without one) once nothing in it has changed
    for ``settle_seconds``."""
    found = []
    try:
        entries = sorted(os.scandir(directory), key=lambda e: e.name)
    except OSError:
        return []
    for entry in entries:
        if not fnmatch.fnmatchcase(entry.name, pattern) or not entry.is_dir(follow_symlinks=True):
            continue
        step = step_of(entry.name)
        if step is None:
            continue
        if ready_file:
            ready = os.path.exists(os.path.join(entry.path, ready_file))
        else:
            newest = last_change(entry.path)
            ready = newest is not None and now - newest >= settle_seconds
        found.append(Found(os.path.abspath(entry.path), step, ready))
    return found


def last_change(path: str, limit: int = SETTLE_FILES) -> float | None:
    """The newest modification time of ``path`` and what is in it (the first ``limit`` entries)."""
    try:
        newest = os.stat(path).st_mtime
    except OSError:
        return None
    seen = 0
    for root, dirs, files in os.walk(path):
        for name in dirs + files:
            seen += 1
            if seen > limit:
                return newest
            try:
                newest = max(newest, os.stat(os.path.join(root, name), follow_symlinks=False).st_mtime)
            except OSError:
                continue
    return newest
