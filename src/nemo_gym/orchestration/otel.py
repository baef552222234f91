"""The OpenTelemetry collector of one job: that telemetry has somewhere to go, and its YAML config.

What the collector scrapes and where it runs are decided in the plan (``plan.OtelPlan``); this
module prints the plan's collector (``otel_destination`` checks, before anything is planned, that
telemetry has somewhere to go) as
``otelcol-contrib`` YAML. The collector is ``otel.binary`` started by the job script on the
driver's node, next to the driver, with ``--config <job dir>/otel/collector.yaml``.

Contract with the job script (what the rendered YAML expects in the collector's environment;
``collector_env_names`` lists exactly the names one rendered config references):

* ``GYM_NODE_<i>`` for every node index ``i`` the config scrapes: an address of that node the
  collector's node can reach. An unset one expands to "" and the collector refuses the target,
  so the job exports all of them before starting it.
* the variables of the plan's env attributes (``GYM_JOB_ID``, ``USER``, and the backend's own job id
  variable: ``Backend.job_id_attributes``).
* ``<otel.token_env>``: the backend token, sent only as ``Authorization: Bearer ...``; the
  collector expands an unset variable to "" silently, so the job checks it is set.
* ``<job dir>/otel/`` exists before the collector starts (the file exporters write there).

* ``GYM_PORT_<NAME>`` for every port claimed at the job's start that the config names: the
  collector's own (OTLP gRPC, OTLP HTTP, health) and the metrics ports it scrapes, when the job
  claims its ports (``plan.ports``); exported by the job's claim before the collector starts.

The collector listens on the plan's ports (``OtelPlan.ports``: ``rules.COLLECTOR_PORTS`` unless
claimed at the start) on all interfaces; the config validator reserves the configured ones on the
driver's node.
"""

from __future__ import annotations

from typing import Any

import yaml

from nemo_gym.orchestration import contract
from nemo_gym.orchestration.otel_destination import validate_destination
from nemo_gym.orchestration.plan.model import JobPlan, OtelPlan, PortRef, ScrapeJob
from nemo_gym.orchestration.plan.telemetry import port_ref

__all__ = ["collector_env_names", "render_collector_config", "validate_destination"]

# Resource attribute that keeps the original service.name (the scrape job, or the OTLP sender's
# own name) before the resource processor sets service.name to otel.service_name.
SOURCE_ATTRIBUTE = "gym.source"
DEFAULT_SCRAPE_TIMEOUT = 10  # seconds; never more than the interval
_SIGNALS = ("metrics", "traces", "logs")


def _lit(text: str) -> str:
    """A literal for the collector's config: ``$`` would start an expansion, ``$$`` is one ``$``."""
    return text.replace("$", "$$")


def _env_ref(name: str) -> str:
    return "${env:" + name + "}"


# --------------------------------------------------------------------------------------------
# rendering


def _scrape_config(job: ScrapeJob, interval: int) -> dict[str, Any]:
    static_configs = []
    for node, target in job.targets:
        labels = {key: _lit(value) for key, value in job.labels}
        labels["gym_node"] = str(node)
        static_configs.append({"targets": [target], "labels": labels})
    return {
        "job_name": _lit(job.name),
        "scrape_interval": f"{interval}s",
        "scrape_timeout": f"{min(interval, DEFAULT_SCRAPE_TIMEOUT)}s",
        "metrics_path": "/metrics",
        "static_configs": static_configs,
    }


def _resource_actions(job: JobPlan) -> list[dict[str, Any]]:
    assert job.otel is not None
    attributes = job.otel.attributes
    actions: list[dict[str, Any]] = [{"key": SOURCE_ATTRIBUTE, "from_attribute": "service.name", "action": "insert"}]
    actions += [
        {"key": a.key, "value": _env_ref(a.value) if a.from_env else _lit(a.value), "action": "upsert"}
        for a in attributes
    ]
    # An expanded ${env:...} that looks like a number arrives as an int (a Slurm job id): keep
    # every value read from the environment a string.
    actions += [{"key": a.key, "action": "convert", "converted_type": "string"} for a in attributes if a.from_env]
    return actions


