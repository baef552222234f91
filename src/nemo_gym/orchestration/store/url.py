"""Which store: its URL, chosen without importing the SQL layer (a results read that has nothing
new to write must not pay for it)."""

from __future__ import annotations

import os

from nemo_gym.orchestration.errors import UserError
from nemo_gym.orchestration.record import index_dir

URL_VARIABLE = "GYM_RESULTS_URL"
# GYM_RESULTS_URL=off: no store; status and results write to none (history needs --results-url).
OFF = "off"
STORE_FILE = "results.sqlite"


def default_url() -> str:
    return f"sqlite:///{index_dir() / STORE_FILE}"


def store_off() -> bool:
    """Whether ``GYM_RESULTS_URL=off`` turned the store off (nothing is written by itself)."""
    return os.environ.get(URL_VARIABLE, "").strip().lower() == OFF


def chosen_url(url: str | None = None) -> str:
    """The store's URL: ``url``, else ``GYM_RESULTS_URL``, else the SQLite file beside the local
    index. ``UserError`` when the variable turned the store off and no URL was given."""
    if url:
        return url
    if store_off():
        raise UserError(
            f"{URL_VARIABLE}=off: the results store is turned off; give --results-url URL, or unset "
            f"{URL_VARIABLE} for the SQLite file beside the local index"
        )
    return os.environ.get(URL_VARIABLE) or default_url()
