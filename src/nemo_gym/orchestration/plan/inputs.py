"""What every job of a run is planned from, and the names the plan gives the job's variables."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from nemo_gym.orchestration import contract
from nemo_gym.orchestration.api import BaseServiceConfig, DriverConfig, SubmitConfig, env_sources_of, is_carried_secret
from nemo_gym.orchestration.plan.layout import Layout
from nemo_gym.orchestration.plan.model import EnvVar


@dataclass(frozen=True)
class RunInputs:
    """One run's config and the facts decided once for all its jobs. ``secrets`` fills as the
    jobs' env entries name secrets the submission must carry."""

    config: SubmitConfig
    run_id: str
    compute_name: str
    backend: Any  # backends.Backend; Any keeps the plan free of the backends' imports
    layout: Layout
    secrets: dict[str, tuple[str, str]]
    sweep_id: str | None = None

    def env(self, owner_label: str, owner: BaseServiceConfig | DriverConfig) -> tuple[EnvVar, ...]:
        entries = []
        for key, source in env_sources_of(owner).items():
            if is_carried_secret(key, source):
                carrier = secret_carrier(owner_label, key)
                self.secrets[carrier] = (owner_label, key)
                entries.append(EnvVar(key, "host", carrier))
            elif source.kind == "runtime":
                entries.append(EnvVar(key, "runtime", source.ref))
            else:
                entries.append(EnvVar(key, "lit", owner.env[key]))
        return tuple(entries)


def shell_var(name: str) -> str:
    return re.sub(r"[^A-Z0-9]", "_", name.upper())


def secret_carrier(owner: str, key: str) -> str:
    return f"{contract.SECRET_CARRIER_PREFIX}{shell_var(owner)}__{key}"
