"""The OpenTelemetry collector of one benchmark job: its YAML config, the driver's OTLP env, checks.

Pure: everything here returns text or data; nothing is written, read from the environment or
launched. The collector is ``otel.binary`` (``otelcol-contrib`` by default) started by the job
script on the driver's node, next to the driver, with ``--config <job dir>/otel/collector.yaml``.

Contract with the job script (what the rendered YAML expects in the collector's environment;
``collector_env_names`` lists exactly the names one rendered config references):

* ``GYM_NODE_<i>`` for every node index ``i`` the config scrapes (0 .. node_count-1 of the
  allocation, in the order of ``GYM_NODES``): an address of that node the collector's node can
  reach, e.g. ``GYM_NODE_1=$(gym_node_ip "$(gym_node_name 1)")``. An unset one expands to ""
  and the collector refuses the target, so export all of them before starting it.
* ``GYM_JOB_ID`` (both launchers) and, under Slurm, ``SLURM_JOB_ID``: resource attributes.
* ``USER``: the ``user`` resource attribute (the account the job runs as on the cluster).
* ``<otel.token_env>``: the backend token, sent only as ``Authorization: Bearer ...``; the
  collector expands an unset variable to "" silently, so the launcher must check it is set.
* ``<job dir>/otel/`` exists before the collector starts (the file exporters write there).

The collector listens on ``rules.COLLECTOR_PORTS`` (OTLP gRPC, OTLP HTTP, health) on all
interfaces; the config validator reserves them on the driver's node.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Iterable
from urllib.parse import quote, urlsplit

import yaml

from nemo_gym.orchestration.api import BaseModelServiceConfig, OtelConfig, SubmitConfig
from nemo_gym.orchestration.errors import UserError
from nemo_gym.orchestration.plan import JobPlan, RunPlan, Step
from nemo_gym.orchestration.rules import COLLECTOR_PORTS

__all__ = [
    "NODE_ENV_PREFIX",
    "ScrapeJob",
    "check_collector_config",
    "collector_config_path",
    "collector_env_names",
    "driver_otel_env",
    "metrics_nodes",
    "node_env_var",
    "render_collector_config",
    "scrape_jobs",
    "validate_destination",
]

NODE_ENV_PREFIX = "GYM_NODE_"
OTLP_GRPC_PORT, OTLP_HTTP_PORT, HEALTH_PORT = COLLECTOR_PORTS
DRIVER_SERVICE_NAME = "gym-driver"
# Resource attribute that keeps the original service.name (the scrape job, or the OTLP sender's
# own name) before the resource processor sets service.name to otel.service_name.
SOURCE_ATTRIBUTE = "gym.source"
DEFAULT_SCRAPE_TIMEOUT = 10  # seconds; never more than the interval

_ENV_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
_ENV_REF_RE = re.compile(r"\$\{env:(" + _ENV_NAME + r")(?::-[^}]*)?\}")
_SIGNALS = ("metrics", "traces", "logs")


def node_env_var(index: int) -> str:
    """The variable the job script sets to the address of allocation node ``index``."""
    return f"{NODE_ENV_PREFIX}{index}"


def _node_ref(index: int) -> str:
    return "${env:" + node_env_var(index) + "}"


def _lit(text: str) -> str:
    """A literal for the collector's config: ``$`` would start an expansion, ``$$`` is one ``$``."""
    return text.replace("$", "$$")


def collector_config_path(job: JobPlan) -> str:
    return f"{job.job_dir}/otel/collector.yaml"


# --------------------------------------------------------------------------------------------
# destination


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


# --------------------------------------------------------------------------------------------
# what is scraped


@dataclass(frozen=True)
class ScrapeJob:
    """One prometheus scrape job: ``targets`` are (node index, ``host:port``) pairs."""

    name: str
    port: int
    targets: tuple[tuple[int, str], ...]
    labels: tuple[tuple[str, str], ...] = ()


