"""Each deployed service's steps: vLLM (one instance, data parallel, on Ray, behind the Ray
gateway, a prefill/decode tier), the prefill/decode router, Ray heads and workers; their argv,
health checks and the names that tell a job's own vLLM server from another's."""

from __future__ import annotations

import json
import re
import shlex
from functools import lru_cache
from typing import Any

from nemo_gym.orchestration import contract
from nemo_gym.orchestration.api import (
    RayServiceConfig,
    SubmitConfig,
    VllmPDServiceConfig,
    VllmPDTierConfig,
    VllmServiceConfig,
    effective_ray_serve,
)
from nemo_gym.orchestration.plan.inputs import RunInputs, shell_var
from nemo_gym.orchestration.plan.layout import Layout
from nemo_gym.orchestration.plan.model import (
    EnvVar,
    HealthCheck,
    NodeSlice,
    PlainStep,
    Port,
    PortedArg,
    PortRef,
    RayAddress,
    RayHeadStep,
    RayWorkerStep,
    ServiceUrl,
    Step,
    VllmDataParallelStep,
    VllmGatewayStep,
    VllmRayStep,
    VllmRouterStep,
)
from nemo_gym.orchestration.plan.ports import RAY_PORT_FLAGS, serving_port
from nemo_gym.orchestration.rules import ROUTER_METRICS_PORT

# A Ray cluster that only carries one vLLM instance across nodes; kept off 6379 so it never meets
# a ray service's own head on the same node.
VLLM_RAY_PORT = 6390
# Where each node of the Ray gateway's cluster exports Ray's metrics, Serve's among them
# (ray_serve_*: requests, latencies, replicas), for the collector to scrape: Ray's documented
# example port (left to itself Ray picks one at random, which nothing could scrape).
RAY_METRICS_EXPORT_PORT = 8080
# Ray services and ray-backed vLLM heads have no HTTP probe: their step writes a ready marker.
DEFAULT_READY_TIMEOUT = 600


def service_steps(run: RunInputs, job_dir: str, claimed: bool = False) -> tuple[list[Step], list[RayAddress]]:
    """Every deployed service's steps in declaration order, and where each ray service's head is.
    ``claimed``: each server's ports are claimed on the job's node when it starts (``plan.ports``):
    each vLLM server's, a prefill/decode tier's NIXL side channel, a router's and its metrics'."""
    steps: list[Step] = []
    ray_addresses: list[RayAddress] = []
    for name, service in run.config.deployed_services.items():
        env = run.env(name, service)
        if isinstance(service, VllmServiceConfig):
            steps.append(vllm_step(run, job_dir, name, service, env, claimed))
        elif isinstance(service, VllmPDServiceConfig):
            steps.append(router_step(run, job_dir, name, service, env, steps, claimed))
        else:
            assert isinstance(service, RayServiceConfig)
            ray = ray_steps(run.layout, job_dir, name, service, env, claimed)
            steps += ray
            head = ray[0]  # the head first, then its workers
            assert isinstance(head, RayHeadStep)
            variable = contract.RAY_ADDRESS_ENV_PREFIX + shell_var(name)
            ray_addresses.append(RayAddress(name, run.layout.driver_node, head.ray_port, variable))
    return steps, ray_addresses


def service_url(step: Step) -> ServiceUrl:
    assert step.health is not None and step.health.port is not None
    variable = contract.SERVICE_URL_ENV_PREFIX + shell_var(step.service)
    return ServiceUrl(step.service, step.health.nodes[0], step.health.port, variable)


def runs_ray(step: Step) -> bool:
    return isinstance(step, (RayHeadStep, RayWorkerStep, VllmRayStep, VllmGatewayStep))


# -- vLLM ---------------------------------------------------------------------------------------


