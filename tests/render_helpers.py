"""Render configs the way `gym eval submit --dry-run --stage-dir` does, for tests."""

from __future__ import annotations

import warnings
from pathlib import Path

from nemo_gym.orchestration.compose import compose_config
from nemo_gym.orchestration.plan import build_plan
from nemo_gym.orchestration.render import StagedRun, render_run
from nemo_gym.orchestration.validate import validate_config

GOLDEN_RUN_ID = "gym-job-20260101T000000Z-000000"
GOLDEN_DIR = Path(__file__).resolve().parent / "golden"


def stage(config_path: Path, run_id: str = GOLDEN_RUN_ID, overrides: list[str] | None = None) -> StagedRun:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        config, _ = validate_config(compose_config(config_path, overrides or []))
    return render_run(build_plan(config, run_id))


def golden_configs() -> list[Path]:
    return sorted((GOLDEN_DIR / "configs").glob("*.yaml"))
