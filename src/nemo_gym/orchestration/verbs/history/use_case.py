"""The results store's use cases: run directories imported into it (``gym eval history import``),
and the history of a selection read from it (``gym eval history``)."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any

from nemo_gym.orchestration.connection import Connect, connect
from nemo_gym.orchestration.errors import UserError
from nemo_gym.orchestration.library.observing import results
from nemo_gym.orchestration.record import run_in_directory
from nemo_gym.orchestration.stats import Correction
from nemo_gym.orchestration.store import Selection, Store, open_store, run_labels_in, storable
from nemo_gym.orchestration.store.history import Leaderboard, leaderboard
from nemo_gym.orchestration.store.regressions import DEFAULT_ALPHA, Detectable, Regression, judge
from nemo_gym.orchestration.untrusted import Unreadable, one_line


@dataclass
class HistoryImport:
    """What an import did: per directory a line, written or refused (each refusal says why)."""

    store: str  # the store's URL, its password masked
    written: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    entries: int = 0


def import_runs(directories: list[str], url: str | None = None, *, connect: Connect = connect) -> HistoryImport:
    """Each run directory's finished benchmarks written into the store (again: replaced, never
    doubled). A directory that cannot be read, or a benchmark not finished, is refused on its own
    line naming it and why; the others are written."""
    store = open_store(url)
    try:
        report = HistoryImport(store.shown_url)
        for directory in directories:
            _import_one(store, directory, report, connect)
        return report
    finally:
        store.close()


def _import_one(store: Store, directory: str, report: HistoryImport, connect: Connect) -> None:
    if not os.path.isdir(directory):
        report.refused.append(f"{directory}: no such directory; give a run's directory (<output_path>/<run id>)")
        return
    try:
        record = run_in_directory(directory)
        [run] = results([record], connect=connect)
    except (UserError, Unreadable, OSError) as exc:
        report.refused.append(f"{directory}: {one_line(str(exc), 300)}")
        return
    final, refused = storable(run, run_labels_in(record.run_dir))
    report.refused += [f"{directory}: {line}" for line in refused]
    if final:
        report.entries += store.write(final)
        names = ", ".join(e.benchmark for e in final)
        report.written.append(f"{directory}: run {record.gym_job_id}, {len(final)} benchmark(s): {names}")


@dataclass(frozen=True)
class History:
    """A selection's history: its leaderboard, and the regressions flagged over its series."""

    board: Leaderboard
    regressions: list[Regression]
    alpha: float = DEFAULT_ALPHA
    correction: Correction = Correction.HOLM  # every pair of the history as one family
    detectable: Detectable | None = None  # how small a drop the pairs tested could show

    def as_dict(self) -> dict[str, Any]:
        flagged = {
            "alpha": self.alpha,
            "correction": self.correction.value,
            "regressions": [r.as_dict() for r in self.regressions],
            "detectable_drop": None if self.detectable is None else self.detectable.as_dict(),
        }
        return {**self.board.as_dict(), **flagged}

    def to_json(self) -> str:
        return json.dumps(self.as_dict(), indent=2)


def history(
    url: str | None = None,
    *,
    model_prefix: str | None = None,
    sweep: str | None = None,
    benchmarks: list[str] | None = None,
    tags: list[str] | None = None,
) -> History:
    """The selected entries' history: the leaderboard (checkpoints in series order, by step or time,
    x benchmarks, the suite mean, the best checkpoint per benchmark and over the suite) and the regressions flagged
    (each checkpoint against the one before it, every pair of the history judged together)."""
    store = open_store(url)
    try:
        found = store.entries(Selection(model_prefix, sweep, tuple(benchmarks or ()), tuple(tags or ())))
    finally:
        store.close()
    board = leaderboard(found)
    judged = judge(board, DEFAULT_ALPHA, Correction.HOLM)
    return History(board, judged.regressions, DEFAULT_ALPHA, Correction.HOLM, judged.detectable)
