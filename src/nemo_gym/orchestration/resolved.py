"""The validated config written back out, in a form that validates again to the same jobs.

Env values are written with their prefixes: a ``host:`` value as its reference (``host:VAR``),
never the secret it resolved to, so printing or storing the config leaks nothing.
"""

from __future__ import annotations

from typing import Any

from nemo_gym.orchestration.api import (
    BaseServiceConfig,
    DriverConfig,
    SubmitConfig,
    env_sources_of,
)


def _prefixed_env(owner: BaseServiceConfig | DriverConfig) -> dict[str, str]:
    out: dict[str, str] = {}
    for key, source in env_sources_of(owner).items():
        if source.kind == "lit":
            out[key] = "lit:" + owner.env[key]
        else:
            out[key] = f"{source.kind}:{source.ref}"
    return out


def resolved_config_dict(config: SubmitConfig) -> dict[str, Any]:
    data = config.model_dump(mode="json")
    for name, service in config.services.items():
        data["services"][name]["env"] = _prefixed_env(service)
    data["driver"]["env"] = _prefixed_env(config.driver)
    return data


def secret_values(config: SubmitConfig) -> list[str]:
    """Values read from the submitting machine with ``host:``: they must never be printed or stored."""
    owners: list[BaseServiceConfig | DriverConfig] = [*config.services.values(), config.driver]
    return [
        owner.env[key]
        for owner in owners
        for key, source in env_sources_of(owner).items()
        if source.kind == "host" and owner.env[key]
    ]