def metrics_nodes(step: Step) -> tuple[int, ...]:
    """The nodes where a model step's HTTP server (and so its /metrics) listens.

    A plain step runs the same server on each of its nodes. A multi-node data-parallel step
    serves the API from its first node only (the other nodes run ``--headless`` ranks, with no
    HTTP server; the API server's /metrics reports every rank, labelled by engine), and a
    Ray-backed step runs ``vllm serve`` on its first node only. GPU and host metrics of every
    node come from the ``dcgm`` and ``node`` jobs.
    """
    if step.mode == "plain":
        return tuple(step.nodes.indices)
    return (step.nodes.start,)


def scrape_jobs(config: SubmitConfig, job: JobPlan) -> list[ScrapeJob]:
    """Every scrape job of ``job``'s collector, in the order they are rendered."""
    jobs: list[ScrapeJob] = []
    for step in job.steps:
        service = config.services.get(step.service)
        if not isinstance(service, BaseModelServiceConfig):
            continue
        nodes = metrics_nodes(step)
        jobs.append(
            ScrapeJob(
                name=f"{config.otel.component}/{step.service}",
                port=service.port,
                targets=tuple((i, f"{_node_ref(i)}:{service.port}") for i in nodes),
                labels=(("gym_component", config.otel.component), ("gym_service", step.service)),
            )
        )
    every_node = range(job.node_count)
    for name, port in (("dcgm", config.otel.gpu_metrics_port), ("node", config.otel.node_metrics_port)):
        if port is not None:
            jobs.append(ScrapeJob(name, port, tuple((i, f"{_node_ref(i)}:{port}") for i in every_node)))
    return jobs


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


# --------------------------------------------------------------------------------------------
# rendering


def _policy_model_name(config: SubmitConfig) -> str | None:
    policy = config.services.get(config.driver.policy_model or "")
    if isinstance(policy, BaseModelServiceConfig):
        return policy.served_model_name or policy.model
    return None


def _resource_actions(config: SubmitConfig, plan: RunPlan, job: JobPlan) -> list[dict[str, Any]]:
    otel = config.otel
    assert otel.service_name is not None
    values: list[tuple[str, str]] = [
        ("service.name", _lit(otel.service_name)),
        ("run_id", _lit(plan.run_id)),
        ("benchmark", _lit(job.benchmark)),
        ("cluster", _lit(plan.compute)),
        ("user", "${env:USER}"),
        ("job_id", "${env:GYM_JOB_ID}"),
    ]
    if plan.launcher == "slurm":
        values.append(("slurm_job_id", "${env:SLURM_JOB_ID}"))
    model = _policy_model_name(config)
    if model is not None:
        values.append(("model", _lit(model)))
    actions: list[dict[str, Any]] = [
        {"key": SOURCE_ATTRIBUTE, "from_attribute": "service.name", "action": "insert"}
    ]
    actions += [{"key": key, "value": value, "action": "upsert"} for key, value in values]
    # An expanded ${env:...} that looks like a number arrives as an int (a Slurm job id): keep
    # every value read from the environment a string.
    actions += [
        {"key": key, "action": "convert", "converted_type": "string"}
        for key, value in values
        if value.startswith("${env:")
    ]
    return actions


