#!/usr/bin/env python3
"""One OpenAI-compatible endpoint in front of N `vllm serve` replicas managed by Ray.

Staged into the job directory and run on the first node of a vLLM service whose Ray cluster spans
the service's nodes (``use_ray_serve: true``, or several instances each larger than a node):

    python3 ray_serve_gateway.py --address HEAD_IP:RAY_PORT --port PORT --instances N \
        [--gpus-per-instance G] [--log-dir DIR] -- vllm serve MODEL ... (no --port)

Design (plain Ray actors + an aiohttp proxy, not ``ray.serve``):

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
import itertools
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

EXIT_USAGE = 2
EXIT_REPLICA_DIED = 3
EXIT_NOT_READY = 4
EXIT_NO_CLUSTER = 5

# RFC 9110 §7.6.1 connection-specific fields, plus the legacy Proxy-Connection.
HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "trailer",
        "trailers",
        "transfer-encoding",
        "upgrade",
    }
)
# Set by the proxy itself for the new hop, not copied from the client.
_REQUEST_REPLACED = frozenset({"host", "content-length"})
# aiohttp's client would add these when the client did not send them (gzip to a client that did
# not ask for it, since the proxy forwards bodies undecoded).
_NO_AUTO_HEADERS = ("Accept", "Accept-Encoding", "User-Agent", "Content-Type")
# Accelerator visibility variables an old Ray may blank in a 0-GPU actor; vLLM must not inherit "".
_VISIBILITY_VARS = ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES")
# Set by Ray in its worker processes only; a new driver (vLLM) must pick its own.
_WORKER_ONLY_VARS = ("RAY_JOB_ID",)


def log(message: str) -> None:
    print(f"[gateway {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# -- pure helpers (unit-tested without Ray) ---------------------------------------------------------


def connection_tokens(headers: Iterable[tuple[str, str]]) -> set[str]:
    """Header names listed in Connection: they are hop-by-hop for this message too."""
    names: set[str] = set()
    for key, value in headers:
        if key.lower() == "connection":
            names.update(tok.strip().lower() for tok in value.split(",") if tok.strip())
    return names


def filter_headers(headers: Iterable[tuple[str, str]], *, request: bool) -> list[tuple[str, str]]:
    """Drop hop-by-hop fields (and, on requests, Host/Content-Length which the new hop sets)."""
    items = list(headers)
    drop = HOP_BY_HOP | connection_tokens(items)
    if request:
        drop = drop | _REQUEST_REPLACED
    return [(k, v) for k, v in items if k.lower() not in drop]


def has_option(argv: list[str], name: str) -> bool:
    return any(a == name or a.startswith(name + "=") for a in argv)


def option_value(argv: list[str], name: str) -> str | None:
    for i, arg in enumerate(argv):
        if arg == name and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith(name + "="):
            return arg.split("=", 1)[1]
    return None


def replica_argv(base: list[str], port: int) -> list[str]:
    """The vLLM argv of one replica: the given one plus its port and, unless chosen, the Ray executor."""
    argv = list(base) + ["--port", str(port)]
    if not has_option(base, "--distributed-executor-backend"):
        argv += ["--distributed-executor-backend", "ray"]
    return argv


def replica_env(environ: dict[str, str], address: str) -> dict[str, str]:
    env = dict(environ)
    for name in _WORKER_ONLY_VARS:
        env.pop(name, None)
    for name in _VISIBILITY_VARS:
        if env.get(name) == "":
            env.pop(name)
    env["RAY_ADDRESS"] = address
    return env


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


def pick_replica(replicas: list[Replica], turn: int) -> Replica | None:
    """Least outstanding requests among routable replicas; ties go round robin from `turn`."""
    candidates = [r for r in replicas if r.alive and r.healthy] or [r for r in replicas if r.alive]
    if not candidates:
        return None
    start = turn % len(candidates)
    rotated = candidates[start:] + candidates[:start]
    return min(rotated, key=lambda r: r.outstanding)


@dataclass
class Replica:
    index: int
    actor: Any = None
    node_id: str = ""
    url: str = ""
    pid: int = 0
    alive: bool = True
    healthy: bool = False
    outstanding: int = 0
    served: int = 0
    exit_reason: str = ""
    log_path: str | None = None
    info: dict[str, Any] = field(default_factory=dict)


# -- the replica actor (wrapped with ray.remote at run time) ----------------------------------------


class VllmReplica:
    """Supervises one `vllm serve` process on the node Ray put this actor on."""

    def __init__(self, index: int, argv: list[str], address: str, cwd: str, log_path: str | None) -> None:
        self.index, self.argv, self.address, self.cwd, self.log_path = index, argv, address, cwd, log_path
        self.proc: subprocess.Popen | None = None

    def node(self) -> dict[str, str]:
        import ray

        return {"node_id": ray.get_runtime_context().get_node_id(), "ip": ray.util.get_node_ip_address()}

    def start(self) -> dict[str, Any]:
        import ray

        with socket.socket() as s:
            s.bind(("", 0))
            port = s.getsockname()[1]
        argv = replica_argv(self.argv, port)
        out = None
        if self.log_path:
            os.makedirs(os.path.dirname(self.log_path) or ".", exist_ok=True)
            out = open(self.log_path, "ab", buffering=0)  # noqa: SIM115 - the replica process writes it for its life
        self.proc = subprocess.Popen(
            argv,
            env=replica_env(dict(os.environ), self.address),
            cwd=self.cwd if os.path.isdir(self.cwd) else None,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT if out else None,
            start_new_session=True,  # its own process group: stop() reaches vLLM's children too
            preexec_fn=_parent_death_signal(),
        )
        if out:
            out.close()
        ip = ray.util.get_node_ip_address()
        print(f"replica {self.index}: pid {self.proc.pid} on {ip}:{port}: {' '.join(argv)}", flush=True)
        return {"ip": ip, "port": port, "pid": self.proc.pid, "argv": argv}

    def poll(self) -> int | None:
        return None if self.proc is None else self.proc.poll()

    def stop(self, timeout: float) -> int | None:
        if self.proc is None or self.proc.poll() is not None:
            return None if self.proc is None else self.proc.returncode
        for sig, wait in ((signal.SIGTERM, timeout), (signal.SIGKILL, 10.0)):
            try:
                os.killpg(self.proc.pid, sig)
            except ProcessLookupError:
                pass
            try:
                return self.proc.wait(wait)
            except subprocess.TimeoutExpired:
                continue
        return self.proc.poll()


def _parent_death_signal() -> Any:
    """A preexec_fn that makes the child get SIGTERM when the actor process dies (e.g. when Ray
    kills it because the gateway exited). libc is loaded here, before the fork, not in the child."""
    try:
        import ctypes

        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):  # not Linux: the explicit stop() path still applies
        return None
    return lambda: prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


# -- the gateway --------------------------------------------------------------------------------------


class Gateway:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.replicas = [Replica(i) for i in range(args.instances)]
        self.state = "starting"  # starting -> ready -> failed | stopping
        self.turn = itertools.count()
        self.done = asyncio.Event()
        self.exit_code = 0
        self.session: Any = None
        self._actor_cls: Any = None

    # HTTP side ------------------------------------------------------------------------------------

    def app(self) -> Any:
        from aiohttp import web

        app = web.Application(client_max_size=1 << 31)
        app.router.add_get("/health", self.handle_health)
        app.router.add_get("/gateway/status", self.handle_status)
        app.router.add_route("*", "/{tail:.*}", self.handle_proxy)
        return app

    def status(self) -> dict[str, Any]:
        return {
            "state": self.state,
            "replicas": [
                {
                    "index": r.index,
                    "url": r.url,
                    "pid": r.pid,
                    "alive": r.alive,
                    "healthy": r.healthy,
                    "outstanding": r.outstanding,
                    "served": r.served,
                    "exit": r.exit_reason,
                }
                for r in self.replicas
            ],
        }

    async def handle_status(self, request: Any) -> Any:
        from aiohttp import web

        return web.json_response(self.status())

    async def probe(self, replica: Replica) -> bool:
        import aiohttp

        if not replica.url or not replica.alive:
            return False
        try:
            timeout = aiohttp.ClientTimeout(total=self.args.health_timeout)
            async with self.session.get(replica.url + "/health", timeout=timeout) as resp:
                await resp.read()
                return resp.status == 200
        except (aiohttp.ClientError, asyncio.TimeoutError, OSError):
            return False

    async def handle_health(self, request: Any) -> Any:
        from aiohttp import web

        if self.state == "ready":
            results = await asyncio.gather(*(self.probe(r) for r in self.replicas))
            for replica, ok in zip(self.replicas, results):
                replica.healthy = ok
            ok = self.state == "ready" and all(results)
        else:
            ok = False
        body = self.status()
        return web.json_response(body, status=200 if ok else 503)

    async def handle_proxy(self, request: Any) -> Any:
        import aiohttp
        from aiohttp import web

        if self.state != "ready":
            return web.json_response({"error": {"message": f"gateway is {self.state}", "code": 503}}, status=503)
        replica = pick_replica(self.replicas, next(self.turn))
        if replica is None:
            return web.json_response({"error": {"message": "no live replica", "code": 503}}, status=503)
        body = await request.read()
        headers = filter_headers(request.headers.items(), request=True)
        replica.outstanding += 1
        response: web.StreamResponse | None = None
        try:
            async with self.session.request(
                request.method,
                replica.url + request.path_qs,
                headers=headers,
                data=body if body or request.can_read_body else None,
                allow_redirects=False,
                skip_auto_headers=_NO_AUTO_HEADERS,
            ) as upstream:
                response = web.StreamResponse(status=upstream.status, reason=upstream.reason)
                for key, value in filter_headers(upstream.headers.items(), request=False):
                    response.headers.add(key, value)
                response.headers["X-Gateway-Replica"] = str(replica.index)
                await response.prepare(request)
                try:
                    async for chunk in upstream.content.iter_any():
                        await response.write(chunk)
                    await response.write_eof()
                except (ConnectionResetError, BrokenPipeError):
                    # The client went away: leaving the block closes the upstream connection, which
                    # makes vLLM abort the request.
                    return response
                replica.served += 1
                return response
        except (aiohttp.ClientConnectionError, asyncio.TimeoutError) as exc:
            if response is not None and response.prepared:
                # Headers already went out: all we can do is cut the connection, as the replica did.
                log(f"replica {replica.index}: response cut mid-stream: {exc!r}")
                raise
            return web.json_response(
                {"error": {"message": f"replica {replica.index} unreachable: {exc}", "code": 502}}, status=502
            )
        finally:
            replica.outstanding -= 1

    # Ray side ---------------------------------------------------------------------------------------

    async def wait_cluster(self) -> None:
        import ray

        need_gpus = self.args.instances * self.args.gpus_per_instance
        deadline = time.monotonic() + self.args.cluster_timeout
        while True:
            nodes = [n for n in ray.nodes() if n.get("Alive")]
            gpus = ray.cluster_resources().get("GPU", 0)
            if len(nodes) >= self.args.min_nodes and gpus >= need_gpus:
                log(f"Ray cluster: {len(nodes)} node(s), {gpus:g} GPU(s)")
                return
            if time.monotonic() > deadline:
                raise StartupError(
                    f"Ray cluster has {len(nodes)} node(s) and {gpus:g} GPU(s); need {self.args.min_nodes} "
                    f"node(s) and {need_gpus} GPU(s) ({self.args.instances} x {self.args.gpus_per_instance})"
                )
            await asyncio.sleep(1)

    def _actor_options(self) -> dict[str, Any]:
        # Old Ray versions blank CUDA_VISIBLE_DEVICES in a 0-GPU actor; this opts out where supported.
        return {
            "num_cpus": 0,
            "num_gpus": 0,
            "max_restarts": 0,
            "runtime_env": {"env_vars": {"RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO": "0"}},
        }

    def _new_actor(self, replica: Replica, **options: Any) -> Any:
        import ray

        if self._actor_cls is None:
            self._actor_cls = ray.remote(VllmReplica)
        actor_cls = self._actor_cls
        if self.args.log_dir:
            replica.log_path = os.path.join(os.path.abspath(self.args.log_dir), f"replica-{replica.index}.log")
        return actor_cls.options(**self._actor_options(), **options).remote(
            replica.index, self.args.vllm, self.args.address, os.getcwd(), replica.log_path
        )

    async def _launch(self, replica: Replica) -> None:
        info = await replica.actor.start.remote()
        replica.info, replica.pid = info, info["pid"]
        replica.url = f"http://{info['ip']}:{info['port']}"
        where = f" (log {replica.log_path})" if replica.log_path else ""
        log(f"replica {replica.index}: started pid {replica.pid} at {replica.url}{where}")

    async def start_replicas(self) -> None:
        if self.args.gpus_per_instance > 0:
            for replica in self.replicas:
                await self._start_reserved(replica)
        else:
            for replica in self.replicas:
                replica.actor = self._new_actor(replica, scheduling_strategy="SPREAD")
            await asyncio.gather(*(self._launch(r) for r in self.replicas))

    async def _start_reserved(self, replica: Replica) -> None:
        import ray
        from ray.util.placement_group import placement_group, placement_group_table, remove_placement_group
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        g = self.args.gpus_per_instance
        pg = placement_group([{"GPU": 1}] * g, strategy="PACK", name=f"gym-gateway-reserve-{replica.index}")
        try:
            await asyncio.wait_for(pg.ready(), self.args.cluster_timeout)
        except asyncio.TimeoutError:
            remove_placement_group(pg)
            raise StartupError(f"replica {replica.index}: could not reserve {g} GPU(s) in the Ray cluster") from None
        node_id = placement_group_table(pg)["bundles_to_node_id"][0]
        replica.actor = self._new_actor(
            replica, scheduling_strategy=NodeAffinitySchedulingStrategy(node_id=node_id, soft=False)
        )
        await replica.actor.node.remote()  # the actor is up on that node before the GPUs are released
        known = set(ray.util.placement_group_table())
        remove_placement_group(pg)
        await self._launch(replica)
        # Hand-over: the next reservation waits until this replica holds its GPUs itself.
        deadline = time.monotonic() + self.args.handoff_timeout
        while time.monotonic() < deadline:
            table = ray.util.placement_group_table()
            if any(pid not in known and info.get("state") == "CREATED" for pid, info in table.items()):
                log(f"replica {replica.index}: took over its {g} GPU(s) on node {node_id[:12]}")
                return
            if await replica.actor.poll.remote() is not None:
                raise ReplicaDied(replica, "exited while starting")
            if await self.probe(replica):
                return
            await asyncio.sleep(0.5)
        log(f"replica {replica.index}: no placement group of its own after {self.args.handoff_timeout:g}s; going on")

    async def wait_healthy(self) -> None:
        deadline = time.monotonic() + self.args.startup_timeout

        async def one(replica: Replica) -> None:
            while not await self.probe(replica):
                rc = await self._poll(replica)
                if rc is not None:
                    raise ReplicaDied(replica, f"exited with status {rc} while starting")
                if time.monotonic() > deadline:
                    raise StartupError(f"replica {replica.index}: no healthy /health in {self.args.startup_timeout:g}s")
                await asyncio.sleep(1)
            replica.healthy = True
            log(f"replica {replica.index}: healthy")

        await asyncio.gather(*(one(r) for r in self.replicas))

    async def _poll(self, replica: Replica) -> int | str | None:
        from ray.exceptions import RayError

        try:
            return await asyncio.wait_for(replica.actor.poll.remote(), 60)
        except (RayError, asyncio.TimeoutError) as exc:
            return f"supervisor actor lost ({type(exc).__name__})"

    async def monitor(self) -> None:
        while self.state == "ready":
            for replica in self.replicas:
                rc = await self._poll(replica)
                if rc is not None:
                    raise ReplicaDied(replica, f"exited with status {rc}" if isinstance(rc, int) else str(rc))
            results = await asyncio.gather(*(self.probe(r) for r in self.replicas))
            for replica, ok in zip(self.replicas, results):
                if replica.healthy and not ok:
                    log(f"replica {replica.index}: /health failing")
                replica.healthy = ok
            await asyncio.sleep(self.args.poll_interval)

    async def stop_replicas(self) -> None:
        actors = [r for r in self.replicas if r.actor is not None and r.alive]
        if not actors:
            return
        log(f"stopping {len(actors)} replica(s)")
        calls = [r.actor.stop.remote(self.args.stop_timeout) for r in actors]
        try:
            await asyncio.wait_for(asyncio.gather(*calls, return_exceptions=True), self.args.stop_timeout + 20)
        except asyncio.TimeoutError:
            log("some replicas did not stop in time; their actors are killed with the gateway")

    async def lifecycle(self) -> None:
        try:
            await self.wait_cluster()
            await self.start_replicas()
            await self.wait_healthy()
            self.state = "ready"
            log(f"ready: {len(self.replicas)} replica(s) behind port {self.args.port}")
            await self.monitor()
        except ReplicaDied as exc:
            exc.replica.alive = False
            exc.replica.healthy = False
            exc.replica.exit_reason = exc.reason
            self.state = "failed"
            tail = _tail(exc.replica.log_path)
            log(f"replica {exc.replica.index} (pid {exc.replica.pid}) {exc.reason}: the service is down" + tail)
            await asyncio.sleep(self.args.exit_grace)
            self.exit_code = EXIT_REPLICA_DIED
        except StartupError as exc:
            self.state = "failed"
            log(f"startup failed: {exc}")
            self.exit_code = EXIT_NOT_READY
        finally:
            self.done.set()


class StartupError(Exception):
    pass


class ReplicaDied(Exception):
    def __init__(self, replica: Replica, reason: str) -> None:
        super().__init__(reason)
        self.replica, self.reason = replica, reason


def _tail(path: str | None, lines: int = 20) -> str:
    if not path or not os.path.exists(path):
        return ""
    with open(path, "rb") as fh:
        fh.seek(max(0, os.path.getsize(path) - 8192))
        text = fh.read().decode(errors="replace").splitlines()[-lines:]
    return "\n  last lines of its log:\n  " + "\n  ".join(text)


async def serve(args: argparse.Namespace) -> int:
    import aiohttp
    from aiohttp import web

    gateway = Gateway(args)
    connector = aiohttp.TCPConnector(limit=0, limit_per_host=0)  # the default caps at 100 in flight
    timeout = aiohttp.ClientTimeout(total=None, sock_read=None, connect=None, sock_connect=args.connect_timeout)
    gateway.session = aiohttp.ClientSession(connector=connector, timeout=timeout, auto_decompress=False)
    runner = web.AppRunner(gateway.app(), access_log=None)
    await runner.setup()
    await web.TCPSite(runner, args.host, args.port).start()
    log(f"listening on {args.host}:{args.port}; starting {args.instances} replica(s)")

    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, _on_signal, gateway, sig)
    task = asyncio.create_task(gateway.lifecycle())
    await gateway.done.wait()
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    await gateway.stop_replicas()
    await runner.cleanup()
    await gateway.session.close()
    return gateway.exit_code


def _on_signal(gateway: Gateway, sig: int) -> None:
    log(f"got signal {sig}: shutting down")
    gateway.state = "stopping"
    gateway.exit_code = 128 + sig
    gateway.done.set()


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
