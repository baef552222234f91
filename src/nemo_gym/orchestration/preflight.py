"""The submit path's own checks, run by ``library.prepare`` so that ``--dry-run`` and submit both
see them: what gym will make of a valid config. ``SubmitConfig`` and ``--resolve-only`` accept
what the spec and NeMo Gym 0.7.0 accept; these are about the run that would be staged.
"""

from __future__ import annotations

from nemo_gym.orchestration.api import SubmitConfig


def staging_warnings(config: SubmitConfig) -> list[str]:
    """One line each, for the CLI's ``warning:`` lines."""
    return [w for w in (_gym_telemetry_uninstalled(config),) if w]


def _gym_telemetry_uninstalled(config: SubmitConfig) -> str | None:
    """gym's telemetry extra comes only with driver.gym_install; 0.7.0 refuses to submit without it,
    but the driver's container may have it already, and the collector is worth running anyway."""
    if not (config.otel.enabled and config.otel.gym_telemetry) or config.driver.gym_install is not None:
        return None
    return (
        "otel.gym_telemetry: on, but without driver.gym_install nothing installs gym's telemetry extra, so "
        "gym's own spans and logs arrive only if the driver's container has it (the collector runs either "
        "way); set otel.gym_telemetry: false to silence this, or driver.gym_install to make it certain"
    )
