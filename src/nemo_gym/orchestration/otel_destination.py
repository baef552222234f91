"""That telemetry has somewhere to go, checked before anything is planned (a config rule: the
collector's YAML is ``otel.py``'s, from the plan)."""

from __future__ import annotations

from urllib.parse import urlsplit

from nemo_gym.orchestration.api import OtelConfig, SubmitConfig
from nemo_gym.orchestration.errors import UserError


def validate_destination(config: SubmitConfig) -> None:
    """Raise ``UserError`` when telemetry is on but has nowhere to go (one line per problem)."""
    if config.otel.enabled:
        problems = _destination_problems(config.otel)
        if problems:
            raise UserError(problems)


def _destination_problems(otel: OtelConfig) -> list[str]:
    missing = [key for key in ("endpoint", "service_name") if not getattr(otel, key)]
    problems = []
    if missing:
        one = len(missing) == 1
        names = " and ".join(f"otel.{key}" for key in missing)
        problems.append(
            f"{names} {'is' if one else 'are'} not set, but telemetry is on (otel.enabled defaults to "
            f"true); set {'it' if one else 'them'} in the config (e.g. otel: {{endpoint: "
            f"https://otel.example.com, service_name: my-evals}}, often in a cluster fragment) or on "
            f"the command line (++otel.endpoint=URL ++otel.service_name=NAME), or set otel.enabled: false"
        )
    if otel.endpoint:
        parts = urlsplit(otel.endpoint)
        if parts.scheme not in ("http", "https") or not parts.netloc or any(c.isspace() for c in otel.endpoint):
            problems.append(
                f"otel.endpoint: {otel.endpoint!r} is not an http(s) URL; write the OTLP/HTTP base "
                f"URL, e.g. https://otel.example.com (the collector appends /v1/metrics etc.)"
            )
    return problems
