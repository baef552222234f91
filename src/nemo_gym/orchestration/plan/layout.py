"""Which nodes of the allocation each pool, service and step gets, and how a step is launched there."""

from __future__ import annotations

from dataclasses import dataclass

from nemo_gym.orchestration.api import BaseServiceConfig, SubmitConfig
from nemo_gym.orchestration.plan.model import Launch, NodeSlice
from nemo_gym.orchestration.rules import pools_differ


@dataclass(frozen=True)
class Layout:
    node_count: int
    pools: dict[str, NodeSlice]
    driver_node: int
    gpu_count: int  # GPUs of the whole allocation
    pool_gpus: dict[str, int]  # GPUs per node, by pool
    # Pools that differ make a heterogeneous job whose components are the pools, in order.
    heterogeneous: bool

    @classmethod
    def of(cls, config: SubmitConfig) -> Layout:
        compute = next(iter(config.compute.values()))
        pools: dict[str, NodeSlice] = {}
        start = 0
        for name, pool in compute.node_pools.items():
            pools[name] = NodeSlice(start, pool.nodes)
            start += pool.nodes
        node_count = max(start, 1)
        policy = config.services.get(config.driver.policy_model or "")
        pinned = getattr(policy, "node_pool", None)
        driver_node = pools[pinned].start if pinned else 0
        pool_gpus = {name: pool.gpus_per_node or 0 for name, pool in compute.node_pools.items()}
        gpu_count = sum(p.nodes * pool_gpus[name] for name, p in compute.node_pools.items())
        return cls(
            node_count=node_count,
            pools=pools,
            driver_node=driver_node,
            gpu_count=gpu_count,
            pool_gpus=pool_gpus,
            heterogeneous=pools_differ(compute.node_pools),
        )

    def pool_of(self, node: int) -> str | None:
        return next((name for name, nodes in self.pools.items() if node in nodes.indices), None)

    def component_of(self, nodes: NodeSlice) -> int | None:
        """The heterogeneous job's component that holds these nodes (validation keeps a step in one)."""
        if not self.heterogeneous:
            return None
        names = list(self.pools)
        first, last = self.pool_of(nodes.start), self.pool_of(nodes.last)
        assert first is not None and first == last, f"nodes {nodes} span components"
        return names.index(first)

    def has_gpus(self, nodes: NodeSlice) -> bool:
        pools = {pool for pool in (self.pool_of(i) for i in nodes.indices) if pool is not None}
        return any(self.pool_gpus[p] for p in pools)

    def service_nodes(self, service: BaseServiceConfig) -> NodeSlice:
        if service.node_pool is not None:
            return self.pools[service.node_pool]
        return NodeSlice(0, self.node_count)

    def launch(self, job_dir: str, step: str, nodes: NodeSlice, service: BaseServiceConfig) -> Launch:
        return Launch(
            step,
            job_dir,
            nodes,
            service.container,
            tuple(service.mounts),
            self.has_gpus(nodes),
            component=self.component_of(nodes),
        )
