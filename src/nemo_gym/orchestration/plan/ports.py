"""Which of a job's servers get their port when the job starts (``ports.py`` on its node), and
whether the job takes its nodes whole (``compute.exclusive_nodes``, auto by default).

A job of one node claims a port for each vLLM server it starts (a prefill/decode tier's too, and
its NIXL side channel: a block, one port a rank), for a prefill/decode service's vllm-router and
its metrics, and for gym's head server; the plan then carries a ``PortRef`` where it carried the
number, and every consumer (the server's ``--port``, its health check, the router's targets, the
driver's ``policy_base_url``, gym's ``head_server.port``) reads the claimed port. The telemetry
collector claims its OTLP receivers' and health ports too; its config names them, and the ports it
scrapes, as ``${env:GYM_PORT_<NAME>}``, and the driver's OTLP endpoint reads the claimed one. A
ray service's head claims its GCS port and those Ray binds at fixed defaults (``RAY_PORT_FLAGS``),
and the driver dials the claimed GCS port. What is not claimed yet keeps its configured port, and
the job then keeps its node whole: multi-node jobs, vLLM on Ray and the Ray gateway, command
benchmarks (an opaque script, which may start gym's servers on their fixed ports). A shard's merge
(``gym env start``, ``gym eval aggregate``) runs in the merging shard's job after its ``gym eval
run``, on that job's claimed ports.

A shared deployment's job (``job.deployment: shared``, and a warm lane's, ``reload``) runs several
drivers, each starting and ending at its own time: its services' and collector's ports are claimed
as the job starts, and each driver's gym head server as that driver starts (owned by the shell
that launched it, so given back when it ends: ``JobPlan.driver_ports``).
"""

from __future__ import annotations

import shlex

from nemo_gym.orchestration.api import RayServiceConfig, VllmPDServiceConfig, VllmServiceConfig
from nemo_gym.orchestration.plan.inputs import RunInputs
from nemo_gym.orchestration.plan.model import PortRef

# Name of gym's head server among the job's claimed ports (a service of that name gets its own).
HEAD_SERVER = "gym_head_server"
HEAD_SERVER_PORT = 11000  # gym 0.7.0's default head_server.port


def fixed_ports_reason(run: RunInputs) -> str | None:
    """Why a job of this run keeps its servers' configured ports; None when it claims them all."""
    config = run.config
    if not run.backend.claims_ports:
        return f"the {run.backend.name} backend gives each job a network of its own"
    if run.layout.node_count > 1:
        return f"it needs {run.layout.node_count} nodes, and multi-node jobs keep their configured ports"
    if any(bench.command is not None for bench in config.driver.benchmarks.values()):
        return "a command benchmark runs its own script, which may bind fixed ports (gym's head server's)"
    if config.services and config.driver.policy_model is None:
        return "the driver's endpoint is written in its run config (no driver.policy_model)"
    for name, service in config.deployed_services.items():
        why = _service_reason(run, service)
        if why:
            return f"service {name} {why}"
    return None


# A Ray head's ports that Ray binds at a fixed default unless told (the others it picks free, and
# its workers take theirs from a range, each checked free): its GCS port is the service's own.
# Preferred: Ray's defaults, but the dashboard agent's (52365), which lies in the kernel's ephemeral
# range where ports.py never looks, is claimed from 22365. The Ray client server's (10001) is not
# given: a Ray without ray[client] (the minimal Ray a vLLM image carries) refuses the option.
RAY_PORT_FLAGS = (
    ("dashboard", "--dashboard-port", 8265),
    ("dashboard_agent", "--dashboard-agent-listen-port", 22365),
)


def _ray_reason(service: RayServiceConfig) -> str | None:
    if service.health_check is not None:
        return f"(ray) is health-checked on port {service.health_check.port}, which Ray binds as configured"
    words = shlex.split(service.extra_args)
    for flag in ("--port", *(flag for _, flag, _ in RAY_PORT_FLAGS)):
        if any(w == flag or w.startswith(flag + "=") for w in words):
            return f"(ray) sets {flag} in its extra_args"
    return None


def _service_reason(run: RunInputs, service: object) -> str | None:
    if isinstance(service, RayServiceConfig):
        return _ray_reason(service)
    if isinstance(service, VllmPDServiceConfig):  # its router; its tiers are asked on their own
        assert service.health_check is not None
        if service.health_check.port != service.port:
            return f"(its router) is health-checked on port {service.health_check.port}, not its serving port"
        return None
    if not isinstance(service, VllmServiceConfig):
        return f"({getattr(service, 'type', '?')}) binds fixed ports"
    if service.use_ray_serve:
        return "runs on Ray, whose ports are fixed"
    assert service.health_check is not None
    if service.health_check.port != service.port:
        return f"is health-checked on port {service.health_check.port}, not its serving port"
    words = shlex.split(service.extra_args)
    if any(w == "--port" or w.startswith("--port=") for w in words):
        return "sets --port in its extra_args"
    return None


def serving_port(name: str, preferred: int, claimed: bool) -> int | PortRef:
    """A server's port in the plan: claimed at the job's start, or the configured number."""
    return PortRef(name, preferred) if claimed else preferred


def whole_nodes(run: RunInputs, fixed_reason: str | None) -> tuple[bool, str]:
    """Whether the job asks for its nodes whole, and why (the dry run says it)."""
    compute = next(iter(run.config.compute.values()))
    explicit = getattr(compute, "exclusive_nodes", None)
    if "exclusive_nodes" not in type(compute).model_fields:
        return False, ""
    if explicit is not None:
        return (
            explicit,
            f"nodes {'whole' if explicit else 'shared'}: compute.exclusive_nodes is {str(explicit).lower()}",
        )
    if fixed_reason is not None:
        return True, f"nodes whole (auto): {fixed_reason}"
    return False, "nodes shared (auto): it needs one node, and its servers' ports are claimed when it starts"
