r"""The validated config written back out, in a form that validates again to the same jobs.

Env values are written with their prefixes: a ``host:`` value as its reference (``host:VAR``),
never the secret it resolved to, so printing or storing the config leaks nothing. That holds for
the prefill and decode tiers of a ``vllm_pd`` service too, which carry their service's env.
A literal ``${`` in a value (written ``\${`` in the config) is escaped again, so that it is not
read as an interpolation the next time.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from nemo_gym.orchestration.api import (
    PD_TIERS,
    BaseServiceConfig,
    DriverConfig,
    SubmitConfig,
    VllmPDServiceConfig,
    env_sources_of,
    is_carried_secret,
)


def _prefixed_env(owner: BaseServiceConfig | DriverConfig) -> dict[str, str]:
    out: dict[str, str] = {}
    for key, source in env_sources_of(owner).items():
        if is_carried_secret(key, source):  # a literal credential: as the variable a resubmit reads
            out[key] = f"host:{source.ref if source.kind == 'host' else key}"
        elif source.kind == "lit":
            out[key] = "lit:" + owner.env[key]
        else:
            out[key] = f"{source.kind}:{source.ref}"
    return out


def _env_owners(config: SubmitConfig) -> Iterator[tuple[tuple[str, ...], BaseServiceConfig | DriverConfig]]:
    """Every model with an env, with its key path in the dumped config."""
    for name, service in config.services.items():
        yield ("services", name), service
        if isinstance(service, VllmPDServiceConfig):
            for tier in PD_TIERS:
                yield ("services", name, tier.field), getattr(service, tier.field)
    yield ("driver",), config.driver


_BACKSLASHES_BEFORE_INTERPOLATION = re.compile(r"(\\*)\$\{")


def _escaped(node: Any) -> Any:
    r"""Every string as the config must spell it: ``${`` -> ``\${`` (backslashes before it doubled)."""
    if isinstance(node, str):
        return _BACKSLASHES_BEFORE_INTERPOLATION.sub(lambda m: m.group(1) * 2 + "\\${", node)
    if isinstance(node, dict):
        return {key: _escaped(value) for key, value in node.items()}
    if isinstance(node, list):
        return [_escaped(value) for value in node]
    return node


def resolved_config_dict(config: SubmitConfig) -> dict[str, Any]:
    data = config.model_dump(mode="json")
    for path, owner in _env_owners(config):
        node = data
        for key in path:
            node = node[key]
        node["env"] = _prefixed_env(owner)
    return _escaped(data)