def render_collector_config(config: SubmitConfig, plan: RunPlan, job: JobPlan) -> str:
    """The otelcol-contrib YAML for ``job``'s collector; see the module docstring for its env.

    Receivers: prometheus (each model service's /metrics where it serves, ``dcgm`` and ``node``
    on every node unless their port is null; omitted when nothing is scraped) and otlp (gRPC and
    HTTP on all interfaces). Processors: memory_limiter, transform (``vllm:x`` -> ``vllm_x``, for
    metrics), resource (run, benchmark, job, cluster, model, user) and batch. Exporters: OTLP/HTTP
    to ``otel.endpoint`` with the token from ``otel.token_env`` as a bearer header, and one file
    per signal under ``<job dir>/otel/``. Raises ``UserError`` without an endpoint/service_name.
    """
    otel = config.otel
    problems = _destination_problems(otel)
    if problems:
        raise UserError(problems)
    assert otel.endpoint is not None
    interval = otel.scrape_interval_seconds
    jobs = scrape_jobs(config, job)
    out_dir = f"{job.job_dir}/otel"

    receivers: dict[str, Any] = {}
    if jobs:
        receivers["prometheus"] = {"config": {"scrape_configs": [_scrape_config(j, interval) for j in jobs]}}
    receivers["otlp"] = {
        "protocols": {
            "grpc": {"endpoint": f"0.0.0.0:{OTLP_GRPC_PORT}"},
            "http": {"endpoint": f"0.0.0.0:{OTLP_HTTP_PORT}"},
        }
    }
    processors: dict[str, Any] = {
        "memory_limiter": {"check_interval": "1s", "limit_percentage": 80, "spike_limit_percentage": 20},
        "transform/metric_names": {
            "error_mode": "ignore",
            # Prometheus names may hold ':' (vLLM's 'vllm:'), which OTLP backends reject.
            "metric_statements": [
                {"context": "metric", "statements": ['replace_pattern(metric.name, ":", "_")']}
            ],
        },
        "resource": {"attributes": _resource_actions(config, plan, job)},
        "batch": {},
    }
    exporters: dict[str, Any] = {
        "otlphttp": {
            "endpoint": _lit(otel.endpoint),
            "headers": {"Authorization": "Bearer ${env:" + otel.token_env + "}"},
        }
    }
    for signal in _SIGNALS:
        exporters[f"file/{signal}"] = {"path": _lit(f"{out_dir}/{signal}.jsonl")}

    pipelines: dict[str, Any] = {}
    for signal in _SIGNALS:
        names = ["memory_limiter"] + (["transform/metric_names"] if signal == "metrics" else [])
        pipelines[signal] = {
            "receivers": (["prometheus"] if signal == "metrics" and jobs else []) + ["otlp"],
            "processors": names + ["resource", "batch"],
            "exporters": ["otlphttp", f"file/{signal}"],
        }
    document = {
        "extensions": {"health_check": {"endpoint": f"0.0.0.0:{HEALTH_PORT}"}},
        "receivers": receivers,
        "processors": processors,
        "exporters": exporters,
        "service": {
            "extensions": ["health_check"],
            # The collector's own metrics server would take :8888 on a node that may need it.
            "telemetry": {"logs": {"level": "info"}, "metrics": {"level": "none"}},
            "pipelines": pipelines,
        },
    }
    header = (
        f"# OpenTelemetry collector of benchmark {job.benchmark}, run {plan.run_id}.\n"
        f"# Rendered by nemo_gym.orchestration.otel; needs in its environment: "
        f"{', '.join(collector_env_names(config, plan, job))}.\n"
    )
    return header + yaml.safe_dump(document, sort_keys=False, default_flow_style=False, width=4096)


def collector_env_names(config: SubmitConfig, plan: RunPlan, job: JobPlan) -> list[str]:
    """Every variable the rendered config of ``job`` reads (the job script must set them all)."""
    nodes = sorted({i for j in scrape_jobs(config, job) for i, _ in j.targets})
    names = [node_env_var(i) for i in nodes] + ["GYM_JOB_ID", "USER", config.otel.token_env]
    if plan.launcher == "slurm":
        names.append("SLURM_JOB_ID")
    return names


# --------------------------------------------------------------------------------------------
# driver


def driver_otel_env(config: SubmitConfig, plan: RunPlan, job: JobPlan) -> dict[str, str]:
    """OTLP env for the driver: send to the collector beside it (same node) over HTTP.

    ``driver.env`` is meant to win over these (the caller merges them first).
    """
    attributes = {"run_id": plan.run_id, "benchmark": job.benchmark, "cluster": plan.compute}
    return {
        "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://localhost:{OTLP_HTTP_PORT}",
        "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
        "OTEL_SERVICE_NAME": DRIVER_SERVICE_NAME,
        # W3C-baggage style: values percent-encoded so ',' and '=' cannot break the list.
        "OTEL_RESOURCE_ATTRIBUTES": ",".join(f"{k}={quote(v, safe='')}" for k, v in attributes.items()),
    }


# --------------------------------------------------------------------------------------------
# structural check


_KNOWN_TOP = {"receivers", "processors", "exporters", "extensions", "connectors", "service"}
_METRICS_ONLY_RECEIVERS = {"prometheus"}


