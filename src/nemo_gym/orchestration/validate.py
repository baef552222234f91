"""Composed dict -> validated ``SubmitConfig``, with every problem and warning as one line."""

from __future__ import annotations

import warnings
from typing import Any

from pydantic import ValidationError

from nemo_gym.orchestration.api import SubmitConfig
from nemo_gym.orchestration.errors import UserError, describe_validation_error


def validate_config(data: dict[str, Any]) -> tuple[SubmitConfig, list[str]]:
    """Return the config and its warnings (one line each), or raise ``UserError``."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            config = SubmitConfig.model_validate(data)
        except ValidationError as exc:
            raise UserError(describe_validation_error(exc, SubmitConfig)) from None
    notes = []
    for w in caught:
        line = " ".join(str(w.message).split())
        if line not in notes:
            notes.append(line)
    return config, notes
