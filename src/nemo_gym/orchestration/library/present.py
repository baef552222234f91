"""What the command line needs to show the use cases' answers, from the modules that own each:
the text of usage figures, the labels of runs, the JSON documents, a line without credentials."""

from __future__ import annotations

from nemo_gym.orchestration.observe import statuses_json as status_json
from nemo_gym.orchestration.record import last_observed, values_label
from nemo_gym.orchestration.results import DEFAULT_METRIC, UNSCOREABLE_LISTED, headline, results_json
from nemo_gym.orchestration.sweep import run_labels
from nemo_gym.orchestration.usage import SOURCE_NONE, hours_text, wall_text
from nemo_gym.orchestration.usage import total as total_usage

__all__ = [
    "DEFAULT_METRIC",
    "SOURCE_NONE",
    "UNSCOREABLE_LISTED",
    "headline",
    "hours_text",
    "last_observed",
    "results_json",
    "run_labels",
    "status_json",
    "total_usage",
    "values_label",
    "wall_text",
    "without_credentials",
]


def without_credentials(text: str) -> str:
    """``text`` without this shell's export credentials or any header value (an unexpected error's, say)."""
    import os

    from nemo_gym.orchestration.exporters.record import scrub_secrets
    from nemo_gym.orchestration.exporters.spec import SECRETS

    return scrub_secrets(text, [os.environ.get(name) for name in SECRETS])
