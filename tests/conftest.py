from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples"

_BASE: dict[str, Any] = {
    "services": {
        "policy": {"type": "vllm", "container": "vllm/vllm-openai:v0.11.0", "model": "Qwen/Qwen3-8B"},
    },
    "compute": {"cluster": {"type": "slurm", "account": "acct"}},
    "driver": {"benchmarks": {"answer-judge": {}}},
    "job": {"output_path": "/scratch/runs"},
    "otel": {"enabled": False},
}


@pytest.fixture
def base() -> dict[str, Any]:
    """A minimal valid config as a dict; tests change what they exercise."""
    return copy.deepcopy(_BASE)


@pytest.fixture
def write_config(tmp_path: Path):
    def write(data: Any, name: str = "config.yaml") -> Path:
        path = tmp_path / name
        path.write_text(data if isinstance(data, str) else yaml.safe_dump(data, sort_keys=False))
        return path

    return write