def vllm_step(
    run: RunInputs, job_dir: str, name: str, service: VllmServiceConfig, env: tuple[EnvVar, ...], claimed: bool = False
) -> Step:
    nodes = run.layout.service_nodes(service)
    port = serving_port(name, service.port, claimed)
    gpus = _known_gpus_per_node(run.config, service)
    one_server_per_node = isinstance(service, VllmPDTierConfig) and service.server_per_node
    identity = serving_identity(run.run_id, job_dir, name) if _identity_checkable(service) else None
    base = _vllm_argv(service, identity)
    if isinstance(port, PortRef):
        base = _drop_flags(base, ("--port",))  # step.sh puts the claimed one back, after the model
    n = service.number_of_instances
    side_ports: tuple[PortRef, ...] = ()
    if isinstance(service, VllmPDTierConfig):
        side_ports = _side_channel(name, service) if claimed else ()
        env = _nixl_env(service, side_ports) + env  # the tier's own env still wins
    common: dict[str, Any] = dict(
        name=name,
        service=name,
        nodes=nodes,
        env=env,
        pre_command=service.pre_command,
        health=_vllm_health(service, nodes, one_server_per_node, identity, port),
        launch=run.layout.launch(job_dir, name, nodes, service),
        metrics_port=port,
        claimed_port=port if isinstance(port, PortRef) else None,
        side_ports=side_ports,
    )
    if one_server_per_node:
        # Independent servers, one a node; the router lists each (validation holds n to 1).
        return PlainStep(argv=tuple(base), **common)
    if effective_ray_serve(service, nodes.count, gpus):
        return _gateway_step(service, base, gpus, common)
    if nodes.count == 1:
        argv = base + (["--data-parallel-size", str(n)] if n > 1 else [])
        return PlainStep(argv=tuple(argv), **common)
    if n > 1:
        return _data_parallel_step(service, base, nodes, common)
    argv = base + ["--distributed-executor-backend", "ray"]
    return VllmRayStep(argv=tuple(argv), ray_port=VLLM_RAY_PORT, **common)


def _known_gpus_per_node(config: SubmitConfig, service: VllmServiceConfig) -> list[int]:
    """GPUs a node of each of the service's pools has, where its pool says."""
    compute = next(iter(config.compute.values()))
    pools = [compute.node_pools[service.node_pool]] if service.node_pool else list(compute.node_pools.values())
    return [p.gpus_per_node for p in pools if p.gpus_per_node is not None]


def _vllm_health(
    service: VllmServiceConfig, nodes: NodeSlice, one_server_per_node: bool, identity: str | None, port: Port
) -> HealthCheck:
    """Its HTTP check; on the claimed port when the serving port is claimed (only when the check
    asks the serving port: ``plan.ports``)."""
    assert service.health_check is not None and service.health_check.port is not None
    check = service.health_check
    probed = tuple(nodes.indices) if one_server_per_node else (nodes.start,)
    checked = port if isinstance(port, PortRef) else check.port
    return HealthCheck("http", check.timeout_seconds, checked, check.path, probed, identity)


def _gateway_step(service: VllmServiceConfig, base: list[str], gpus: list[int], common: dict[str, Any]) -> Step:
    """Our Ray Serve gateway on a Ray cluster across the service's nodes: N replicas, one endpoint; each
    replica gets its own port from the gateway."""
    footprint = service.tensor_parallel_size * service.pipeline_parallel_size
    return VllmGatewayStep(
        argv=tuple(_drop_flags(base, ("--port",))),
        ray_port=VLLM_RAY_PORT,
        ray_metrics_port=RAY_METRICS_EXPORT_PORT,
        instances=service.number_of_instances,
        port=service.port,
        gpus_per_instance=footprint if gpus else 0,
        **common,
    )


def _data_parallel_step(service: VllmServiceConfig, base: list[str], nodes: NodeSlice, common: dict[str, Any]) -> Step:
    n = service.number_of_instances
    local = n // nodes.count
    dp = [
        "--data-parallel-size",
        str(n),
        "--data-parallel-size-local",
        str(local),
        "--data-parallel-rpc-port",
        str(service.data_parallel_rpc_port),
    ]
    return VllmDataParallelStep(
        argv=tuple(base + dp),
        worker_argv=tuple(_drop_flags(base, _HEAD_ONLY_VLLM_FLAGS) + dp + ["--headless"]),
        ranks_per_node=local,
        **common,
    )


