"""Where a job runs: the compute models (Slurm and its node pools, this machine, Kubernetes), each
checked by its backend's own rules."""

from __future__ import annotations

from typing import Annotated, Literal, TypeAlias

from pydantic import Discriminator, Tag, field_validator, model_validator

from nemo_gym.orchestration import rules
from nemo_gym.orchestration.api.strict import _StrictModel
from nemo_gym.orchestration.backends import kubernetes_rules, slurm_rules
from nemo_gym.orchestration.errors import error_at


class BaseComputeConfig(_StrictModel):
    pass


class NodePool(_StrictModel):
    extra_args: dict[str, str] = {}
    gpus_per_node: int | None = None
    nodes: int = 1
    ntasks_per_node: int = 1
    partition: str

    _check_counts = field_validator("nodes", "ntasks_per_node")(rules.positive)
    _check_gpus = field_validator("gpus_per_node")(rules.optional_gpus)
    _check_partition = field_validator("partition")(slurm_rules.slurm_word)
    _check_extra_args = field_validator("extra_args")(slurm_rules.slurm_options)


class SlurmComputeConfig(BaseComputeConfig):
    type: Literal["slurm"]
    account: str
    extra_args: dict[str, str] = {}
    hostname: str | None = None
    node_pools: dict[str, NodePool] = {}
    walltime: str | None = None
    # Extension beyond the spec: how steps get their container. Pyxis (``srun --container-image``)
    # is the default; most academic clusters have Apptainer instead; ``none`` runs on the host.
    container_runtime: Literal["pyxis", "apptainer", "none"] = "pyxis"
    # Extension beyond the spec: whether each job asks for its nodes whole (Slurm's ``--exclusive``).
    # Unset (auto): a job of one node whose servers all get their ports when it starts (ports.py:
    # vLLM's, a prefill/decode pair's and its router's, the collector's, gym's head server's)
    # shares its node; any other job takes its nodes whole, since some of its servers bind fixed
    # ports (multi-node jobs, Ray: see plan/ports.py). ``true``/``false`` are honoured as written; a fixed port another job holds
    # then fails the step at once, named, instead of serving the wrong model.
    exclusive_nodes: bool | None = None

    _check_account = field_validator("account")(slurm_rules.slurm_word)
    _check_extra_args = field_validator("extra_args")(slurm_rules.slurm_options)
    _check_walltime = field_validator("walltime")(slurm_rules.optional_walltime)
    _check_hostname = field_validator("hostname")(rules.optional_hostname)
    _check_pool_names = field_validator("node_pools")(rules.named_entries("node pool"))

    @model_validator(mode="after")
    def _pools_share_one_allocation(self) -> SlurmComputeConfig:
        """Pools that differ make a heterogeneous job: one component per pool. What Slurm cannot
        do with one is refused here."""
        if not rules.pools_differ(self.node_pools):
            return self
        for where, args in [("extra_args", self.extra_args)] + [
            (f"node_pools.{name}.extra_args", pool.extra_args) for name, pool in self.node_pools.items()
        ]:
            for option in slurm_rules.NOT_FOR_HETEROGENEOUS_JOBS:
                if option in args:
                    raise error_at(
                        f"{where}.{option}",
                        f"the node pools differ on {rules.disagreement(self.node_pools)}, so the job is a "
                        f"heterogeneous Slurm job, and Slurm has no job arrays of those; drop {option} or "
                        f"make the pools agree",
                    )
        return self


class LocalComputeConfig(BaseComputeConfig):
    """Extension beyond the spec: the same job on this machine, each step a local process.

    No scheduler, no containers, one node: for laptops, workstations and CI. Benchmarks of a run
    go one after another, since they would share the machine's ports and GPUs.
    """

    type: Literal["local"]

    @property
    def node_pools(self) -> dict[str, NodePool]:
        return {}

    @property
    def hostname(self) -> None:
        return None

    @property
    def container_runtime(self) -> Literal["none"]:
        return "none"


class KubernetesComputeConfig(BaseComputeConfig):
    """Extension beyond the spec: one Job per benchmark on a Kubernetes cluster, the
    shape of upstream's ``KubernetesComputeConfig`` (main branch, v1): field names, types and
    defaults are its own.

    One pod per job (single node): the model services run as native sidecars, the driver as the
    pod's one container, every container mounting ``pvc_name`` at ``job.output_path``.
    """

    type: Literal["kubernetes"]
    context: str | None = None  # the kubeconfig context; None: its current one
    namespace: str = "default"
    gpus_per_node: int | None = None  # the most GPUs one pod may ask for; None: not checked
    node_selector: dict[str, str] = {}
    service_account: str | None = None
    pvc_name: str  # mounted at job.output_path in every container; the submit host sees it there too
    memory_per_gpu: str = "32Gi"  # requested per GPU, so that a GPU pod is not BestEffort
    extra_args: dict[str, dict[str, str]] = {}  # labels and annotations for the Job and its pod
    ttl_seconds_after_finished: int | None = 86400
    active_deadline_seconds: int | None = None

    _check_context = field_validator("context")(kubernetes_rules.optional_context)
    _check_names = field_validator("namespace", "pvc_name")(kubernetes_rules.dns_label)
    _check_account = field_validator("service_account")(kubernetes_rules.optional_dns_label)
    _check_gpus = field_validator("gpus_per_node")(rules.optional_gpus)
    _check_selector = field_validator("node_selector")(kubernetes_rules.node_selector)
    _check_memory = field_validator("memory_per_gpu")(kubernetes_rules.quantity)
    _check_extra_args = field_validator("extra_args")(kubernetes_rules.extra_args)
    _check_ttl = field_validator("ttl_seconds_after_finished")(kubernetes_rules.optional_int32_seconds)
    _check_deadline = field_validator("active_deadline_seconds")(kubernetes_rules.optional_int64_seconds)

    @property
    def node_pools(self) -> dict[str, NodePool]:
        return {}  # one implicit pool: the pod's node

    @property
    def hostname(self) -> None:
        return None  # its client runs where gym does, with the user's kubeconfig

    @property
    def container_runtime(self) -> Literal["none"]:
        return "none"  # each step already runs in its own container of the pod


ComputeConfig = Annotated[
    Annotated[SlurmComputeConfig, Tag("slurm")]
    | Annotated[LocalComputeConfig, Tag("local")]
    | Annotated[KubernetesComputeConfig, Tag("kubernetes")],
    Discriminator("type"),
]
# What a validated ``ComputeConfig`` is: the type where the config meets its backend.
AnyComputeConfig: TypeAlias = SlurmComputeConfig | LocalComputeConfig | KubernetesComputeConfig
