"""Options of the job as a whole: where it writes, how its benchmarks share a deployment, its
limits and exports; and the telemetry collector beside it."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import field_validator

from nemo_gym.orchestration import rules
from nemo_gym.orchestration.api.env import _ENV_VAR_NAME_RE
from nemo_gym.orchestration.api.strict import _StrictModel


class JobConfig(_StrictModel):
    output_path: str
    # Extension beyond the spec: ``per_benchmark`` (one job, one deployment of the services per
    # benchmark, as upstream) or ``shared`` (one job whose services are started once and serve
    # every benchmark in turn, ``benchmarks_at_once`` drivers at a time: the model's start-up is
    # paid once; each benchmark keeps its own artifacts, logs and status), or ``reload`` (as shared,
    # and a sweep's runs whose services differ only in the policy's checkpoint form warm lanes: one
    # job per lane starts the deployment once and reloads the weights in place between runs; see
    # plan/lanes.py).
    deployment: Literal["per_benchmark", "shared", "reload"] = "per_benchmark"
    benchmarks_at_once: int = 1
    # Extension beyond the spec: where every benchmark's results go after its driver, by exporter
    # (mlflow, wandb, table) with its settings; a benchmark's own ``export`` overrides them setting
    # by setting, ``null`` dropping an exporter. See ``exporters``.
    export: dict[str, dict[str, Any] | None] = {}
    # Extension beyond the spec: how many shards each benchmark runs in unless it says (see
    # BenchmarkRunConfig.shards).
    shards: int = 1
    # Extension beyond the spec: at most this many of a submission's jobs of one shape run at once
    # (a Slurm job array's throttle, ``--array=0-N%K``); None: as many as the scheduler starts.
    max_concurrent: int | None = None
    # Extension beyond the spec: the training step of the checkpoint this run evaluates (gym eval
    # watch sets it from the checkpoint's name); exports log the metrics at this step.
    training_step: int | None = None
    # Extension beyond the spec: words that label the run (an experiment, a data mix): the results
    # store keeps them, and gym eval history --tag selects by them.
    tags: list[str] = []
    # Extension beyond the spec: refuse a submission whose estimated GPU-hours (earlier runs of the
    # same benchmarks on the same footprint, from the local index) exceed this; None: no limit.
    max_gpu_hours: float | None = None

    _check_output_path = field_validator("output_path")(rules.absolute_path)
    _check_max_concurrent = field_validator("max_concurrent")(rules.optional_positive)
    _check_max_gpu_hours = field_validator("max_gpu_hours")(rules.optional_positive_number)
    _check_training_step = field_validator("training_step")(rules.optional_step)
    _check_tags = field_validator("tags")(rules.tags)
    _check_at_once = field_validator("benchmarks_at_once")(rules.positive)
    _check_shards = field_validator("shards")(rules.optional_shards)
    _no_bool_shards = field_validator("shards", mode="before")(rules.not_a_bool)


class OtelConfig(_StrictModel):
    """An OpenTelemetry collector beside every benchmark job.

    It scrapes each model service's Prometheus /metrics, receives OTLP from the job's own
    processes on :4317/:4318, and ships both to an OTLP/HTTP backend while keeping a copy under
    <job dir>/otel/. On by default, so a run is observable unless it opts out; endpoint and
    service_name come from the deployment's own config (a cluster fragment, typically) and are
    required while enabled.
    """

    binary: str = "otelcol-contrib"
    component: str = "gym-vllm"
    container: str | None = None
    enabled: bool = True
    endpoint: str | None = None
    gpu_metrics_port: int | None = 9400
    health_check_timeout_seconds: int = 300
    node_metrics_port: int | None = 9100
    scrape_interval_seconds: int = 15
    service_name: str | None = None
    token_env: str = "OTEL_TOKEN"
    # NeMo Gym 0.7.0's fields: gym's own telemetry from the driver, the span groups it emits, and
    # its logs over OTLP. Only driver.gym_install installs gym's telemetry extra; without it the
    # submit path warns (preflight.py), as the schema accepts what 0.7.0's accepts.
    gym_telemetry: bool = True
    gym_span_groups: str = "default,verify"
    gym_logs: bool = True

    @field_validator("scrape_interval_seconds", "health_check_timeout_seconds")
    @classmethod
    def _validate_positive(cls, v: int) -> int:
        if v < 1:
            raise ValueError(f"must be >= 1, got {v}")
        return v

    @field_validator("token_env")
    @classmethod
    def _validate_token_env(cls, v: str) -> str:
        if not _ENV_VAR_NAME_RE.match(v):
            raise ValueError(
                f"otel.token_env: {v!r} is not a valid environment variable name; name the "
                f"variable that holds the token, e.g. OTEL_TOKEN"
            )
        return v

    _check_ports = field_validator("gpu_metrics_port", "node_metrics_port")(rules.optional_port)
    _check_span_groups = field_validator("gym_span_groups")(rules.single_line)