def _nixl_env(tier: VllmPDTierConfig, claimed: tuple[PortRef, ...] = ()) -> tuple[EnvVar, ...]:
    """NIXL's side channel listens on the node's own address, known only there, and on the port
    claimed for it when the job started (``claimed``), else the tier's configured one."""
    port = (
        EnvVar("VLLM_NIXL_SIDE_CHANNEL_PORT", "runtime", claimed[0].variable)
        if claimed
        else EnvVar("VLLM_NIXL_SIDE_CHANNEL_PORT", "lit", str(tier.nixl_side_channel_port))
    )
    return (EnvVar("VLLM_NIXL_SIDE_CHANNEL_HOST", "node-address", ""), port)


def _side_channel(name: str, tier: VllmPDTierConfig) -> tuple[PortRef, ...]:
    """The ports a tier's NIXL side channel is claimed on one node: vLLM listens on the one given
    plus one a rank (a data-parallel rank's, or each tensor-parallel worker's in older vLLMs), so the
    block covers every instance's workers."""
    count = tier.number_of_instances * tier.tensor_parallel_size
    return (PortRef(f"{name}_nixl", tier.nixl_side_channel_port, count),)


def _vllm_argv(service: VllmServiceConfig, identity: str | None = None) -> list[str]:
    """``vllm serve`` with the service's options, serving ``identity`` too when given; the
    config's extra_args last, as written."""
    argv = [
        "vllm",
        "serve",
        service.model,
        "--port",
        str(service.port),
        "--tensor-parallel-size",
        str(service.tensor_parallel_size),
    ]
    if service.pipeline_parallel_size > 1:
        argv += ["--pipeline-parallel-size", str(service.pipeline_parallel_size)]
    extra = _words(service.extra_args)
    names_in_extra = any(arg == SERVED_NAME_FLAG or arg.startswith(SERVED_NAME_FLAG + "=") for arg in extra)
    names = [service.served_model_name] if service.served_model_name else []
    if identity is not None and not names_in_extra:
        names = (names or [service.model]) + [identity]  # the first name stays what clients see
    if names:
        argv += [SERVED_NAME_FLAG, *names]
    if service.trust_remote_code:
        argv.append("--trust-remote-code")
    if isinstance(service, VllmPDTierConfig):
        argv += ["--kv-transfer-config", json.dumps(service.kv_transfer_config, separators=(",", ":"))]
    argv += extra
    if identity is not None and names_in_extra:
        argv = _with_identity(argv, identity)
    return argv


def _words(extra_args: str) -> list[str]:
    """A service's extra_args as the shell splits them: a new list each call, split once a process
    (every benchmark's job plans the same services: 200 benchmarks split the same text 600 times)."""
    return list(_split(extra_args))


@lru_cache(maxsize=256)
def _split(text: str) -> tuple[str, ...]:
    return tuple(shlex.split(text))


def serving_identity(run_id: str, job_dir: str, service: str) -> str:
    """The served-model alias that makes a vLLM server this job's own: unique to the run, its job
    (one per benchmark, or the shared deployment) and the service, so no two jobs that can run at
    the same time share it (a resumable chain's jobs run one after another)."""
    job = job_dir.rstrip("/").rsplit("/", 1)[-1]
    return re.sub(r"[^A-Za-z0-9._-]", "_", f"{run_id}-{job}-{service}")


SERVED_NAME_FLAG = "--served-model-name"


def _identity_checkable(service: VllmServiceConfig) -> bool:
    """Whether the health check can ask the server its names: it probes the serving port itself,
    and /v1/models needs no key (a server with --api-key or VLLM_API_KEY answers it 401)."""
    assert service.health_check is not None
    keyed = any(arg == "--api-key" or arg.startswith("--api-key=") for arg in _words(service.extra_args))
    return service.health_check.port == service.port and not keyed and "VLLM_API_KEY" not in service.env


def _with_identity(argv: list[str], identity: str) -> list[str]:
    """``argv``, whose extra_args name the served models, serving ``identity`` too after those
    names: vLLM answers with the first name, so what clients see does not change."""
    at = [i for i, arg in enumerate(argv) if arg == SERVED_NAME_FLAG or arg.startswith(SERVED_NAME_FLAG + "=")]
    last = at[-1]  # argparse keeps the last occurrence
    if argv[last] == SERVED_NAME_FLAG:
        return argv[: last + 2] + [identity] + argv[last + 2 :]
    first = argv[last].partition("=")[2]
    return argv[:last] + [SERVED_NAME_FLAG, first, identity] + argv[last + 1 :]


