"""What a watch (``gym eval watch``) records in its sweep's record: its settings and each
checkpoint's state across its attempts (``WatchState``); and the training step a checkpoint's
name says (``step_of``), which the plan's warm lanes and the results store read too. Pure data
and rules; the watch's decisions are ``verbs/watch/checkpoints.py``'s."""

from __future__ import annotations

import math
import re
from enum import Enum

from pydantic import BaseModel, ConfigDict, field_validator

# A step in a checkpoint's name: step_1000, iter-500, checkpoint-2000, global_step100, ckpt.300;
# else its last number (epoch3-00120 -> 120).
_NAMED_STEP = re.compile(r"(?:global[_-]?step|step|iteration|iter|checkpoint|ckpt)[_.-]?(\d+)", re.IGNORECASE)
_LAST_NUMBER = re.compile(r"(\d+)(?!.*\d)")


def step_of(name: str) -> int | None:
    """The training step a checkpoint directory's name says, or None."""
    named = _NAMED_STEP.findall(name)
    if named:
        return int(named[-1])
    last = _LAST_NUMBER.search(name)
    return int(last.group(1)) if last else None


class CheckpointPhase(str, Enum):
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
        return self in (CheckpointPhase.SUBMITTING, CheckpointPhase.QUEUED, CheckpointPhase.RUNNING)


class Checkpoint(BaseModel):
    model_config = ConfigDict(defer_build=True)  # built when a sweep's record is first read, as the record's
    path: str
    step: int
    phase: CheckpointPhase = CheckpointPhase.WAITING
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
