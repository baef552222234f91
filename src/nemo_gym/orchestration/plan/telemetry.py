"""The OpenTelemetry collector beside the driver: where it runs, where it listens (its configured
ports, or claimed when the job starts), what it scrapes, the attributes it sets; and the OTLP env
that points the driver (and NeMo Gym's own telemetry) at it."""

from __future__ import annotations

from nemo_gym.orchestration import contract
from nemo_gym.orchestration.api import BaseModelServiceConfig, OtelConfig
from nemo_gym.orchestration.plan.inputs import RunInputs
from nemo_gym.orchestration.plan.model import (
    COLLECTOR_STEP,
    Attribute,
    EnvVar,
    Launch,
    NodeSlice,
    OtelPlan,
    PlainStep,
    Port,
    PortRef,
    ScrapeJob,
    Step,
    VllmGatewayStep,
)
from nemo_gym.orchestration.plan.ports import serving_port
from nemo_gym.orchestration.rules import COLLECTOR_PORTS

DRIVER_SERVICE_NAME = "gym-driver"
# The collector's ports among the job's claimed ones, in COLLECTOR_PORTS' order.
COLLECTOR_PORT_NAMES = ("otel_grpc", "otel_http", "otel_health")


def otel_plan(run: RunInputs, benchmark: str, job_dir: str, steps: list[Step], claimed: bool = False) -> OtelPlan:
    """``claimed``: the collector's own ports are claimed on its node when the job starts, and the
    steps' metrics ports it scrapes may be (``plan.ports``)."""
    otel = run.config.otel
    assert otel.endpoint is not None and otel.service_name is not None  # validate_destination ran
    layout = run.layout
    config_path = f"{job_dir}/{contract.COLLECTOR_CONFIG_FILE}"
    nodes = NodeSlice(layout.driver_node, 1)
    launch = Launch(COLLECTOR_STEP, job_dir, nodes, otel.container, (), False, component=layout.component_of(nodes))
    return OtelPlan(
        launch=launch,
        argv=(otel.binary, "--config", config_path),
        config_path=config_path,
        node_count=layout.node_count,
        endpoint=otel.endpoint,
        token_env=otel.token_env,
        health_timeout_seconds=otel.health_check_timeout_seconds,
        scrape_interval_seconds=otel.scrape_interval_seconds,
        scrape_jobs=tuple(_scrape_jobs(otel, layout.node_count, steps)),
        attributes=_otel_attributes(run, benchmark),
        out_dir=f"{job_dir}/{contract.OTEL_DIR}",
        **dict(zip(("otlp_grpc_port", "otlp_http_port", "health_port"), collector_ports(claimed))),
    )


def collector_ports(claimed: bool) -> tuple[Port, ...]:
    """Where the collector listens: OTLP gRPC, OTLP HTTP, health."""
    return tuple(serving_port(name, port, claimed) for name, port in zip(COLLECTOR_PORT_NAMES, COLLECTOR_PORTS))


def _scrape_jobs(otel: OtelConfig, node_count: int, steps: list[Step]) -> list[ScrapeJob]:
    """Each model service's /metrics where it serves, then the GPU and node exporters of every node."""
    jobs: list[ScrapeJob] = []
    for step in steps:
        port = step.metrics_port
        if port is None:
            continue
        jobs.append(
            ScrapeJob(
                name=f"{otel.component}/{step.service}",
                port=port,
                targets=tuple((i, f"{node_ref(i)}:{port_ref(port)}") for i in metrics_nodes(step)),
                labels=(("gym_component", otel.component), ("gym_service", step.service)),
            )
        )
        if isinstance(step, VllmGatewayStep):
            jobs.append(_ray_metrics(otel, step))
    every_node = range(node_count)
    for name, port in (("dcgm", otel.gpu_metrics_port), ("node", otel.node_metrics_port)):
        if port is not None:
            jobs.append(ScrapeJob(name, port, tuple((i, f"{node_ref(i)}:{port}") for i in every_node)))
    return jobs


def _ray_metrics(otel: OtelConfig, step: VllmGatewayStep) -> ScrapeJob:
    """The Ray gateway's cluster: Ray's metrics on each of its nodes, Ray Serve's among them (its
    requests, latencies and replicas, which Ray users look at), beside the replicas' own."""
    port = step.ray_metrics_port
    return ScrapeJob(
        name=f"{otel.component}/{step.service}/ray",
        port=port,
        targets=tuple((i, f"{node_ref(i)}:{port}") for i in step.nodes.indices),
        labels=(("gym_component", otel.component), ("gym_service", step.service), ("gym_source", "ray")),
    )