def _drop_flags(argv: list[str], flags: tuple[str, ...]) -> list[str]:
    """``argv`` without the given options, written ``--flag value`` or ``--flag=value``."""
    out: list[str] = []
    skip = False
    for arg in argv:
        if skip:
            skip = False
            continue
        flag, has_value, _ = arg.partition("=")
        if flag in flags:
            skip = not has_value
            continue
        out.append(arg)
    return out


# Headless vLLM ranks refuse --api-server-count: only the head serves the API.
_HEAD_ONLY_VLLM_FLAGS = ("--api-server-count",)
_HEAD_ONLY_RAY_FLAGS = ("--port", "--redis-shard-ports", "--include-dashboard", "--dashboard-host", "--dashboard-port")


# -- prefill/decode router ----------------------------------------------------------------------


def router_step(
    run: RunInputs,
    job_dir: str,
    name: str,
    service: VllmPDServiceConfig,
    env: tuple[EnvVar, ...],
    steps: list[Step],
    claimed: bool = False,
) -> Step:
    """vllm-router on the driver's node, in front of the tiers planned just before it; ``claimed``:
    its port and its metrics' are claimed when the job starts (its health check asks the former)."""
    tiers = {step.name: step for step in steps}
    prefill, decode = (tiers[tier] for tier in service.tiers(name))
    node = run.layout.driver_node
    nodes = NodeSlice(node, 1)
    assert service.health_check is not None and service.health_check.port is not None
    check = service.health_check
    metrics_port = router_metrics_port(run.config, name)
    port = serving_port(name, service.port, claimed)
    prometheus_port = serving_port(f"{name}_metrics", metrics_port, claimed)
    return VllmRouterStep(
        name=name,
        service=name,
        nodes=nodes,
        env=env,
        pre_command=service.pre_command,
        argv=_router_argv(service),
        launch=run.layout.launch(job_dir, name, nodes, service),
        metrics_port=prometheus_port,
        health=HealthCheck("http", check.timeout_seconds, port if claimed else check.port, check.path, (node,)),
        prefill=_serving_endpoints(prefill),
        decode=_serving_endpoints(decode),
        port=port,
        prometheus_port=prometheus_port,
        claimed_port=port if isinstance(port, PortRef) else None,
        side_ports=(prometheus_port,) if isinstance(prometheus_port, PortRef) else (),
    )


def _router_argv(service: VllmPDServiceConfig) -> tuple[str, ...]:
    """vllm-router's options but its ports (``--port``, ``--prometheus-port``: the step's own
    fields, printed after these) and its targets (known where it runs)."""
    return (
        "vllm-router",
        "--vllm-pd-disaggregation",
        "--prefill-policy",
        service.prefill_policy,
        "--decode-policy",
        service.decode_policy,
        "--host",
        "0.0.0.0",
        "--intra-node-data-parallel-size",
        str(service.intra_node_data_parallel_size),
        "--request-timeout-secs",
        str(service.request_timeout_secs),
        "--log-level",
        service.log_level,
        # Its metrics on every interface, so the collector beside the driver can scrape them.
        "--prometheus-host",
        "0.0.0.0",
    )


def router_metrics_port(config: SubmitConfig, name: str) -> int:
    """Where vllm_pd service ``name``'s router serves its Prometheus metrics: vllm-router's own
    default port for the first, the next ports for the others (they all run on the driver's node)."""
    routers = [n for n, s in config.services.items() if isinstance(s, VllmPDServiceConfig)]
    return ROUTER_METRICS_PORT + routers.index(name)


def _serving_endpoints(step: Step) -> tuple[tuple[int, Port], ...]:
    """(node, port) of each server a tier's step runs: every node of one server a node, else its
    head; its port the claimed one where the job claims it (one node: ``plan.ports``)."""
    assert step.health is not None and step.health.port is not None
    return tuple((node, step.health.port) for node in step.health.nodes)


