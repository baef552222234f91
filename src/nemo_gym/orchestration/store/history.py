"""What a history shows, from the store's entries (pure): the leaderboard matrix, checkpoints (in
series order) x benchmarks with the suite mean, and the best checkpoint per benchmark and over the
suite. A checkpoint is a model path; evaluated by several runs (sweeps, a watch, a resubmit), a
benchmark's cell is its newest entry's value.

The series' axis (``series_order``): the step where every checkpoint has one (``job.training_step``,
else the number its path ends in); the time each was first submitted where none has one (a model
path with no number, a run that names no model); both in a mix: the numbered in step order, then
the others by time. A time the store holds that is no ISO time is unknown: last."""

from __future__ import annotations

import csv
import io
import json
import math
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from nemo_gym.orchestration.store.entry import Entry

STEP = "step"  # the series' axis: each checkpoint's step
TIME = "time"  # each checkpoint's first submission (UTC), where none has a step
TIME_READ_MAX = 64  # characters of a time the store holds read at all (a record writes 24)


@dataclass
class Checkpoint:
    model: str  # the model's path, or ``run <id>`` for a run that names none
    step: int | None
    cells: dict[str, Entry] = field(default_factory=dict)  # benchmark -> the newest entry
    time: datetime | None = None  # when it was first submitted (its earliest entry's run), UTC; None: unknown

    @property
    def time_text(self) -> str:
        """``2026-12-01T00:00:01Z``; '' when unknown."""
        return "" if self.time is None else self.time.strftime("%Y-%m-%dT%H:%M:%SZ")

    def value(self, benchmark: str) -> float | None:
        entry = self.cells.get(benchmark)
        return None if entry is None else entry.value

    def complete_value(self, benchmark: str) -> float | None:
        """Its value where every sample was written: what a best checkpoint or a regression is judged on."""
        entry = self.cells.get(benchmark)
        return None if entry is None or entry.partial else entry.value

    def partial(self, benchmark: str) -> bool:
        entry = self.cells.get(benchmark)
        return entry is not None and entry.partial

    def suite_mean(self, benchmarks: list[str]) -> float | None:
        """The mean over every benchmark of the suite; None when any has no value."""
        values = [self.value(b) for b in benchmarks]
        if not values or any(v is None for v in values):
            return None
        return math.fsum(v for v in values if v is not None) / len(values)


@dataclass
class Leaderboard:
    benchmarks: list[str]
    checkpoints: list[Checkpoint]  # in series order (``series_order``)
    axis: str = STEP  # STEP or TIME: what orders the series

    @property
    def by_time(self) -> bool:
        return self.axis == TIME

    def position_text(self, checkpoint: Checkpoint) -> str:
        """Where ``checkpoint`` sits on the axis: its step, or its time first submitted; '-' for none."""
        shown = checkpoint.time_text if self.by_time else ("" if checkpoint.step is None else str(checkpoint.step))
        return shown or "-"

    @property
    def unnumbered(self) -> int:
        """Checkpoints with no step: on the step axis, after the numbered ones by time."""
        return sum(1 for c in self.checkpoints if c.step is None)

    def best(self, benchmark: str) -> Checkpoint | None:
        """The checkpoint with the highest complete value on ``benchmark`` (the earliest of equals)."""
        scored = [c for c in self.checkpoints if c.complete_value(benchmark) is not None]
        return max(scored, key=lambda c: c.complete_value(benchmark) or 0.0, default=None)

    def best_over_suite(self) -> Checkpoint | None:
        """The checkpoint with the highest suite mean, every benchmark of it complete."""
        scored = [
            c
            for c in self.checkpoints
            if c.suite_mean(self.benchmarks) is not None and not any(c.partial(b) for b in self.benchmarks)
        ]
        return max(scored, key=lambda c: c.suite_mean(self.benchmarks) or 0.0, default=None)

    def as_dict(self) -> dict[str, Any]:
        best_suite = self.best_over_suite()
        return {
            "axis": self.axis,
            "benchmarks": self.benchmarks,
            "checkpoints": [
                {
                    "model": c.model,
                    "step": c.step,
                    "time": c.time_text or None,
                    "values": {b: c.value(b) for b in self.benchmarks},
                    "runs": {b: c.cells[b].run_id for b in self.benchmarks if b in c.cells},
                    "complete": {b: c.cells[b].complete for b in self.benchmarks if b in c.cells},
                    "suite_mean": c.suite_mean(self.benchmarks),
                }
                for c in self.checkpoints
            ],
            "best": {b: _model(self.best(b)) for b in self.benchmarks},
            "best_over_suite": _model(best_suite),
        }

    def to_json(self) -> str:
        return json.dumps(self.as_dict(), indent=2)

    def to_csv(self) -> str:
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        # Cells stay numbers a spreadsheet can sum; a last column names the benchmarks whose value
        # came from a run that did not write every sample, as the table and the page flag them.
        # The second column is the series' axis, named so: the step, or the time first submitted.
        writer.writerow(["model", self.axis, *map(_csv_text, self.benchmarks), "suite_mean", "incomplete"])
        for c in self.checkpoints:
            cells = [_csv_number(c.value(b)) for b in self.benchmarks]
            incomplete = [b for b in self.benchmarks if c.partial(b)]
            writer.writerow(
                [
                    _csv_text(c.model),
                    c.time_text if self.by_time else ("" if c.step is None else c.step),
                    *cells,
                    _csv_number(c.suite_mean(self.benchmarks)),
                    _csv_text(" ".join(incomplete)),
                ]
            )
        return out.getvalue()