def _strings(node: Any, path: str = "") -> Iterable[tuple[str, str]]:
    """(path, text) for every key and string value of a parsed YAML tree."""
    if isinstance(node, dict):
        for key, value in node.items():
            sub = f"{path}::{key}" if path else str(key)
            if isinstance(key, str):
                yield sub, key
            yield from _strings(value, sub)
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _strings(value, f"{path}[{i}]")
    elif isinstance(node, str):
        yield path, node


def _env_problems(doc: Any) -> list[str]:
    problems = []
    for where, text in _strings(doc):
        rest = _ENV_REF_RE.sub("", text.replace("$$", ""))
        if "$" in rest:
            problems.append(
                f"{where}: {text!r} has a '$' that is not a well-formed ${{env:NAME}} reference "
                f"(write '$$' for a literal '$')"
            )
    return problems


def _port_of(endpoint: Any) -> int | None:
    if not isinstance(endpoint, str) or ":" not in endpoint:
        return None
    tail = endpoint.rsplit(":", 1)[1]
    return int(tail) if tail.isdigit() else None


def _listen_problems(doc: dict[str, Any]) -> list[str]:
    problems = []
    expected = {
        "receivers::otlp::protocols::grpc": OTLP_GRPC_PORT,
        "receivers::otlp::protocols::http": OTLP_HTTP_PORT,
        "extensions::health_check": HEALTH_PORT,
    }
    seen: dict[int, str] = {}
    for where, port in expected.items():
        node: Any = doc
        for part in where.split("::"):
            node = node.get(part) if isinstance(node, dict) else None
        if node is None:
            continue
        endpoint = node.get("endpoint") if isinstance(node, dict) else None
        got = _port_of(endpoint)
        if got != port:
            problems.append(f"{where}::endpoint: {endpoint!r} must listen on port {port} (rules.COLLECTOR_PORTS)")
        elif not str(endpoint).startswith("0.0.0.0:"):
            problems.append(f"{where}::endpoint: {endpoint!r} must bind 0.0.0.0, or other nodes cannot reach it")
        if got is not None and got in seen:
            problems.append(f"{where}::endpoint: port {got} is also used by {seen[got]}")
        if got is not None:
            seen[got] = where
    return problems


def _duration_seconds(text: Any) -> float | None:
    match = re.fullmatch(r"(\d+)(ms|s|m)", str(text))
    if not match:
        return None
    return int(match.group(1)) * {"ms": 0.001, "s": 1, "m": 60}[match.group(2)]


def _scrape_problems(doc: dict[str, Any]) -> list[str]:
    prometheus = (doc.get("receivers") or {}).get("prometheus")
    if prometheus is None:
        return []
    configs = ((prometheus or {}).get("config") or {}).get("scrape_configs")
    if not configs:
        return ["receivers::prometheus: no scrape_configs; leave the receiver out instead"]
    problems: list[str] = []
    names: set[str] = set()
    targets: dict[str, str] = {}
    for i, sc in enumerate(configs):
        where = f"receivers::prometheus::config::scrape_configs[{i}]"
        name = sc.get("job_name")
        if not name:
            problems.append(f"{where}: job_name is missing")
        elif name in names:
            problems.append(f"{where}: job_name {name!r} is used twice")
        names.add(name)
        interval, timeout = _duration_seconds(sc.get("scrape_interval")), _duration_seconds(sc.get("scrape_timeout"))
        if interval is None or timeout is None:
            problems.append(f"{where}: scrape_interval/scrape_timeout must be durations like '15s'")
        elif timeout > interval:
            problems.append(f"{where}: scrape_timeout {sc['scrape_timeout']} exceeds scrape_interval {sc['scrape_interval']}")
        for static in sc.get("static_configs") or []:
            for target in static.get("targets") or []:
                host, _, port = str(target).rpartition(":")
                if not host or not port.isdigit() or not 0 < int(port) < 65536:
                    problems.append(f"{where}: target {target!r} is not host:port")
                elif target in targets:
                    problems.append(f"{where}: target {target!r} is also scraped by job {targets[target]!r}")
                else:
                    targets[target] = str(name)
                if host.startswith("${") and not re.fullmatch(r"\$\{env:" + _ENV_NAME + r"\}", host):
                    problems.append(f"{where}: target host {host!r} must be a plain ${{env:NAME}} reference")
    return problems