def _otel_attributes(run: RunInputs, benchmark: str) -> tuple[Attribute, ...]:
    config = run.config
    assert config.otel.service_name is not None
    values = [
        Attribute("service.name", config.otel.service_name),
        Attribute("run_id", run.run_id),
        Attribute("benchmark", benchmark),
        Attribute("cluster", run.compute_name),
        Attribute("user", "USER", from_env=True),
        Attribute("job_id", contract.ENV_JOB_ID, from_env=True),
    ]
    values += [Attribute(key, var, from_env=True) for key, var in run.backend.job_id_attributes()]
    policy = config.services.get(config.driver.policy_model or "")
    if isinstance(policy, BaseModelServiceConfig):
        values.append(Attribute("model", policy.served_model_name or policy.model))
    return tuple(values)


def node_ref(index: int) -> str:
    """How the collector's config names allocation node ``index``: an env reference the job sets."""
    return "${env:" + contract.NODE_ADDRESS_ENV_PREFIX + str(index) + "}"


def port_ref(port: Port) -> str:
    """How the collector's config names a port: the number, or (claimed at the job's start) an env
    reference to the variable the job exports before it starts the collector."""
    return "${env:" + port.variable + "}" if isinstance(port, PortRef) else str(port)


def metrics_nodes(step: Step) -> tuple[int, ...]:
    """The nodes where a model step's HTTP server (and so its /metrics) listens.

    A plain step runs the same server on each of its nodes. A multi-node data-parallel step
    serves the API from its first node only (the other nodes run ``--headless`` ranks, with no
    HTTP server; the API server's /metrics reports every rank, labelled by engine), and a
    Ray-backed step runs ``vllm serve`` on its first node only.
    """
    if isinstance(step, PlainStep):
        return tuple(step.nodes.indices)
    return (step.nodes.start,)


def driver_telemetry_env(
    otel: OtelConfig, run_id: str, benchmark: str, compute_name: str, http_port: Port = COLLECTOR_PORTS[1]
) -> tuple[EnvVar, ...]:
    """The driver's OTLP env, and NeMo Gym's own telemetry's when ``otel.gym_telemetry``; the
    collector's OTLP/HTTP port is ``http_port`` (claimed at the job's start: read there)."""
    telemetry = driver_otel_env(run_id, benchmark, compute_name)
    if otel.gym_telemetry:
        telemetry.update(gym_telemetry_env(otel, run_id))
    return tuple(
        _on_collector(k, v, http_port) if k in ON_COLLECTOR_PORT else EnvVar(k, "lit", v) for k, v in telemetry.items()
    )


# The driver's variables that name the collector's OTLP/HTTP port (``{port}`` in their values).
ON_COLLECTOR_PORT = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT")


def _on_collector(key: str, value: str, port: Port) -> EnvVar:
    if isinstance(port, PortRef):
        return EnvVar(key, "ported", value, port)
    return EnvVar(key, "lit", value.replace("{port}", str(port)))


def driver_otel_env(run_id: str, benchmark: str, compute_name: str) -> dict[str, str]:
    """OTLP env for the driver: send to the collector beside it (same node) over HTTP, on its
    OTLP/HTTP port (``{port}``: the number, or the port claimed at the job's start)."""
    from urllib.parse import quote

    attributes = {"run_id": run_id, "benchmark": benchmark, "cluster": compute_name}
    return {
        "OTEL_EXPORTER_OTLP_ENDPOINT": "http://localhost:{port}",
        "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
        "OTEL_SERVICE_NAME": DRIVER_SERVICE_NAME,
        # W3C-baggage style: values percent-encoded so ',' and '=' cannot break the list.
        "OTEL_RESOURCE_ATTRIBUTES": ",".join(f"{k}={quote(v, safe='')}" for k, v in attributes.items()),
    }


def gym_telemetry_env(otel: OtelConfig, run_id: str) -> dict[str, str]:
    """What NeMo Gym's own telemetry reads (otel.gym_telemetry). Unlike NeMo Gym 0.7.0, which
    points the logs at the collector's gRPC port while the protocol is HTTP, the logs go where
    the other signals go: OTLP/HTTP on the collector beside the driver."""
    return {
        "NEMO_GYM_OTEL_ENABLED": "1",
        "NEMO_GYM_OTEL_RUN_ID": run_id,
        "NEMO_GYM_OTEL_SPAN_GROUPS": otel.gym_span_groups,
        "NEMO_GYM_OTEL_LOGS_ENABLED": "1" if otel.gym_logs else "0",
        "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT": "http://localhost:{port}/v1/logs",
    }
