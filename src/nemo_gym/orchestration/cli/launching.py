"""Placeholder wiring for rendering and launching, filled in by the plan/render/launch stages."""

from __future__ import annotations

import argparse

from nemo_gym.orchestration.api import SubmitConfig
from nemo_gym.orchestration.errors import UserError


def submit_or_dry_run(config: SubmitConfig, args: argparse.Namespace) -> int:
    raise UserError(
        "this build validates configs but cannot render or submit jobs yet; use --resolve-only"
    )
