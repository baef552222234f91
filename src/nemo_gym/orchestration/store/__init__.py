"""The results store: every run's results, per run x benchmark x attempt, in one database (an
SQLite file by default, PostgreSQL for a team), for histories across runs, sweeps and users.
``open_store`` opens it; ``entries_of`` makes a run's entries from its results; ``write_results``
writes runs' results (what status or results would call once a run is final)."""

from __future__ import annotations

from nemo_gym.orchestration.store.engine import (
    URL_VARIABLE,
    Selection,
    Store,
    default_url,
    open_store,
    shown_url,
    write_results,
)
from nemo_gym.orchestration.store.entry import Entry, entries_of, entry_problem, storable, training_step_in

__all__ = [
    "URL_VARIABLE",
    "Entry",
    "Selection",
    "Store",
    "default_url",
    "entries_of",
    "entry_problem",
    "open_store",
    "shown_url",
    "storable",
    "training_step_in",
    "write_results",
]
