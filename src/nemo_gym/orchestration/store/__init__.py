"""The results store: every run's results, per run x benchmark x attempt, in one database (an
SQLite file by default, PostgreSQL for a team), for histories across runs, sweeps and users.
``open_store`` opens it; ``entries_of`` makes a run's entries from its results; ``write_results``
writes runs' results (what status and results call once a run is final: ``library.storing``).

Each name is imported when first asked for (PEP 562), as the library's are: a results read with
nothing new to write asks only ``store.url`` and never imports the SQL layer."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from nemo_gym.orchestration.store.engine import Selection, Store, open_store, shown_url, write_results
    from nemo_gym.orchestration.store.entry import Entry, RunLabels, entries_of, entry_problem, run_labels_in, storable
    from nemo_gym.orchestration.store.url import OFF, URL_VARIABLE, chosen_url, default_url, store_off

_HOMES = {
    "OFF": "url",
    "URL_VARIABLE": "url",
    "chosen_url": "url",
    "default_url": "url",
    "store_off": "url",
    "Selection": "engine",
    "Store": "engine",
    "open_store": "engine",
    "shown_url": "engine",
    "write_results": "engine",
    "Entry": "entry",
    "entries_of": "entry",
    "entry_problem": "entry",
    "storable": "entry",
    "run_labels_in": "entry",
    "RunLabels": "entry",
}

__all__ = [
    "OFF",
    "URL_VARIABLE",
    "Entry",
    "Selection",
    "Store",
    "chosen_url",
    "default_url",
    "entries_of",
    "entry_problem",
    "open_store",
    "shown_url",
    "storable",
    "store_off",
    "run_labels_in",
    "RunLabels",
    "write_results",
]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value  # asked once
    return value