def render_collector_config(run_id: str, job: JobPlan) -> str:
    """The otelcol-contrib YAML for ``job``'s collector; see the module docstring for its env.

    Receivers: prometheus (the plan's scrape jobs; omitted when nothing is scraped) and otlp (gRPC
    and HTTP on all interfaces). Processors: memory_limiter, transform (``vllm:x`` -> ``vllm_x``,
    for metrics), resource (the plan's attributes) and batch. Exporters: OTLP/HTTP to the endpoint
    with the token from its variable as a bearer header, and one file per signal under the job's
    ``otel/`` directory.
    """
    otel = job.otel
    assert otel is not None
    document = {
        "extensions": {"health_check": {"endpoint": f"0.0.0.0:{port_ref(otel.health_port)}"}},
        "receivers": _receivers(otel),
        "processors": _processors(job),
        "exporters": _exporters(otel),
        "service": {
            "extensions": ["health_check"],
            # The collector's own metrics server would take :8888 on a node that may need it.
            "telemetry": {"logs": {"level": "info"}, "metrics": {"level": "none"}},
            "pipelines": _pipelines(otel),
        },
    }
    header = (
        f"# OpenTelemetry collector of benchmark {job.benchmark}, run {run_id}.\n"
        f"# Rendered by nemo_gym.orchestration.otel; needs in its environment: "
        f"{', '.join(collector_env_names(job))}.\n"
    )
    return header + yaml.safe_dump(document, sort_keys=False, default_flow_style=False, width=4096)


def _receivers(otel: OtelPlan) -> dict[str, Any]:
    receivers: dict[str, Any] = {}
    if otel.scrape_jobs:
        interval = otel.scrape_interval_seconds
        receivers["prometheus"] = {
            "config": {"scrape_configs": [_scrape_config(j, interval) for j in otel.scrape_jobs]}
        }
    receivers["otlp"] = {
        "protocols": {
            "grpc": {"endpoint": f"0.0.0.0:{port_ref(otel.otlp_grpc_port)}"},
            "http": {"endpoint": f"0.0.0.0:{port_ref(otel.otlp_http_port)}"},
        }
    }
    return receivers


def _processors(job: JobPlan) -> dict[str, Any]:
    return {
        "memory_limiter": {"check_interval": "1s", "limit_percentage": 80, "spike_limit_percentage": 20},
        "transform/metric_names": {
            "error_mode": "ignore",
            # Prometheus names may hold ':' (vLLM's 'vllm:'), which OTLP backends reject.
            "metric_statements": [{"context": "metric", "statements": ['replace_pattern(metric.name, ":", "_")']}],
        },
        "resource": {"attributes": _resource_actions(job)},
        "batch": {},
    }


def _exporters(otel: OtelPlan) -> dict[str, Any]:
    exporters: dict[str, Any] = {
        "otlphttp": {
            "endpoint": _lit(otel.endpoint),
            "headers": {"Authorization": "Bearer " + _env_ref(otel.token_env)},
        }
    }
    for signal in _SIGNALS:
        exporters[f"file/{signal}"] = {"path": _lit(f"{otel.out_dir}/{signal}.jsonl")}
    return exporters


def _pipelines(otel: OtelPlan) -> dict[str, Any]:
    pipelines: dict[str, Any] = {}
    for signal in _SIGNALS:
        names = ["memory_limiter"] + (["transform/metric_names"] if signal == "metrics" else [])
        pipelines[signal] = {
            "receivers": (["prometheus"] if signal == "metrics" and otel.scrape_jobs else []) + ["otlp"],
            "processors": names + ["resource", "batch"],
            "exporters": ["otlphttp", f"file/{signal}"],
        }
    return pipelines


def collector_env_names(job: JobPlan) -> list[str]:
    """Every variable the rendered config of ``job`` reads (the job script must set them all)."""
    assert job.otel is not None
    nodes = sorted({i for j in job.otel.scrape_jobs for i, _ in j.targets})
    names = [f"{contract.NODE_ADDRESS_ENV_PREFIX}{i}" for i in nodes]
    from_env = [a.value for a in job.otel.attributes if a.from_env]
    # The order the checks and docs/telemetry.md have always used: job id, user, token, then the rest.
    ordered = [contract.ENV_JOB_ID, "USER", job.otel.token_env]
    ports = [p.variable for p in (*job.otel.ports, *(j.port for j in job.otel.scrape_jobs)) if isinstance(p, PortRef)]
    return names + ordered + [v for v in from_env if v not in ordered] + list(dict.fromkeys(ports))
