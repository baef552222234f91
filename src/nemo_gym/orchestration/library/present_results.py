"""What status and results show, from the modules that own it: their JSON documents and the
headline figure. A module of its own so that the verbs that show neither (submit, its --dry-run)
never import the probe's or the results' readers."""

from __future__ import annotations

from nemo_gym.orchestration.observe import statuses_json as status_json
from nemo_gym.orchestration.results import DEFAULT_METRIC, UNSCOREABLE_LISTED, headline, results_json

__all__ = ["DEFAULT_METRIC", "UNSCOREABLE_LISTED", "headline", "results_json", "status_json"]
