#!/usr/bin/env python3
"""One OpenAI-compatible endpoint in front of N `vllm serve` replicas: a Ray Serve application.

Staged into the job directory and run on the first node of a vLLM service whose Ray cluster spans
the service's nodes (``use_ray_serve: true``, or several instances each larger than a node):

    python3 steps/py/gym_run.py nemo_gym.orchestration.gateway.ray_serve_gateway \
        --address HEAD_IP:RAY_PORT --port PORT --instances N \
        [--gpus-per-instance G] [--log-dir DIR] -- vllm serve MODEL ... (no --port)

Design, in three modules beside this one: ``proxy`` (the Serve deployment: one replica, one
engine), ``replica`` (the engine's process) and ``supervision`` (the rules the gateway watches the
application by):

* One Serve application, one deployment of N replicas (``serve status`` on the job's cluster
  shows it; Serve's proxy on this node serves ``--port``, with no request timeout). Serve routes
  each request to a replica by queue length (power of two choices); the replica passes it on to
  its engine and streams the answer back. Each replica's actor asks for 0 CPUs and 0 GPUs and
  starts ``<argv> --port <free port> --distributed-executor-backend ray`` as a child process with
  ``RAY_ADDRESS`` set, so the engine's Ray workers join this same cluster and reserve the tp × pp
  GPUs themselves, in a placement group of their own at the top level. The replica is in no
  placement group, so there is no nested one (the reason NeMo Gym 0.7.0 kept away from
  ``ray.serve.llm``, ray-project/ray#59064) and the GPUs are never held twice. With
  ``--gpus-per-instance G`` (G at most a node's GPUs), Serve places at most ``gpus // G`` replicas
  on a node, so every engine's GPUs fit on its replica's node; wider engines get one replica a
  node and vLLM's own placement.
* A replica's constructor starts the engine and returns once its ``/health`` answers (a replica
  that is still loading takes no requests); Serve's health check calls the engine's ``/health``
  every ``--poll-interval`` seconds, and three failures in a row (or an engine that exited, which
  ends its replica at once) make Serve replace the replica, engine and all, while the others keep
  serving. However a replica ends, its engine's whole process group ends with it (``replica``'s
  reaper): vLLM's EngineCore and workers would outlive their API server otherwise.
* This process watches ``serve.status()``: ready when every replica runs; it exits 3 when the
  service stays short of replicas for longer than ``--recovery-timeout`` (default: the start-up
  timeout) or Serve gives up replacing them, and 4 when the replicas never all came up in
  ``--startup-timeout``. The reason is logged, written to ``--why-file`` (where the job's liveness
  watch reads why a step died) and to ``DIR/status.json`` beside the replicas' logs.

Needs ``ray[serve]`` and ``aiohttp`` (both in vLLM images). Ray Serve's controller must be able
to talk to the cluster: the job runs this gateway's Ray cluster with its token, passed on to
every client as for any Ray cluster of the job. Exit statuses: 2 usage, 3 a replica lost and not
replaced within the bound, 4 replicas never ready, 5 cannot join the Ray cluster or start Serve,
128+N stopped by signal N.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from typing import Any

from nemo_gym.orchestration.gateway import proxy, replica
from nemo_gym.orchestration.gateway.proxy import EngineReplica, ReplicaSettings
from nemo_gym.orchestration.gateway.replica import has_option, option_value
from nemo_gym.orchestration.gateway.supervision import (
    EXIT_NO_CLUSTER,
    EXIT_NOT_READY,
    Observation,
    Verdict,
    Watch,
    log,
)

APPLICATION = "gym-gateway"
DEPLOYMENT = "vllm"


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="ray_serve_gateway.py",
        usage="%(prog)s --address HEAD_IP:PORT --port P --instances N [options] -- vllm serve MODEL ...",
        description=__doc__.split("\n\n")[0],
    )
    if "--" not in argv:
        if "-h" in argv or "--help" in argv:
            p.print_help()
            raise SystemExit(0)
        p.error("missing '--' before the `vllm serve` command")
    split = argv.index("--")
    own, vllm = argv[:split], argv[split + 1 :]
    p.add_argument("--address", required=True, help="Ray GCS address HEAD_IP:PORT (also RAY_ADDRESS of vLLM)")
    p.add_argument("--port", type=int, required=True, help="port of the gateway's HTTP endpoint (Serve's proxy)")
    p.add_argument("--host", default="0.0.0.0", help="interface of the gateway's HTTP endpoint")
    p.add_argument("--instances", type=int, required=True, help="number of vLLM replicas")
    p.add_argument("--gpus-per-instance", type=int, default=0, help="tp*pp; 0 = unknown, no packing rule")
    p.add_argument("--min-nodes", type=int, default=1, help="wait for this many alive Ray nodes first")
    p.add_argument("--cluster-timeout", type=float, default=600, help="seconds to wait for nodes/GPUs")
    p.add_argument("--startup-timeout", type=float, default=1800, help="seconds for every replica's /health")
    p.add_argument(
        "--recovery-timeout",
        type=float,
        default=None,
        help="seconds the service may stay short of replicas before the gateway fails (default: --startup-timeout)",
    )
    p.add_argument("--health-timeout", type=float, default=10, help="per-replica /health probe timeout")
    p.add_argument("--connect-timeout", type=float, default=30, help="engine connect timeout (no read limit)")
    p.add_argument("--poll-interval", type=float, default=2, help="seconds between health checks and status looks")
    p.add_argument("--max-ongoing-requests", type=int, default=1024, help="requests Serve sends one replica at once")
    p.add_argument("--stop-timeout", type=float, default=5, help="seconds an engine gets to stop on SIGTERM")
    p.add_argument("--log-dir", default=None, help="write replica-<id>.log and status.json here")
    p.add_argument("--why-file", default=None, help="write the one-line reason of a failure here")
    args = p.parse_args(own)
    if not vllm:
        p.error("no `vllm serve` command after '--'")
    if has_option(vllm, "--port"):
        p.error("the vLLM command must not carry --port: the gateway gives each replica a free one")
    if args.instances < 1:
        p.error("--instances must be at least 1")
    if args.gpus_per_instance < 0:
        p.error("--gpus-per-instance must not be negative")
    if args.recovery_timeout is None:
        args.recovery_timeout = args.startup_timeout
    backend = option_value(vllm, "--distributed-executor-backend")
    if backend not in (None, "ray"):
        log(f"warning: the vLLM command chooses --distributed-executor-backend {backend}; kept as given")
    args.vllm = vllm
    return args


def replicas_per_node(gpus_per_instance: int, node_gpus: list[float]) -> int | None:
    """Serve's ``max_replicas_per_node``: as many engines as fit on the smallest GPU node (one when
    an engine is wider than a node); None (no rule) when the engines' GPUs are unknown."""
    gpus = [g for g in node_gpus if g > 0]
    if gpus_per_instance <= 0 or not gpus:
        return None
    return max(1, int(min(gpus)) // gpus_per_instance)


class Stopped(Exception):
    def __init__(self, sig: int) -> None:
        super().__init__(f"signal {sig}")
        self.sig = sig


def _on_signal(sig: int, frame: Any) -> None:
    raise Stopped(sig)


def wait_cluster(args: argparse.Namespace) -> list[float]:
    """The alive nodes' GPU counts, once the cluster has the nodes and GPUs the replicas need."""
    import ray

    need_gpus = args.instances * args.gpus_per_instance
    deadline = time.monotonic() + args.cluster_timeout
    while True:
        nodes = [n for n in ray.nodes() if n.get("Alive")]
        gpus = ray.cluster_resources().get("GPU", 0)
        if len(nodes) >= args.min_nodes and gpus >= need_gpus:
            log(f"Ray cluster: {len(nodes)} node(s), {gpus:g} GPU(s)")
            return [float(n.get("Resources", {}).get("GPU", 0)) for n in nodes]
        if time.monotonic() > deadline:
            raise TimeoutError(
                f"Ray cluster has {len(nodes)} node(s) and {gpus:g} GPU(s); need {args.min_nodes} "
                f"node(s) and {need_gpus} GPU(s) ({args.instances} x {args.gpus_per_instance})"
            )
        time.sleep(1)


def deploy(args: argparse.Namespace, per_node: int | None) -> None:
    import ray
    from ray import serve

    # Ray's workers cannot import this package (it lives in the job directory, not in their
    # environment): the deployment's modules travel with it, by value.
    for module in (replica, proxy):
        ray.cloudpickle.register_pickle_by_value(module)
    settings = ReplicaSettings(
        argv=tuple(args.vllm),
        address=args.address,
        cwd=os.getcwd(),
        log_dir=os.path.abspath(args.log_dir) if args.log_dir else None,
        startup_timeout=args.startup_timeout,
        health_timeout=args.health_timeout,
        connect_timeout=args.connect_timeout,
        stop_timeout=args.stop_timeout,
    )
    options: dict[str, Any] = {}
    if per_node is not None:
        options["max_replicas_per_node"] = per_node
    deployment = serve.deployment(
        EngineReplica,
        name=DEPLOYMENT,
        num_replicas=args.instances,
        max_ongoing_requests=args.max_ongoing_requests,
        health_check_period_s=args.poll_interval,
        health_check_timeout_s=args.health_timeout + 5,
        graceful_shutdown_timeout_s=args.stop_timeout + 5,
        # Old Ray versions blank CUDA_VISIBLE_DEVICES in a 0-GPU actor; this opts out where supported.
        ray_actor_options={
            "num_cpus": 0,
            "num_gpus": 0,
            "runtime_env": {"env_vars": {"RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO": "0"}},
        },
        **options,
    )
    serve.start(proxy_location="HeadOnly", http_options={"host": args.host, "port": args.port})
    target = serve.RunTarget(target=deployment.bind(settings), name=APPLICATION, route_prefix="/")
    serve.run_many([target], wait_for_applications_running=False)
    log(f"Serve application {APPLICATION!r}: {args.instances} replica(s) of {DEPLOYMENT!r} behind port {args.port}")


def observe(target: int) -> Observation:
    from ray import serve

    try:
        app = serve.status().applications.get(APPLICATION)
    except Exception as exc:  # noqa: BLE001 - the controller restarting, a lost connection: not whole
        return Observation("UNKNOWN", 0, target, f"serve.status() failed: {type(exc).__name__}: {exc}")
    if app is None:
        return Observation("NOT_STARTED", 0, target)
    deployment = app.deployments.get(DEPLOYMENT)
    running = 0
    messages = [app.message] if app.message else []
    if deployment is not None:
        running = sum(
            n for state, n in deployment.replica_states.items() if str(getattr(state, "value", state)) == "RUNNING"
        )
        if deployment.message:
            messages.append(deployment.message)
    return Observation(str(getattr(app.status, "value", app.status)), running, target, " ".join(messages))


def watch(args: argparse.Namespace) -> Verdict:
    rules = Watch(time.monotonic(), args.startup_timeout, args.recovery_timeout)
    last = None
    while True:
        seen = observe(args.instances)
        verdict, event = rules.observe(time.monotonic(), seen)
        if event:
            log(event)
        if seen != last or verdict:
            write_status(args, rules, seen)
            last = seen
        if verdict:
            return verdict
        time.sleep(args.poll_interval)


def write_status(args: argparse.Namespace, rules: Watch, seen: Observation) -> None:
    if not args.log_dir:
        return
    status = {
        "state": rules.state,
        "application": seen.status,
        "running": seen.running,
        "replicas": seen.target,
        "message": seen.message,
        "recoveries_s": [round(s, 1) for s in rules.recoveries],
        "time": time.time(),
    }
    os.makedirs(args.log_dir, exist_ok=True)
    path = os.path.join(args.log_dir, "status.json")
    with open(path + ".tmp", "w") as fh:
        json.dump(status, fh)
    os.replace(path + ".tmp", path)


def fail(args: argparse.Namespace, verdict: Verdict) -> int:
    log(f"the service is down: {verdict.reason} (exit {verdict.code})")
    if args.why_file:
        try:
            with open(args.why_file, "w") as fh:
                fh.write(f"Ray Serve gateway: {verdict.reason}\n")
        except OSError as exc:
            log(f"cannot write {args.why_file}: {exc}")
    return verdict.code


def run(args: argparse.Namespace) -> int:
    from ray import serve

    try:
        per_node = replicas_per_node(args.gpus_per_instance, wait_cluster(args))
    except TimeoutError as exc:
        return fail(args, Verdict(EXIT_NOT_READY, str(exc)))
    try:
        try:
            deploy(args, per_node)
        except Stopped:
            raise
        except Exception as exc:  # noqa: BLE001 - Serve refused to start on this cluster: say what it said
            reason = f"cannot start Ray Serve: {type(exc).__name__}: {str(exc)[:500]}"
            return fail(args, Verdict(EXIT_NO_CLUSTER, reason))
        return fail(args, watch(args))
    finally:
        log("stopping the Serve application and its engines")
        try:
            serve.shutdown()
        except Exception as exc:  # noqa: BLE001 - going down anyway
            log(f"serve.shutdown: {type(exc).__name__}: {exc}")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    os.environ.setdefault("RAY_DEDUP_LOGS", "0")  # keep every replica's log lines in the step log
    import ray

    try:
        try:
            ray.init(address=args.address, log_to_driver=True)
        except Exception as exc:  # noqa: BLE001 - ConnectionError, auth errors, version mismatch
            return fail(args, Verdict(EXIT_NO_CLUSTER, f"cannot join the Ray cluster at {args.address}: {exc}"))
        # After ray.init, whose own SIGTERM handler ends the process at once: ours stops the
        # application first (Serve's controller outlives its driver; the engines would too).
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, _on_signal)
        try:
            return run(args)
        finally:
            ray.shutdown()
    except Stopped as stop:
        log(f"got {stop}: shut down")
        return 128 + stop.sig


if __name__ == "__main__":
    sys.exit(main())
