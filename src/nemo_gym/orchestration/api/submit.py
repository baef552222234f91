"""The whole submission, ``SubmitConfig``: the rules that need more than one section (placement,
node pools, GPU footprints, shards, resumability, exports) and the policy model's wiring into
every benchmark's run config."""

from __future__ import annotations

import warnings
from typing import Any

from pydantic import field_validator, model_validator

from nemo_gym.orchestration import contract, rules
from nemo_gym.orchestration.api.compute import AnyComputeConfig, ComputeConfig, LocalComputeConfig, NodePool
from nemo_gym.orchestration.api.driver import BenchmarkRunConfig, DriverConfig
from nemo_gym.orchestration.api.job import JobConfig, OtelConfig
from nemo_gym.orchestration.api.services import (
    PD_TIERS,
    BaseModelServiceConfig,
    BaseServiceConfig,
    RayServiceConfig,
    ServiceConfig,
    VllmPDServiceConfig,
    VllmPDTierConfig,
    VllmServiceConfig,
    effective_ray_serve,
)
from nemo_gym.orchestration.api.strict import _StrictModel
from nemo_gym.orchestration.backends import backend_named
from nemo_gym.orchestration.errors import error_at

# Keys the driver's run config receives from ``driver.policy_model``.
POLICY_RUN_KEYS = ("policy_base_url", "policy_model_name", "policy_api_key")
POLICY_API_KEY = "dummy"


