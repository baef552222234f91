"""Where a benchmark's results go once its driver has ended, and which of the submitting shell's
variables the exporters need carried to the jobs."""

from __future__ import annotations

from nemo_gym.orchestration import contract
from nemo_gym.orchestration.api import BaseModelServiceConfig, SubmitConfig
from nemo_gym.orchestration.exporters.spec import CREDENTIALS, ENV_TRACKING_URI, MLFLOW, make_spec
from nemo_gym.orchestration.plan.inputs import RunInputs
from nemo_gym.orchestration.plan.model import ExportPlan


def export_plan(run: RunInputs, benchmark: str, shared_driver: bool) -> ExportPlan | None:
    from nemo_gym.orchestration.resolved import resolved_config_dict

    config = run.config
    exporters = config.exports_of(benchmark)
    if not exporters:
        return None
    policy = config.services.get(config.driver.policy_model or "")
    model = policy_model_path(config) or ""
    served = getattr(policy, "served_model_name", None) or model
    spec = make_spec(
        run.run_id,
        benchmark,
        model,
        served,
        resolved_config_dict(config),
        exporters,
        sweep_id=run.sweep_id,
        gpus=run.layout.gpu_count if run.layout.pool_gpus else None,
        # A shared deployment's benchmarks are timed by the one job that ran them all.
        usage_dir=f"../{contract.SHARED_DEPLOYMENT_DIR}" if shared_driver else None,
        step=config.job.training_step,
    )
    return ExportPlan(tuple(exporters), spec)


def policy_model_path(config: SubmitConfig) -> str | None:
    """The model (checkpoint) the driver's policy service serves, if it is a model service."""
    policy = config.services.get(config.driver.policy_model or "")
    return policy.model if isinstance(policy, BaseModelServiceConfig) else None


# What each exporter reads from its environment to authenticate (see exporters.run_exports).
EXPORT_CREDENTIALS = CREDENTIALS


def export_carried_env(config: SubmitConfig) -> tuple[str, ...]:
    """The exporters' credentials, and MLFLOW_TRACKING_URI where an mlflow exporter has no
    tracking_uri of its own (the job's then comes from the submitting shell, like a credential)."""
    exports = [config.exports_of(bench) for bench in config.driver.benchmarks]
    used = {name for exporters in exports for name in exporters}
    carried = [var for name in sorted(used) for var in EXPORT_CREDENTIALS.get(name, ())]
    if any(MLFLOW in e and not e[MLFLOW].get("tracking_uri") for e in exports):
        carried.append(ENV_TRACKING_URI)
    return tuple(carried)