def _token_problems(doc: dict[str, Any], text: str, secrets: Iterable[str]) -> list[str]:
    problems = []
    for name, exporter in (doc.get("exporters") or {}).items():
        headers = (exporter or {}).get("headers") or {}
        for key, value in headers.items():
            if key.lower() == "authorization" and not re.fullmatch(
                r"Bearer \$\{env:" + _ENV_NAME + r"\}", str(value)
            ):
                problems.append(
                    f"exporters::{name}::headers::{key}: must be 'Bearer ${{env:NAME}}', never a literal token"
                )
    for name, processor in (doc.get("processors") or {}).items():
        for action in (processor or {}).get("attributes") or []:
            if str(action.get("key", "")).lower() == "authorization":
                problems.append(f"processors::{name}: sets an Authorization attribute; the file exports would hold the token")
    for secret in secrets:
        if secret and secret in text:
            problems.append("the config holds a secret value literally; reference it as ${env:NAME}")
    return problems


def _pipeline_problems(doc: dict[str, Any]) -> list[str]:
    problems: list[str] = []
    service = doc.get("service")
    if not isinstance(service, dict) or not isinstance(service.get("pipelines"), dict) or not service["pipelines"]:
        return ["service::pipelines: missing; the collector would do nothing"]
    used: dict[str, set[str]] = {"receivers": set(), "processors": set(), "exporters": set(), "extensions": set()}
    for ext in service.get("extensions") or []:
        used["extensions"].add(ext)
        if ext not in (doc.get("extensions") or {}):
            problems.append(f"service::extensions: {ext!r} is not defined under extensions")
    for pipeline, spec in service["pipelines"].items():
        signal = str(pipeline).split("/", 1)[0]
        where = f"service::pipelines::{pipeline}"
        if signal not in _SIGNALS:
            problems.append(f"{where}: unknown signal {signal!r}; use metrics, traces or logs")
        spec = spec or {}
        for kind in ("receivers", "processors", "exporters"):
            names = spec.get(kind) or []
            if kind != "processors" and not names:
                problems.append(f"{where}: no {kind}")
            if len(set(names)) != len(names):
                problems.append(f"{where}::{kind}: lists a component twice")
            for name in names:
                used[kind].add(name)
                if name not in (doc.get(kind) or {}):
                    problems.append(f"{where}::{kind}: {name!r} is not defined under {kind}")
                elif kind == "receivers" and name.split("/", 1)[0] in _METRICS_ONLY_RECEIVERS and signal != "metrics":
                    problems.append(f"{where}::receivers: {name!r} only produces metrics")
    for kind, names in used.items():
        for name in doc.get(kind) or {}:
            if name not in names:
                problems.append(f"{kind}::{name}: defined but used by no pipeline")
    return problems


def check_collector_config(yaml_text: str, *, secrets: Iterable[str] = ()) -> list[str]:
    """Structural problems of a collector config (empty when it looks sound).

    Checks: every component a pipeline (or service::extensions) names is defined and every
    defined one is used; prometheus feeds only metrics; every ``$`` is ``$$`` or a well-formed
    ``${env:NAME}``; otlp and health_check listen on 0.0.0.0 at ``rules.COLLECTOR_PORTS``;
    scrape jobs have unique names, host:port targets scraped once, timeout <= interval;
    Authorization headers are ``Bearer ${env:NAME}``; none of ``secrets`` appears in the text.
    This is no substitute for ``otelcol-contrib validate``: component options are not checked.
    """
    try:
        doc = yaml.safe_load(yaml_text)
    except yaml.YAMLError as exc:
        return [f"not YAML: {str(exc).splitlines()[0]}"]
    if not isinstance(doc, dict):
        return ["the config must be a mapping"]
    problems = [f"{key}: unknown top-level section" for key in doc if key not in _KNOWN_TOP]
    problems += _pipeline_problems(doc)
    problems += _env_problems(doc)
    problems += _listen_problems(doc)
    problems += _scrape_problems(doc)
    problems += _token_problems(doc, yaml_text, secrets)
    return problems