class SubmitConfig(_StrictModel):
    compute: dict[str, ComputeConfig]
    driver: DriverConfig
    job: JobConfig
    otel: OtelConfig = OtelConfig()
    services: dict[str, ServiceConfig]

    _check_service_names = field_validator("services")(rules.named_entries("service"))

    @property
    def deployed_services(self) -> dict[str, BaseServiceConfig]:
        """Every service the job starts, by deployed name, in declaration order; a vllm_pd
        service's prefill and decode tiers come right before it (its router)."""
        return {name: service for name, _, service in self._deployment()}

    def _deployment(self) -> list[tuple[str, str, BaseServiceConfig]]:
        """(deployed name, YAML path, service) of every service the job starts."""
        deployment: list[tuple[str, str, BaseServiceConfig]] = []
        for name, service in self.services.items():
            if isinstance(service, VllmPDServiceConfig):
                for (tier_name, deployed), tier in zip(service.tiers(name).items(), PD_TIERS):
                    deployment.append((tier_name, f"services.{name}.{tier.field}", deployed))
            deployment.append((name, f"services.{name}", service))
        return deployment

    def _service_label(self, name: str) -> str:
        """How messages name a deployed service; a tier also by where it is written."""
        if name in self.services:
            return f"Service '{name}'"
        path = next(path for deployed, path, _ in self._deployment() if deployed == name)
        return f"Service '{name}' ({path})"

    @model_validator(mode="after")
    def _resolve_and_validate_placements(self) -> SubmitConfig:
        compute_name, compute = self._sole_compute()
        # What its backend cannot run at all is said first, before rules about what it could.
        problem = backend_named(compute.type).config_problem(self, compute_name)
        if problem is not None:
            raise error_at(*problem)
        node_pools = compute.node_pools
        total_nodes = sum(pool.nodes for pool in node_pools.values())
        self._check_tier_names_are_free()
        deployment = self._deployment()
        for name, path, service in deployment:
            self._resolve_placement(name, service, compute_name, path)
            self._check_pools_exist(name, service, compute_name, node_pools, path)
            if isinstance(service, VllmPDTierConfig):
                self._check_tier_has_a_pool(path, service, compute_name, compute)
            if isinstance(service, VllmServiceConfig):
                self._check_vllm_shape(name, service, node_pools, total_nodes, path)
        self._check_routers_beside_driver(list(node_pools))
        if rules.pools_differ(node_pools):
            self._check_each_service_fits_one_component(deployment, node_pools)
        rules.check_port_clashes(
            self.deployed_services,
            list(node_pools),
            self.driver.policy_model,
            self.otel.enabled,
            paths={name: path for name, path, _ in deployment},
        )
        if self.job.deployment != "per_benchmark" and contract.SHARED_DEPLOYMENT_DIR in self.driver.benchmarks:
            raise ValueError(
                f"driver.benchmarks: with job.deployment: {self.job.deployment} the name '{contract.SHARED_DEPLOYMENT_DIR}' is the "
                f"shared job's own directory; rename that benchmark"
            )
        self._check_resumable(compute_name, compute)
        self._check_shards()
        self._wire_policy_model()
        self._check_exports()
        return self

    def shards_of(self, benchmark: str) -> int:
        """How many shards a benchmark runs in: its own ``shards``, else ``job.shards``."""
        own = self.driver.benchmarks[benchmark].shards
        return self.job.shards if own is None else own

    def _check_shards(self) -> None:
        for name, bench in self.driver.benchmarks.items():
            shards = self.shards_of(name)
            if shards == 1:
                continue
            where = f"driver.benchmarks.{name}.shards" if bench.shards is not None else "job.shards"
            said = f"is {shards}"
            if self.job.deployment != "per_benchmark":
                raise error_at(
                    where,
                    f"{said}, but job.deployment: {self.job.deployment} runs every benchmark in one job, and each shard is a "
                    f"job with its own deployment; use job.deployment: per_benchmark or drop shards",
                )
            if bench.command is not None:
                raise error_at(
                    where,
                    f"{said}, but driver.benchmarks.{name} runs its own command, whose inputs gym does not "
                    f"prepare; drop shards for it (shards: 1) or drop command",
                )
            if bench.resume_config is not None:
                raise error_at(
                    where,
                    f"{said}, but driver.benchmarks.{name} is resumable, and a sharded benchmark is not "
                    f"resumed yet; drop resumable (gym eval resubmit still reruns a failed shard) or shards",
                )
            limit = bench.run.get("limit")
            if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
                raise error_at(
                    f"driver.benchmarks.{name}.run.limit",
                    f"is {limit!r}, but a sharded benchmark's shards take their slices of the first `limit` "
                    f"tasks, which needs a whole number (0: all of them)",
                )
            if any(ch in self.job.output_path for ch in ",*?["):
                raise error_at(
                    "job.output_path",
                    f"holds one of , * ? [, but the shards of {name} are merged by a glob of their "
                    f"directories under it; choose an output path without them",
                )

    def exports_of(self, benchmark: str) -> dict[str, dict[str, Any]]:
        """The exporters a benchmark's job runs, ``job.export`` merged with its own ``export``."""
        from nemo_gym.orchestration.exporters.spec import merge_exporters

        return merge_exporters(self.job.export, self.driver.benchmarks[benchmark].export)

    def _check_exports(self) -> None:
        from nemo_gym.orchestration.exporters.spec import settings_problems

        for problem in settings_problems({k: v for k, v in self.job.export.items() if v is not None}):
            raise error_at(f"job.{problem.split(': ', 1)[0]}", problem.split(": ", 1)[1])
        for name, bench in self.driver.benchmarks.items():
            if bench.export is None:
                continue
            for problem in settings_problems(self.exports_of(name)):
                raise error_at(f"driver.benchmarks.{name}.{problem.split(': ', 1)[0]}", problem.split(": ", 1)[1])

    def _check_each_service_fits_one_component(
        self, deployment: list[tuple[str, str, BaseServiceConfig]], node_pools: dict[str, NodePool]
    ) -> None:
        """In a heterogeneous job each pool is a component of its own, and one step (srun) runs in
        one component: a vLLM service must say which pool it runs on."""
        for _, path, service in deployment:
            if isinstance(service, VllmServiceConfig) and service.node_pool is None:
                raise error_at(
                    f"{path}.node_pool",
                    f"is not set, but the node pools differ on {rules.disagreement(node_pools)}, so each "
                    f"pool is a component of a heterogeneous job and a service runs within one; set "
                    f"{path}.node_pool to one of {', '.join(node_pools)}",
                )

    def _check_resumable(self, compute_name: str, compute: AnyComputeConfig) -> None:
        resumable = [name for name, bench in self.driver.benchmarks.items() if bench.resume_config is not None]
        if not resumable:
            return
        names = ", ".join(f"driver.benchmarks.{name}.resumable" for name in resumable)
        if not backend_named(compute.type).supports_resume:
            raise ValueError(
                f"{names}: compute '{compute_name}' is {compute.type}, whose jobs are not resumed (only Slurm's "
                f"queue their successors as they near their walltime); drop resumable or submit to a Slurm compute"
            )
        if self.job.deployment != "per_benchmark":
            raise ValueError(
                f"{names}: job.deployment: {self.job.deployment} runs every benchmark in one job, and a job is resumed as "
                f"a whole; use job.deployment: per_benchmark or drop resumable"
            )

    # -- placement ---------------------------------------------------------------------------

    def _sole_compute(self) -> tuple[str, AnyComputeConfig]:
        if not self.compute:
            raise ValueError(
                "compute: no compute resource is declared; add one, e.g. compute: {cluster: {type: slurm, account: ...}}"
            )
        if len(self.compute) > 1:
            raise ValueError(
                f"Multiple compute resources are not supported yet ({', '.join(self.compute)}); keep one under compute."
            )
        return next(iter(self.compute.items()))

    @staticmethod
    def _resolve_placement(name: str, service: BaseServiceConfig, compute_name: str, path: str) -> None:
        if service.placement is None:
            service.placement = compute_name
        elif service.placement != compute_name:
            raise ValueError(
                f"Service '{name}' placement '{service.placement}' does not match any compute "
                f"resource ({compute_name}); set {path}.placement to '{compute_name}' or remove it."
            )

    @staticmethod
    def _check_pools_exist(
        name: str, service: BaseServiceConfig, compute_name: str, node_pools: dict[str, NodePool], path: str
    ) -> None:
        declared = ", ".join(node_pools) or "none declared"
        if isinstance(service, RayServiceConfig):
            unknown = [p for p in service.node_pools if p not in node_pools]
            if unknown:
                raise ValueError(
                    f"Service '{name}' node_pools {unknown} do not match any node pool of compute "
                    f"'{compute_name}' ({declared}); fix {path}.node_pools."
                )
        if service.node_pool is not None and service.node_pool not in node_pools:
            raise ValueError(
                f"Service '{name}' node_pool '{service.node_pool}' does not match any node pool of "
                f"compute '{compute_name}' ({declared}); fix {path}.node_pool."
            )

    # -- prefill/decode ----------------------------------------------------------------------

    def _check_tier_names_are_free(self) -> None:
        for name, service in self.services.items():
            if not isinstance(service, VllmPDServiceConfig):
                continue
            tier_names = list(service.tiers(name))
            taken = [tier for tier in tier_names if tier in self.services]
            if taken:
                raise error_at(
                    f"services.{name}",
                    f"a vllm_pd service deploys its tiers as {' and '.join(tier_names)}, but "
                    f"services.{taken[0]} already exists; rename one of the two services",
                )

    @staticmethod
    def _check_tier_has_a_pool(path: str, tier: VllmPDTierConfig, compute_name: str, compute: AnyComputeConfig) -> None:
        if tier.node_pool is not None:
            return
        if isinstance(compute, LocalComputeConfig):  # a question of the config's shape: it declares no pools
            fix = f"compute '{compute_name}' is local, which has no node pools; submit to a Slurm compute"
        elif compute.node_pools:
            pools = ", ".join(compute.node_pools)
            fix = f"pin it to one of compute '{compute_name}''s node pools ({pools})"
        else:
            fix = f"declare node_pools under compute.{compute_name} and pin each tier to one"
        raise error_at(f"{path}.node_pool", f"a prefill/decode tier needs nodes of its own, but none is set; {fix}")

    def _check_routers_beside_driver(self, pool_names: list[str]) -> None:
        """The router is started on the driver's node; pinned anywhere else, it would not run there."""
        driver_pool = rules.driver_pool_name(self.services, self.driver.policy_model, pool_names)
        for name, service in self.services.items():
            if isinstance(service, VllmPDServiceConfig) and service.node_pool not in (None, driver_pool):
                raise error_at(
                    f"services.{name}.node_pool",
                    f"is '{service.node_pool}', but a vllm_pd service's router runs on the driver's node, "
                    f"which is on node pool '{driver_pool}'; pin it to '{driver_pool}' or remove node_pool",
                )

    # -- vLLM shapes -------------------------------------------------------------------------

    def _check_vllm_shape(
        self,
        name: str,
        service: VllmServiceConfig,
        node_pools: dict[str, NodePool],
        total_nodes: int,
        path: str,
    ) -> None:
        pools = {service.node_pool: node_pools[service.node_pool]} if service.node_pool else node_pools
        service_nodes = sum(p.nodes for p in pools.values()) or total_nodes
        gpus = [p.gpus_per_node for p in pools.values() if p.gpus_per_node is not None]
        n = service.number_of_instances
        if isinstance(service, VllmPDTierConfig) and service.server_per_node:
            if n != 1:
                raise error_at(
                    f"{path}.number_of_instances",
                    f"is {n}, but with server_per_node each node of the tier's pool runs one server, "
                    f"which is one instance; set it to 1 (or remove it), or turn server_per_node off",
                )
            service_nodes = 1  # each node is checked as a deployment of its own
        is_ray_serve = effective_ray_serve(service, service_nodes, gpus)
        if service_nodes > 1 and n > 1 and n % service_nodes != 0 and not is_ray_serve:
            raise ValueError(
                f"{self._service_label(name)} has number_of_instances={n}, which must be evenly divisible by the "
                f"number of nodes ({service_nodes}) for multi-node data-parallel deployment - each node "
                f"hosts an equal share of the data-parallel replicas."
            )
        self._validate_vllm_gpu_footprint(name, service, service_nodes, pools, gpus, is_ray_serve)

    def _validate_vllm_gpu_footprint(
        self,
        service_name: str,
        service: VllmServiceConfig,
        total_nodes: int,
        node_pools: dict[str, NodePool],
        gpus_per_node_values: list[int],
        is_ray_serve: bool,
    ) -> None:
        if not gpus_per_node_values:
            return  # no pool says how many GPUs it has: nothing to check against
        compute_name = service.placement
        tp_pp = service.tensor_parallel_size * service.pipeline_parallel_size
        n = service.number_of_instances
        shape = f"tensor_parallel_size={service.tensor_parallel_size} x pipeline_parallel_size={service.pipeline_parallel_size}"
        all_gpus = sum(p.nodes * (p.gpus_per_node or 0) for p in node_pools.values())
        one_node = max(gpus_per_node_values)
        if total_nodes > 1 and is_ray_serve:
            needed, available = tp_pp * n, all_gpus
            footprint = f"{shape} x number_of_instances={n} (ray_serve gateway)"
            scope = f"the total GPUs across all nodes ({available})"
        elif total_nodes > 1 and n > 1:
            per_node = n // total_nodes
            needed, available = tp_pp * per_node, one_node
            footprint = f"{shape} x {per_node} instance(s) per node"
            scope = f"a single node's gpus_per_node ({available})"
        elif total_nodes > 1:
            needed, available = tp_pp, all_gpus
            footprint = shape
            scope = f"the total GPUs across all nodes ({available})"
        else:
            needed, available = tp_pp * n, one_node
            footprint = f"{shape} x number_of_instances={n}"
            scope = f"the node pool's gpus_per_node ({available})"
        if needed > available:
            raise ValueError(
                f"{self._service_label(service_name)} requires {needed} GPUs ({footprint}), which exceeds {scope} "
                f"on compute '{compute_name}'. Reduce number_of_instances/tensor_parallel_size/"
                f"pipeline_parallel_size, or add more nodes/GPUs."
            )
        if needed < available:
            warnings.warn(
                f"{self._service_label(service_name)} uses {needed} of {available} GPUs ({footprint}), leaving "
                f"{available - needed} GPU(s) idle on compute '{compute_name}'; raise "
                f"tensor_parallel_size or number_of_instances to use them.",
                UserWarning,
                stacklevel=2,
            )

    # -- policy model ------------------------------------------------------------------------

    def _wire_policy_model(self) -> None:
        wiring = self._policy_wiring()
        for bench_name, bench in self.driver.benchmarks.items():
            self._check_command_runs_alone(bench_name, bench, wiring)
            if not wiring:
                continue
            # Identical values are what an earlier validation injected (--resolve-only output fed
            # back in), so only a different value is a conflict.
            clashing = [k for k in POLICY_RUN_KEYS if k in bench.run and bench.run[k] != wiring[k]]
            if clashing:
                raise ValueError(
                    f"Benchmark '{bench_name}' run config already sets {clashing} but "
                    f"driver.policy_model is also set. Remove one."
                )
            bench.run.update(wiring)

    def _policy_wiring(self) -> dict[str, str]:
        """The run keys ``driver.policy_model`` gives every benchmark; none without a model endpoint.

        A ``command`` benchmark gets them too: they are how its script learns the endpoint.
        """
        name = self.driver.policy_model
        if name is None:
            return {}
        if name not in self.services:
            raise ValueError(self._unknown_policy_model(name))
        service = self.services[name]
        if not isinstance(service, BaseModelServiceConfig):
            return {}  # a ray cluster serves no model endpoint of its own
        return {
            "policy_base_url": f"http://{self.driver.policy_host}:{service.port}/v1",
            "policy_model_name": service.served_model_name or service.model,
            "policy_api_key": POLICY_API_KEY,
        }

    def _unknown_policy_model(self, name: str) -> str:
        for pd_name, service in self.services.items():
            if isinstance(service, VllmPDServiceConfig) and name in service.tiers(pd_name):
                return (
                    f"driver.policy_model: '{name}' is a tier of vllm_pd service '{pd_name}', whose router "
                    f"is the endpoint for both tiers; set driver.policy_model to '{pd_name}'"
                )
        return (
            f"driver.policy_model '{name}' does not match any service "
            f"({', '.join(self.services) or 'none declared'}); name one of the services."
        )

    @staticmethod
    def _check_command_runs_alone(bench_name: str, bench: BenchmarkRunConfig, wiring: dict[str, str]) -> None:
        """``run`` only configures ``gym eval run``, which ``command`` replaces.

        The policy wiring in ``run`` is not the user's setting (it is injected, or written back by
        an earlier validation, and the command reads it as NEMO_GYM_POLICY_* env), so only keys
        that differ from it count.
        """
        if bench.command is None:
            return
        settings = [k for k, v in bench.run.items() if not (k in wiring and v == wiring[k])]
        if settings:
            raise error_at(
                f"driver.benchmarks.{bench_name}.command",
                f"replaces `gym eval run`, but run sets {settings}, which only `gym eval run` reads; "
                f"fold those settings into the command, or drop command",
            )
