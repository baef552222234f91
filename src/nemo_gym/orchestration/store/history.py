"""What a history shows, from the store's entries (pure): the leaderboard matrix, checkpoints (in
step order) x benchmarks with the suite mean, and the best checkpoint per benchmark and over the
suite. A checkpoint is a model path; evaluated by several runs (sweeps, a watch, a resubmit), a
benchmark's cell is its newest entry's value."""

from __future__ import annotations

import csv
import io
import json
import math
from dataclasses import dataclass, field
from typing import Any

from nemo_gym.orchestration.store.entry import Entry


@dataclass
class Checkpoint:
    model: str  # the model's path, or ``run <id>`` for a run that names none
    step: int | None
    cells: dict[str, Entry] = field(default_factory=dict)  # benchmark -> the newest entry

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
    checkpoints: list[Checkpoint]  # in step order (unnumbered last)

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
            "benchmarks": self.benchmarks,
            "checkpoints": [
                {
                    "model": c.model,
                    "step": c.step,
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
        writer.writerow(["model", "step", *map(_csv_text, self.benchmarks), "suite_mean", "incomplete"])
        for c in self.checkpoints:
            cells = [_csv_number(c.value(b)) for b in self.benchmarks]
            incomplete = [b for b in self.benchmarks if c.partial(b)]
            writer.writerow(
                [
                    _csv_text(c.model),
                    "" if c.step is None else c.step,
                    *cells,
                    _csv_number(c.suite_mean(self.benchmarks)),
                    _csv_text(" ".join(incomplete)),
                ]
            )
        return out.getvalue()


def leaderboard(entries: list[Entry]) -> Leaderboard:
    """The matrix of ``entries``: a row per checkpoint, a column per benchmark (by name), each cell the newest entry of that checkpoint and benchmark."""
    benchmarks: list[str] = []
    rows: dict[str, Checkpoint] = {}
    for entry in sorted(entries, key=lambda e: (e.submitted_at, e.run_id, e.attempt)):
        if entry.benchmark not in benchmarks:
            benchmarks.append(entry.benchmark)
        name = entry.model or f"run {entry.run_id}"
        row = rows.setdefault(name, Checkpoint(name, entry.step))
        row.step = entry.step if entry.step is not None else row.step
        row.cells[entry.benchmark] = entry
    ordered = sorted(rows.values(), key=lambda c: (c.step is None, c.step or 0, c.model))
    return Leaderboard(sorted(benchmarks), ordered)


def _model(checkpoint: Checkpoint | None) -> str | None:
    return None if checkpoint is None else checkpoint.model


def _csv_number(value: float | None) -> str:
    return "" if value is None else repr(value)


def _csv_text(text: str) -> str:
    """A cell a spreadsheet shows as text, never runs as a formula (``=``, ``+``, ``-``, ``@``)."""
    return "'" + text if text[:1] in ("=", "+", "-", "@", "\t", "\r") else text