def leaderboard(entries: list[Entry]) -> Leaderboard:
    """The matrix of ``entries``: a row per checkpoint (in ``series_order``, each with the time its
    first entry's run was submitted), a column per benchmark (by name), each cell the newest entry
    of that checkpoint and benchmark."""
    benchmarks: list[str] = []
    rows: dict[str, Checkpoint] = {}
    for entry in sorted(entries, key=lambda e: (e.submitted_at, e.run_id, e.attempt)):
        if entry.benchmark not in benchmarks:
            benchmarks.append(entry.benchmark)
        name = entry.model or f"run {entry.run_id}"
        row = rows.setdefault(name, Checkpoint(name, entry.step))
        row.step = entry.step if entry.step is not None else row.step
        row.cells[entry.benchmark] = entry
        when = parse_time(entry.submitted_at)
        row.time = when if row.time is None or (when is not None and when < row.time) else row.time
    axis, ordered = series_order(list(rows.values()))
    return Leaderboard(sorted(benchmarks), ordered, axis)


def series_order(checkpoints: list[Checkpoint]) -> tuple[str, list[Checkpoint]]:
    """The series' axis and its checkpoints in order along it: by step where every checkpoint has
    one; by the time first submitted where none has (an unknown time last); in a mix, the numbered
    by step, then the others by time. Equals by model path."""
    numbered = sorted((c for c in checkpoints if c.step is not None), key=lambda c: (c.step or 0, c.model))
    others = sorted((c for c in checkpoints if c.step is None), key=_by_time)
    return (TIME if others and not numbered else STEP), numbered + others


def _by_time(c: Checkpoint) -> tuple[bool, float, str]:
    return (c.time is None, 0.0 if c.time is None else c.time.timestamp(), c.model)


def parse_time(text: str) -> datetime | None:
    """An ISO time as a record writes it (``2026-12-01T00:00:01.000Z``), in UTC (one without a zone
    read as UTC); None for anything else (the store is written by anyone)."""
    if not isinstance(text, str) or len(text) > TIME_READ_MAX:
        return None
    try:
        text = text.strip()  # Python 3.10's fromisoformat reads no "Z"
        when = datetime.fromisoformat(text[:-1] + "+00:00" if text[-1:] in ("Z", "z") else text)
        return when.replace(tzinfo=timezone.utc) if when.tzinfo is None else when.astimezone(timezone.utc)
    except (ValueError, OverflowError):  # no ISO time; or one whose UTC falls outside the calendar
        return None


def _model(checkpoint: Checkpoint | None) -> str | None:
    return None if checkpoint is None else checkpoint.model


def _csv_number(value: float | None) -> str:
    return "" if value is None else repr(value)


def _csv_text(text: str) -> str:
    """A cell a spreadsheet shows as text, never runs as a formula (``=``, ``+``, ``-``, ``@``)."""
    return "'" + text if text[:1] in ("=", "+", "-", "@", "\t", "\r") else text
