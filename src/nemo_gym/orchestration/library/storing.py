"""The results store fed without asking: a run's results are written into it when a results or
status read first sees the run final, and again only when they changed (a resubmit's new attempt,
a benchmark's rows rewritten). What was written is remembered in the run's observation in the local
index (``record.stored_marks``), so reading a run already written opens no database, and imports
no SQL layer.

A store that cannot be reached, or fails in any other way, never fails the read: one warning line
on stderr naming the store (its password masked) and the fix; nothing is remembered, so the next
read tries again. ``GYM_RESULTS_URL=off`` turns the feeding off."""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from nemo_gym.orchestration.connection import Connect, connect
from nemo_gym.orchestration.errors import UserError
from nemo_gym.orchestration.record import remember_stored, stored_marks, warn
from nemo_gym.orchestration.store.url import OFF, URL_VARIABLE, chosen_url, store_off
from nemo_gym.orchestration.untrusted import one_line

if TYPE_CHECKING:
    from nemo_gym.orchestration.library.observing import RunStatus
    from nemo_gym.orchestration.results import RunResults

LATER = f"the next status or results read tries again ({URL_VARIABLE}={OFF}: no store)"


def feed_store(runs: list[RunResults]) -> None:
    """Each final run of ``runs`` written into the store, unless what it holds now was written
    already (to the same store). Never raises: a failure is one warning line."""
    if store_off():
        return
    url = chosen_url()
    due = []
    for run in runs:
        marks = _marks(run, url)
        if _ended(run) and stored_marks(run.record.gym_job_id) != marks:
            due.append((run, marks))
    if not due:
        return
    try:
        _write([run for run, _ in due], url)
    except Exception as exc:  # any fault of the store (a driver's, a disk's) must not fail the read
        warn(_unwritten(url, exc))
        return
    for run, marks in due:
        remember_stored(run.record.gym_job_id, marks)


def feed_store_of(statuses: list[RunStatus], *, connect: Connect = connect) -> None:
    """What ``feed_store`` does, for a status read: each final run whose attempts were not all
    written yet has its results read (once: one more round trip per host) and written."""
    from nemo_gym.orchestration.library.observing import read_results

    if store_off():
        return
    url = chosen_url()
    due = [s.record for s in statuses if s.jobs and s.final and not _attempts_written(s, url)]
    if not due:
        return
    try:
        runs = read_results(due, connect=connect)
    except Exception as exc:  # the status read itself succeeded: its output must not change
        warn(f"results not written to the results store {_shown(url)}: reading them failed ({_why(exc)}); {LATER}")
        return
    feed_store(runs)


def _write(runs: list[RunResults], url: str) -> None:
    from nemo_gym.orchestration.store import run_labels_in, write_results

    write_results(runs, url, [run_labels_in(run.record.run_dir) for run in runs])


def _ended(run: RunResults) -> bool:
    return bool(run.benchmarks) and all(state.final for state in run.states.values())


def _marks(run: RunResults, url: str) -> dict[str, str]:
    """What was written, as digests: the store, each benchmark's attempt (all a status read can
    tell), and its results (state, samples, value, the rows' fingerprint)."""
    attempts = {s.benchmark: 1 + s.resubmits for s in run.statuses}
    results = [
        [r.benchmark, attempts.get(r.benchmark, 1), str(r.state), r.samples, repr(r.value), r.results_fingerprint]
        for r in run.benchmarks
    ]
    return {"store": _store_key(url), "attempts": _digest(sorted(attempts.items())), "results": _digest(results)}


def _attempts_written(status: RunStatus, url: str) -> bool:
    marks = stored_marks(status.record.gym_job_id)
    attempts = {job.benchmark: 1 + job.resubmits for job in status.jobs}
    return marks.get("store") == _store_key(url) and marks.get("attempts") == _digest(sorted(attempts.items()))


def _store_key(url: str) -> str:
    """Which store, as a digest of its URL without the password (the index is no place for a
    hash a weak password could be guessed from); the SQL layer's own parser is not imported here."""
    try:
        parts = urlsplit(url)
        where = [parts.scheme, parts.username, parts.hostname, parts.port, parts.path, parts.query]
    except ValueError:  # no URL a store opens: the write that follows says why
        where = ["not a URL"]
    return _digest(where)


def _digest(value: object) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()[:32]


def _unwritten(url: str, exc: BaseException) -> str:
    """The one warning line: ``open_store``'s own words where it refused (they name the store and
    the fix), else the store's fault in a few words, the store named, its password masked."""
    from nemo_gym.orchestration.store.engine import FIX

    if isinstance(exc, UserError):
        return f"{_why(exc, 800)}; results not written: {LATER}"  # bounded where it was made
    return f"results not written to the results store {_shown(url)} ({_why(exc)}): {FIX}; {LATER}"


def _shown(url: str) -> str:
    from nemo_gym.orchestration.store import shown_url

    return shown_url(url)


def _why(exc: BaseException, limit: int = 300) -> str:
    """The fault in one bounded line: a driver's own message, not the statement and its values."""
    cause = getattr(exc, "orig", None) or exc
    return one_line(str(cause) or type(cause).__name__, limit)
