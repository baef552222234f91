#!/usr/bin/env python3
"""One OpenAI-compatible endpoint in front of N `vllm serve` replicas managed by Ray.

Staged into the job directory and run on the first node of a vLLM service whose Ray cluster spans
the service's nodes (``use_ray_serve: true``, or several instances each larger than a node):

    python3 steps/py/gym_run.py nemo_gym.orchestration.gateway.ray_serve_gateway \
        --address HEAD_IP:RAY_PORT --port PORT --instances N \
        [--gpus-per-instance G] [--log-dir DIR] -- vllm serve MODEL ... (no --port)

Design (plain Ray actors + an aiohttp proxy, not ``ray.serve``), in three modules beside this one:
``replica`` (one replica's command and its supervising actor), ``supervision`` (the replicas
started, reserved, watched) and ``proxy`` (the HTTP endpoint):

* Each replica is a small Ray actor (0 CPUs, 0 GPUs) that starts ``<argv> --port <free port>
  --distributed-executor-backend ray`` as a child process with ``RAY_ADDRESS`` set, so the vLLM
  engine's Ray workers join this same cluster. The actor only supervises the process; requests
  go straight from the proxy to the replica's HTTP port.
* With ``--gpus-per-instance G`` the gateway reserves G GPUs per replica with a placement group,
  puts the replica's actor on the node of the group's first bundle, and hands the GPUs over to
  vLLM: it removes its group just before the replica starts and waits until the replica's own
  placement group exists (or the replica is healthy) before reserving for the next replica. The
  GPUs are never held twice, so there is no nested placement group for vLLM to wait on, and
  replicas do not race each other for one node's GPUs.
* The proxy streams bodies chunk by chunk in both directions' framing, drops hop-by-hop headers
  both ways, and has no total or read timeout (only a connect timeout).
* ``GET /health`` is 200 only when every replica's ``/health`` answers 200. A replica process that
  exits (or whose actor/node dies) is fatal: ``/health`` turns 503 at once and, after
  ``--exit-grace`` seconds, the gateway stops the other replicas and exits with status 3, so the
  job's liveness watch sees the service die instead of running on with fewer replicas.

Needs only the standard library, ``ray`` and ``aiohttp`` (both in vLLM images). Exit statuses:
2 usage, 3 a replica died, 4 replicas or cluster never became ready, 5 cannot join the Ray
cluster, 128+N stopped by signal N.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys

from nemo_gym.orchestration.gateway.proxy import Proxy
from nemo_gym.orchestration.gateway.replica import has_option, option_value
from nemo_gym.orchestration.gateway.supervision import EXIT_NO_CLUSTER, Supervisor, log


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
    p.add_argument("--port", type=int, required=True, help="port of the gateway's HTTP endpoint")
    p.add_argument("--host", default="0.0.0.0", help="interface of the gateway's HTTP endpoint")
    p.add_argument("--instances", type=int, required=True, help="number of vLLM replicas")
    p.add_argument("--gpus-per-instance", type=int, default=0, help="tp*pp; 0 = unknown, no reservation")
    p.add_argument("--min-nodes", type=int, default=1, help="wait for this many alive Ray nodes first")
    p.add_argument("--cluster-timeout", type=float, default=600, help="seconds to wait for nodes/GPUs")
    p.add_argument("--startup-timeout", type=float, default=1800, help="seconds for every replica's /health")
    p.add_argument(
        "--handoff-timeout",
        type=float,
        default=900,
        help="seconds to wait for a replica to take over its reserved GPUs",
    )
    p.add_argument("--health-timeout", type=float, default=10, help="per-replica /health probe timeout")
    p.add_argument("--connect-timeout", type=float, default=30, help="proxy connect timeout (no read limit)")
    p.add_argument("--poll-interval", type=float, default=2, help="seconds between liveness checks")
    p.add_argument("--exit-grace", type=float, default=5, help="seconds /health shows 503 before exiting")
    p.add_argument("--stop-timeout", type=float, default=30, help="seconds a replica gets to stop on SIGTERM")
    p.add_argument("--log-dir", default=None, help="write replica-<i>.log here (default: the gateway's log)")
    args = p.parse_args(own)
    if not vllm:
        p.error("no `vllm serve` command after '--'")
    if has_option(vllm, "--port"):
        p.error("the vLLM command must not carry --port: the gateway gives each replica a free one")
    if args.instances < 1:
        p.error("--instances must be at least 1")
    if args.gpus_per_instance < 0:
        p.error("--gpus-per-instance must not be negative")
    backend = option_value(vllm, "--distributed-executor-backend")
    if backend not in (None, "ray"):
        log(f"warning: the vLLM command chooses --distributed-executor-backend {backend}; kept as given")
    args.vllm = vllm
    return args


async def serve(args: argparse.Namespace) -> int:
    import aiohttp
    from aiohttp import web

    supervisor = Supervisor(args)
    connector = aiohttp.TCPConnector(limit=0, limit_per_host=0)  # the default caps at 100 in flight
    timeout = aiohttp.ClientTimeout(total=None, sock_read=None, connect=None, sock_connect=args.connect_timeout)
    supervisor.session = aiohttp.ClientSession(connector=connector, timeout=timeout, auto_decompress=False)
    runner = web.AppRunner(Proxy(supervisor).app(), access_log=None)
    await runner.setup()
    await web.TCPSite(runner, args.host, args.port).start()
    log(f"listening on {args.host}:{args.port}; starting {args.instances} replica(s)")

    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, _on_signal, supervisor, sig)
    task = asyncio.create_task(supervisor.lifecycle())
    await supervisor.done.wait()
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    await supervisor.stop_replicas()
    await runner.cleanup()
    await supervisor.session.close()
    return supervisor.exit_code


def _on_signal(supervisor: Supervisor, sig: int) -> None:
    log(f"got signal {sig}: shutting down")
    supervisor.state = "stopping"
    supervisor.exit_code = 128 + sig
    supervisor.done.set()


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    os.environ.setdefault("RAY_DEDUP_LOGS", "0")  # keep every replica's log lines in the step log
    import ray

    try:
        ray.init(address=args.address, namespace="gym-gateway", log_to_driver=True)
    except Exception as exc:  # ConnectionError, auth errors, version mismatch
        log(f"cannot join the Ray cluster at {args.address}: {exc}")
        return EXIT_NO_CLUSTER
    try:
        return asyncio.run(serve(args))
    finally:
        ray.shutdown()


if __name__ == "__main__":
    sys.exit(main())
