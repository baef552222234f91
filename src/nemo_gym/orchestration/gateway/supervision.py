"""The replicas' side of the gateway: the Ray cluster waited for, one supervised `vllm serve` per
replica started (with GPUs reserved and handed over one replica at a time), their health watched,
and the whole service failed when one of them dies."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from dataclasses import dataclass, field
from typing import Any

from nemo_gym.orchestration.gateway.replica import VllmReplica

EXIT_USAGE = 2
EXIT_REPLICA_DIED = 3
EXIT_NOT_READY = 4
EXIT_NO_CLUSTER = 5


def log(message: str) -> None:
    print(f"[gateway {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


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


class StartupError(Exception):
    pass


class ReplicaDied(Exception):
    def __init__(self, replica: Replica, reason: str) -> None:
        super().__init__(reason)
        self.replica, self.reason = replica, reason


class Supervisor:
    """The replicas and the service's state, which the proxy reads to route and answer /health."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.replicas = [Replica(i) for i in range(args.instances)]
        self.state = "starting"  # starting -> ready -> failed | stopping
        self.done = asyncio.Event()
        self.exit_code = 0
        self.session: Any = None
        self._actor_cls: Any = None

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
            # Ray's workers cannot import this package (it lives in the job directory, not in their
            # environment): the actor's module travels with the actor, as the script's own did.
            ray.cloudpickle.register_pickle_by_value(sys.modules[VllmReplica.__module__])
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
        except Exception as exc:  # noqa: BLE001 - whatever Ray raised (an actor that never started): never exit 0
            served = self.state == "ready"
            self.state = "failed"
            log(f"{'the service failed' if served else 'startup failed'}: {type(exc).__name__}: {str(exc)[:500]}")
            self.exit_code = EXIT_REPLICA_DIED if served else EXIT_NOT_READY
        finally:
            self.done.set()


def _tail(path: str | None, lines: int = 20) -> str:
    if not path or not os.path.exists(path):
        return ""
    with open(path, "rb") as fh:
        fh.seek(max(0, os.path.getsize(path) - 8192))
        text = fh.read().decode(errors="replace").splitlines()[-lines:]
    return "\n  last lines of its log:\n  " + "\n  ".join(text)
