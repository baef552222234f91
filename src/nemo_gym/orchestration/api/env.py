"""``env`` values: the ``lit:``/``host:``/``runtime:`` prefixes, resolved, and where each resolved
value came from, so that output shows a reference, never the secret it was read from."""

from __future__ import annotations

import os
import re
import warnings
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel

from nemo_gym.orchestration import rules
from nemo_gym.orchestration.exporters.spec import SECRETS as CREDENTIAL_SECRETS

if TYPE_CHECKING:
    from nemo_gym.orchestration.api.driver import DriverConfig
    from nemo_gym.orchestration.api.services import BaseServiceConfig

RUNTIME_ENV_PREFIX = "runtime:"
LITERAL_ENV_PREFIX = "lit:"
HOST_ENV_PREFIX = "host:"
_ENV_VAR_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _split_env_value(key: str, raw: str) -> tuple[str, str]:
    """Return (prefix, rest) for one env value, or raise naming the key and the fix."""
    for prefix in (LITERAL_ENV_PREFIX, HOST_ENV_PREFIX, RUNTIME_ENV_PREFIX):
        if raw.startswith(prefix):
            return prefix, raw[len(prefix) :]
    raise ValueError(
        f"env['{key}']: {raw!r} must start with one of the prefixes 'lit:', 'host:', or 'runtime:' "
        f"(write 'lit:{raw}' for a literal value)"
    )


def _check_var_name(key: str, prefix: str, var: str) -> None:
    if not _ENV_VAR_NAME_RE.match(var):
        raise ValueError(f"env['{key}']: {var!r} is not a valid environment variable name for {prefix}{var}")


def resolve_env_dict(env: dict[str, str]) -> dict[str, str]:
    """Resolve ``lit:``/``host:``/``runtime:`` prefixes on ``env`` values.

    Every value must use one of the prefixes; a missing or misspelled prefix raises rather than
    being guessed at. ``lit:VALUE`` gives VALUE; ``host:VAR`` reads VAR from the submitting
    machine's environment now; ``runtime:VAR`` stays ``runtime:VAR`` for the job to read where
    it runs.
    """
    resolved: dict[str, str] = {}
    for key, raw in env.items():
        prefix, rest = _split_env_value(key, raw)
        if prefix == LITERAL_ENV_PREFIX:
            resolved[key] = rest
            continue
        _check_var_name(key, prefix, rest)
        if prefix == HOST_ENV_PREFIX:
            if rest not in os.environ:
                raise ValueError(
                    f"env['{key}'] references host:{rest}, but {rest!r} is not set in the "
                    f"submitting shell's environment; export it before submitting"
                )
            resolved[key] = os.environ[rest]
        else:
            resolved[key] = RUNTIME_ENV_PREFIX + rest
    return resolved


class EnvSource(BaseModel):
    """Where one resolved env value came from, so output can show the reference, not a secret."""

    kind: Literal["lit", "host", "runtime"]
    ref: str  # the literal value, or the variable name


def env_sources(env: dict[str, str]) -> dict[str, EnvSource]:
    sources: dict[str, EnvSource] = {}
    for key, raw in env.items():
        prefix, rest = _split_env_value(key, raw)
        sources[key] = EnvSource(kind=prefix[:-1], ref=rest)  # type: ignore[arg-type]
    return sources


def _remember_env_sources(cls: type, data: Any, handler: Any) -> Any:
    """Keep each env value's source beside the resolved value (see ``env_sources_of``)."""
    raw_env = data.get("env") if isinstance(data, dict) else None
    model = handler(data)
    if isinstance(raw_env, dict) and all(isinstance(v, str) for v in raw_env.values()):
        model._env_sources = env_sources(raw_env)
    elif isinstance(data, BaseModel) and hasattr(data, "_env_sources"):
        model._env_sources = dict(data._env_sources)
    return model


def is_carried_secret(key: str, source: EnvSource) -> bool:
    """Whether an env value travels as a secret (in the submission's environment, never in a file):
    every ``host:`` value, and a credential written as a literal."""
    return source.kind == "host" or (source.kind == "lit" and key in CREDENTIAL_SECRETS)


def env_sources_of(model: BaseServiceConfig | DriverConfig) -> dict[str, EnvSource]:
    """The source of every env value of a validated service or driver.

    Values set in code after validation have no recorded source; they count as literals.
    """
    recorded = getattr(model, "_env_sources", {}) or {}
    return {k: recorded.get(k, EnvSource(kind="lit", ref=v)) for k, v in model.env.items()}


def _resolve_env_field(cls: type, v: Any) -> Any:
    if isinstance(v, dict) and all(isinstance(x, str) for x in v.values()):
        rules.env_keys(cls, v)
        for key in rules.literal_credentials(v, CREDENTIAL_SECRETS):
            warnings.warn(rules.literal_credential_warning(key), UserWarning, stacklevel=2)
        return resolve_env_dict(v)
    return v  # wrong types are reported by pydantic with their path


# --------------------------------------------------------------------------------------------
