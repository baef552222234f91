"""The results store's use cases: run directories imported into it (``gym eval history import``),
and the history of a selection read from it (``gym eval history``)."""

from __future__ import annotations

from dataclasses import dataclass, field

from nemo_gym.orchestration.connection import Connect, connect
from nemo_gym.orchestration.errors import UserError
from nemo_gym.orchestration.library.observing import results
from nemo_gym.orchestration.record import run_in_directory
from nemo_gym.orchestration.store import Selection, Store, entries_of, open_store, training_step_in
from nemo_gym.orchestration.store.history import Leaderboard, leaderboard
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
    try:
        record = run_in_directory(directory)
        [run] = results([record], connect=connect)
    except (UserError, Unreadable, OSError) as exc:
        report.refused.append(f"{directory}: {one_line(str(exc), 300)}")
        return
    entries = entries_of(run, training_step_in(record.run_dir))
    final = [e for e in entries if run.states[e.benchmark].final]
    report.refused += [
        f"{directory}: benchmark {e.benchmark} is {e.state}, not finished; import it again once it ends"
        for e in entries
        if not run.states[e.benchmark].final
    ]
    if final:
        report.entries += store.write(final)
        names = ", ".join(e.benchmark for e in final)
        report.written.append(f"{directory}: run {record.gym_job_id}, {len(final)} benchmark(s): {names}")


def history(
    url: str | None = None,
    *,
    model_prefix: str | None = None,
    sweep: str | None = None,
    benchmarks: list[str] | None = None,
) -> Leaderboard:
    """The leaderboard of the selected entries: checkpoints in step order x benchmarks, the suite
    mean, the best checkpoint per benchmark and over the suite."""
    store = open_store(url)
    try:
        found = store.entries(Selection(model_prefix, sweep, tuple(benchmarks or ())))
    finally:
        store.close()
    return leaderboard(found)
