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
import math
import os
import re
from dataclasses import dataclass
from enum import Enum

from pydantic import BaseModel, ConfigDict, field_validator

# A step in a checkpoint's name: step_1000, iter-500, checkpoint-2000, global_step100, ckpt.300;
# else its last number (epoch3-00120 -> 120).
_NAMED_STEP = re.compile(r"(?:global[_-]?step|step|iteration|iter|checkpoint|ckpt)[_.-]?(\d+)", re.IGNORECASE)
_LAST_NUMBER = re.compile(r"(\d+)(?!.*\d)")
# How much of a checkpoint directory the settle rule looks at (a checkpoint is a few dozen files;
# a bound keeps a scan cheap whatever lies there).
SETTLE_FILES = 10_000


def step_of(name: str) -> int | None:
    """The training step a checkpoint directory's name says, or None."""
    named = _NAMED_STEP.findall(name)
    if named:
        return int(named[-1])
    last = _LAST_NUMBER.search(name)
    return int(last.group(1)) if last else None


class Phase(str, Enum):
    """A checkpoint's state in the watch."""

    WAITING = "waiting"  # seen, not submitted yet: not ready, or waiting for a free slot
    SUBMITTING = "submitting"  # its run is being submitted (a watcher stopped here leaves it unknown)
    QUEUED = "queued"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"
    SKIPPED = "skipped"  # gone before its turn
    UNKNOWN = "unknown"  # the watcher stopped while submitting it, and no record of its run is here

    def __str__(self) -> str:
        return str(self.value)

    @property
    def pending(self) -> bool:
        """Whether it holds one of the watch's slots (``--max-pending``)."""
        return self in (Phase.SUBMITTING, Phase.QUEUED, Phase.RUNNING)


class Checkpoint(BaseModel):
    model_config = ConfigDict(defer_build=True)  # built when a sweep's record is first read, as the record's
    path: str
    step: int
    phase: Phase = Phase.WAITING
    run_id: str | None = None
    attempts: int = 0  # how many times its run was queued (the first submit, each resubmit)
    detail: str = ""
    retry: bool = False  # failed in a way gym eval resubmit would queue again (an infrastructure cause)

    @field_validator("detail")
    @classmethod
    def _one_short_line(cls, value: str) -> str:
        # Read back from the index: one printable line, bounded.
        return "".join(ch if ch.isprintable() else " " for ch in value)[:500]


MAX_SETTLE_SECONDS = 7 * 24 * 3600.0  # a week unchanged is settled by any reading
CONFIG_KEY_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*(?:\.[A-Za-z_][A-Za-z0-9_-]*)*")


def ready_file_problem(name: str) -> str | None:
    """Why ``name`` cannot be the file whose presence makes a checkpoint ready: it must lie inside
    the checkpoint (a relative path, no '..'), or a file elsewhere would make every one ready."""
    parts = name.split("/")
    if not name or name.startswith("/") or ".." in parts or "" in parts[:-1] or not name.isprintable():
        return f"{name[:80]!r} is not a file inside a checkpoint; name one relative to it, e.g. DONE or meta/ready"
    return None


class WatchState(BaseModel):
    """A watch's settings and every checkpoint it has seen, in step order."""

    model_config = ConfigDict(defer_build=True)

    directory: str
    pattern: str = "*"
    ready_file: str | None = None
    settle_seconds: float = 60.0
    key: str
    config: str
    overrides: list[str] = []
    max_pending: int | None = None
    max_attempts: int = 3
    checkpoints: list[Checkpoint] = []

    # Read back from a sweep's record too: a value that would make nothing ever ready, or make a
    # file outside the checkpoint count, is refused where it is read, as where it is given.
    @field_validator("ready_file")
    @classmethod
    def _inside_the_checkpoint(cls, value: str | None) -> str | None:
        problem = None if value is None else ready_file_problem(value)
        if problem:
            raise ValueError(problem)
        return value

    @field_validator("settle_seconds")
    @classmethod
    def _a_real_wait(cls, value: float) -> float:
        if not (math.isfinite(value) and 0 <= value <= MAX_SETTLE_SECONDS):
            raise ValueError(f"settle seconds must be from 0 to {MAX_SETTLE_SECONDS:g}, got {value!r}")
        return value

    @field_validator("key")
    @classmethod
    def _a_config_key(cls, value: str) -> str:
        if not CONFIG_KEY_RE.fullmatch(value):
            raise ValueError(f"{value[:80]!r} is not a config key (dotted names, e.g. services.policy.model)")
        return value

    def same_watch(self, other: WatchState) -> bool:
        """Whether ``other`` watches the same directory with the same config: the same watch."""
        return (self.directory, self.config, self.overrides, self.key, self.pattern) == (
            other.directory,
            other.config,
            other.overrides,
            other.key,
            other.pattern,
        )


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
    phase: Phase
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
        if phases[checkpoint.path] == Phase.WAITING and checkpoint.path not in here:
            actions.append(Update(checkpoint, Phase.SKIPPED, "deleted before its turn"))
            phases[checkpoint.path] = Phase.SKIPPED
    seen = {c.path for c in state.checkpoints}
    new = [Checkpoint(path=f.path, step=f.step) for f in sorted(found, key=lambda f: (f.step, f.path))]
    actions += [Update(c, Phase.WAITING, "seen") for c in new if c.path not in seen]
    slots = _free_slots(state.max_pending, phases)
    for checkpoint in state.checkpoints:
        failed = phases[checkpoint.path] == Phase.FAILED and retry[checkpoint.path]
        if slots > 0 and failed and checkpoint.attempts < state.max_attempts:
            actions.append(Resubmit(checkpoint))
            slots -= 1
    candidates = [c for c in state.checkpoints if phases[c.path] == Phase.WAITING] + [
        c for c in new if c.path not in seen
    ]
    for checkpoint in sorted(candidates, key=lambda c: (c.step, c.path)):
        if slots > 0 and here.get(checkpoint.path, Found("", 0, False)).ready:
            actions.append(Submit(checkpoint))
            slots -= 1
    return actions


def _observed(checkpoint: Checkpoint, view: RunView | None, known_runs: set[str]) -> Update | None:
    """A pending checkpoint's new phase from its run's view, when it changed."""
    if checkpoint.phase == Phase.SUBMITTING:
        if checkpoint.run_id in known_runs:
            return Update(checkpoint, Phase.QUEUED, "submitted (recorded before the watcher stopped)")
        return Update(
            checkpoint,
            Phase.UNKNOWN,
            f"the watcher stopped while submitting run {checkpoint.run_id}, which has no record here: it may be "
            f"queued; not submitted again (see its directory, or gym eval status {checkpoint.run_id})",
        )
    if not checkpoint.phase.pending or view is None:
        return None
    if not view.final:
        phase = Phase.RUNNING if view.running else Phase.QUEUED
        return Update(checkpoint, phase, view.detail) if phase != checkpoint.phase else None
    if view.succeeded:
        return Update(checkpoint, Phase.DONE, view.detail)
    return Update(checkpoint, Phase.FAILED, view.detail, retry=view.retry)


def _free_slots(max_pending: int | None, phases: dict[str, Phase]) -> int:
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