# -- Ray ----------------------------------------------------------------------------------------


def ray_steps(
    layout: Layout, job_dir: str, name: str, service: RayServiceConfig, env: tuple[EnvVar, ...], claimed: bool = False
) -> list[Step]:
    """A ray service's head on the driver's node, then its workers on each pool's other nodes;
    ``claimed`` (a job of one node: the head alone): its GCS port and the ports Ray would bind at
    fixed defaults are claimed when the job starts (``plan.ports.RAY_PORT_FLAGS``)."""
    head = layout.driver_node
    head_pool = next((p for p, s in layout.pools.items() if head in s.indices), None)
    extra = _words(service.extra_args)
    common: dict[str, Any] = dict(service=name, env=env, pre_command=service.pre_command)
    head_flags = _ray_resource_flags(service, head_pool if head_pool in service.node_pools else None)
    if service.health_check is not None:
        check = service.health_check
        health = HealthCheck("http", check.timeout_seconds, check.port, check.path, (head,))
    else:
        health = HealthCheck("ready-marker", DEFAULT_READY_TIMEOUT, nodes=(head,))
    worker_count = sum(len([i for i in layout.pools[p].indices if i != head]) for p in service.node_pools)
    head_nodes = NodeSlice(head, 1)
    gcs = serving_port(name, service.port, claimed)
    ported = _ray_ported_args(name, gcs) if isinstance(gcs, PortRef) else ()
    steps: list[Step] = [
        RayHeadStep(
            name=name,
            nodes=head_nodes,
            ray_port=gcs,
            ray_nodes=1 + worker_count,
            argv=tuple(
                ["ray", "start", "--head", *([] if ported else [f"--port={service.port}"]), *head_flags, *extra]
            ),
            health=health,
            launch=layout.launch(job_dir, name, head_nodes, service),
            ported_args=ported,
            claimed_port=gcs if isinstance(gcs, PortRef) else None,
            side_ports=tuple(arg.port for arg in ported[1:]),
            **common,
        )
    ]
    return steps + _ray_workers(layout, job_dir, name, service, head, common)


def _ray_workers(
    layout: Layout, job_dir: str, name: str, service: RayServiceConfig, head: int, common: dict[str, Any]
) -> list[Step]:
    """A ray service's workers: one step a pool, on the pool's nodes but the head's."""
    extra = _words(service.extra_args)
    steps: list[Step] = []
    for pool in service.node_pools:
        workers = [i for i in layout.pools[pool].indices if i != head]
        if not workers:
            continue
        # Workers of a pool are contiguous except where the head sits at the pool's start.
        nodes = NodeSlice(workers[0], len(workers))
        step = f"{name}_{pool}_workers"
        steps.append(
            RayWorkerStep(
                name=step,
                nodes=nodes,
                head_address_variable=contract.RAY_ADDRESS_ENV_PREFIX + shell_var(name),
                argv=tuple(
                    ["ray", "start", *_ray_resource_flags(service, pool), *_drop_flags(extra, _HEAD_ONLY_RAY_FLAGS)]
                ),
                launch=layout.launch(job_dir, step, nodes, service),
                **common,
            )
        )
    return steps


def _ray_ported_args(name: str, gcs: PortRef) -> tuple[PortedArg, ...]:
    """A claimed Ray head's port options: its GCS port, then each port Ray binds at a fixed default."""
    others = (PortedArg(f"{flag}=", PortRef(f"{name}_{key}", default)) for key, flag, default in RAY_PORT_FLAGS)
    return (PortedArg("--port=", gcs), *others)


def _ray_resource_flags(service: RayServiceConfig, pool: str | None) -> list[str]:
    flags = []
    if service.num_cpus is not None:
        flags.append(f"--num-cpus={service.num_cpus}")
    if service.num_gpus is not None:
        flags.append(f"--num-gpus={service.num_gpus}")
    if pool is not None and service.resources.get(pool):
        amounts = {k: (int(v) if float(v).is_integer() else v) for k, v in sorted(service.resources[pool].items())}
        flags.append("--resources=" + json.dumps(amounts, separators=(",", ":")))
    return flags
