"""Kubernetes: one ``batch/v1`` Job per job, one pod each (single node).

The pod runs the same job script as everywhere else, as its one regular container (``driver``,
in the driver's image): it waits for the services, runs the driver, watches, records its state
and exports, on the PVC mounted at ``job.output_path``. Each model service's step runs in a
native sidecar of its own (an init container with ``restartPolicy: Always``, in the service's
image, with its GPUs and a readiness probe from its health check); in the job script a sidecar's
step stands as the wait for its exit marker, so a service that dies fails the job as it does
under Slurm. The submit host reads the run directory where the PVC is mounted for it too, as a
Slurm login node reads the cluster's shared filesystem.

kubectl is the only client: ``kubectl apply`` queues, ``kubectl get`` answers the status probe
(one call per namespace for every job), ``kubectl delete`` cancels, and a Job created suspended
and then unsuspended is a held job for ``gym eval resubmit``. The Job's manifest is built in
``kubernetes_manifest.py``.
"""

from __future__ import annotations

import json
import posixpath
import shlex
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from nemo_gym.orchestration import contract
from nemo_gym.orchestration.backends.base import (
    CANCELLED_BY_USER,
    Backend,
    JobProbe,
    JobState,
    JobToQueue,
    SchedulerView,
    recorded_outcome,
    running_state,
    unanswered_state,
)
from nemo_gym.orchestration.backends.base import (
    UNANSWERED as UNANSWERED_WORD,
)
from nemo_gym.orchestration.backends.kubernetes_manifest import (
    DEADLINE_ENV,
    DRIVER_CONTAINER,
    MANAGED_BY,
    Settings,
    job_name,
    manifest_text,
    service_gpus,
    step_gpus,
)
from nemo_gym.orchestration.backends.kubernetes_rules import object_name
from nemo_gym.orchestration.contract import Phase, Status

if TYPE_CHECKING:
    from nemo_gym.orchestration.api import AnyComputeConfig, SubmitConfig
    from nemo_gym.orchestration.plan.model import JobPlan, RunPlan

APPLY_TIMEOUT_SECONDS = 60
REQUEST_TIMEOUT = "30s"
# The Job's conditions that end it; the others (SuccessCriteriaMet, FailureTarget: 1.31 on) do not.
FINAL_CONDITIONS = ("Complete", "Failed")
FAILING_CONDITION = "FailureTarget"  # 1.31 on: failed, its pod still being ended
# The Job's Failed reason when activeDeadlineSeconds ended it: its walltime.
DEADLINE_REASON = "DeadlineExceeded"
# A TERM this close to the deadline (seconds, counted from the job script's start, which comes a
# little after the Job's) is taken as the deadline's.
DEADLINE_MARGIN_SECONDS = 120
# What kubectl answers of the jobs (one line each, tab-separated), and of their pods.
JOB_FIELDS = (
    "{.metadata.name}",
    "{.spec.suspend}",
    "{.status.active}",
    "{.status.ready}",
    "{.status.startTime}",
    '{.status.conditions[?(@.status=="True")].type}',
    '{.status.conditions[?(@.status=="True")].reason}',
)
POD_FIELDS = (
    "{.metadata.labels.job-name}",
    "{.status.phase}",
    "{.status.initContainerStatuses[*].state.waiting.reason} {.status.containerStatuses[*].state.waiting.reason}",
    '{.status.conditions[?(@.type=="PodScheduled")].reason}',
)
UNANSWERED = "?"  # the snapshot's word for a job kubectl could not be asked about


def jsonpath(fields: tuple[str, ...]) -> str:
    """kubectl's ``-o jsonpath`` template: one tab-separated line per item."""
    return "{range .items[*]}" + '{"\\t"}'.join(fields) + '{"\\n"}{end}'


class KubernetesBackend(Backend):
    name: ClassVar[str] = "kubernetes"
    job_kind: ClassVar[str] = "Kubernetes Job"
    # A Job's name: a DNS-1123 label (ours are made by kubernetes_rules.object_name).
    job_id_pattern: ClassVar[str] = r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?"
    submit_command: ClassVar[str] = "kubectl apply"
    cancel_command: ClassVar[str] = "kubectl delete job"
    scheduler_name: ClassVar[str] = "Kubernetes"
    # Its services are the pod's sidecar containers: the job script waits for them, never starts them.
    restarts_services: ClassVar[bool] = False

    # -- what it runs -----------------------------------------------------------------------------

    def config_problem(self, config: SubmitConfig, compute_name: str) -> tuple[str, str] | None:
        return unsupported(config, compute_name)

    def config_warnings(self, config: SubmitConfig, compute_name: str, environ: Mapping[str, str]) -> list[str]:
        return credentials_left_behind(config, compute_name, environ)

    # -- planning ---------------------------------------------------------------------------------

    def directives(
        self, compute: AnyComputeConfig, benchmark: str, job_dir: str
    ) -> tuple[tuple[tuple[str, str | None], ...], ...]:
        settings = compute.model_dump()
        extra = settings.get("extra_args") or {}
        counted = ("ttl_seconds_after_finished", "active_deadline_seconds")
        options: list[tuple[str, str | None]] = [
            ("namespace", settings["namespace"]),
            ("pvc", settings["pvc_name"]),
            ("memory_per_gpu", settings["memory_per_gpu"]),
            ("context", settings["context"]),
            ("service_account", settings["service_account"]),
            ("node_selector", json.dumps(settings["node_selector"], sort_keys=True)),
            *((key, None if settings[key] is None else str(settings[key])) for key in counted),
            ("labels", json.dumps(extra.get("labels", {}), sort_keys=True)),
            ("annotations", json.dumps(extra.get("annotations", {}), sort_keys=True)),
        ]
        return (tuple(options),)

    def job_id_attributes(self) -> tuple[tuple[str, str], ...]:
        return (("k8s.job.name", "GYM_JOB_ID"),)

    # -- rendering --------------------------------------------------------------------------------

    def node_host(self, node: int) -> str:
        return "localhost"  # one pod: its containers share one network namespace

    def run_files(self, plan: RunPlan) -> dict[str, str]:
        return {
            posixpath.join(posixpath.relpath(job.job_dir, plan.run_dir), contract.JOB_MANIFEST): manifest_text(
                plan, job
            )
            for job in plan.submitted_jobs
        }

    # -- submission -------------------------------------------------------------------------------

    def queue_facts(self, job: JobPlan) -> dict[str, str]:
        return Settings.of(job).where()

    def job_to_queue(self, plan: RunPlan, job: JobPlan, fed_by: str | None) -> JobToQueue:
        # Its name is its id (a refusal is kubectl's own words); where it goes, kubectl's flags.
        words = {"name": job_name(plan, job), "flags": " ".join(kubectl_flags(Settings.of(job).where()))}
        return JobToQueue(job.unit, job.job_dir, fed_by, words=words)

    def allocated_gpus(self, plan: RunPlan) -> dict[str, int]:
        return {job.unit: sum(step_gpus(plan, step.service) for step in job.steps) for job in plan.submitted_jobs}

    # -- resubmit ---------------------------------------------------------------------------------

    def requeued_id(self, first_id: str, attempt: int) -> str:
        # The first id is read back from a record: made a name again, cut so that the suffix fits.
        suffix = f"-a{attempt}"
        return object_name(first_id, room=len(suffix)) + suffix

    # -- status -----------------------------------------------------------------------------------

    def describe(self, answer: list[str]) -> SchedulerView:
        return describe_answer(answer)

    def job_state(self, job_id: str, probe: JobProbe, rollouts: int, facts: dict[str, str]) -> JobState:
        return job_state(job_id, probe, rollouts)

    def template_vars(self) -> dict[str, object]:
        return {
            "job_fields": jsonpath(JOB_FIELDS),
            "pod_fields": jsonpath(POD_FIELDS),
            "managed_by": "=".join(MANAGED_BY),
            "kubectl_flags": lambda where: " ".join(kubectl_flags(where)),
            "unanswered": UNANSWERED,
            "deadline_env": DEADLINE_ENV,
            "deadline_margin": DEADLINE_MARGIN_SECONDS,
            "job_id_ere": self.job_id_pattern,
            "apply_timeout": APPLY_TIMEOUT_SECONDS,
        }


def kubectl_flags(where: Mapping[str, str]) -> list[str]:
    """kubectl's flags for where a job is queued (a record's ``queued_as``), shell-quoted."""
    flags = []
    if where.get("context"):
        flags.append(f"--context={shlex.quote(where['context'])}")
    flags.append(f"--namespace={shlex.quote(where.get('namespace') or 'default')}")
    flags.append(f"--request-timeout={REQUEST_TIMEOUT}")
    return flags


# -- status (pure) ----------------------------------------------------------------------------------


def describe_answer(answer: list[str]) -> SchedulerView:
    """A job's ``SchedulerView`` from its snapshot line: the Job's fields (``JOB_FIELDS`` after the
    name), then its pod's (``POD_FIELDS`` after the job name)."""
    if answer[:1] == [UNANSWERED]:
        return SchedulerView(word=UNANSWERED_WORD, reason="kubectl could not reach the cluster")
    fields = (answer + [""] * 9)[:9]
    suspend, active, ready, started, types, reasons, pod_phase, waiting, unscheduled = fields
    if not any(fields):
        return SchedulerView()  # Kubernetes does not know it (deleted, or removed after its ttl)
    conditions, said = types.split(), reasons.split()
    # A condition without a reason would shift the others': then none is trusted.
    reason_of = dict(zip(conditions, said)) if len(said) == len(conditions) else {}
    final = next((c for c in conditions if c in FINAL_CONDITIONS), "")
    waiting_reason = " ".join(dict.fromkeys(waiting.split()))
    if final:
        return SchedulerView(word=final, reason=reason_of.get(final, ""))
    if FAILING_CONDITION in conditions:
        # 1.31 on: the failure is decided, the pod is being ended.
        return SchedulerView(word=FAILING_CONDITION, running=True, reason=reason_of.get(FAILING_CONDITION, ""))
    if suspend == "true":
        return SchedulerView(word="Suspended", waiting=True, reason="suspended")
    if not started or (pod_phase in ("", "Pending") and unscheduled == "Unschedulable"):
        return SchedulerView(word="Pending", waiting=True, reason=unscheduled or "waiting for a node")
    if _count(active) > 0 and pod_phase:
        word = "Running" if _count(ready) > 0 else "Starting"
        return SchedulerView(word=word, running=True, reason=waiting_reason)
    return SchedulerView(
        word=pod_phase or "Pending",
        waiting=True,
        reason=waiting_reason or "Kubernetes has made no pod for it yet (kubectl describe job says why)",
    )


def _count(text: str) -> int:
    return int(text) if text.isdigit() else 0


def job_state(job_id: str, probe: JobProbe, rollouts: int) -> JobState:
    view = probe.scheduler
    if probe.cancelled_by_user and probe.phase != Phase.SUCCEEDED and not view.running:
        return CANCELLED_BY_USER
    if view.reason == DEADLINE_REASON and probe.phase != Phase.SUCCEEDED:
        # Its TERM may have come before the job could tell it was the deadline's.
        return JobState(Status.TIMED_OUT, "active_deadline_seconds reached (Kubernetes ended the Job)")
    recorded = recorded_outcome(probe)
    if recorded is not None:
        return recorded
    if view.word == UNANSWERED_WORD:
        return unanswered_state("Kubernetes", view, probe, rollouts)
    if view.word in FINAL_CONDITIONS:
        said = f"{view.word}{f' ({view.reason})' if view.reason else ''}"
        return JobState(Status.FAILED, f"Kubernetes says the Job is {said}, and the job recorded no outcome")
    if view.waiting:
        return JobState(Status.QUEUED, f"waiting in Kubernetes: {view.reason}")
    if view.running:
        if probe.phase is None and view.reason:
            return JobState(Status.STARTING, f"pod waiting: {view.reason}")
        return running_state(probe, rollouts)
    if probe.own.written:
        return JobState(
            Status.UNKNOWN,
            f"Kubernetes no longer knows Job {job_id} (deleted, or removed after its ttl) and it recorded no outcome",
        )
    return JobState(Status.UNKNOWN, f"Kubernetes does not know Job {job_id}")


# -- what it cannot run (pure) ----------------------------------------------------------------------


def unsupported(config: SubmitConfig, compute_name: str) -> tuple[str, str] | None:
    """The first thing of ``config`` one pod per job cannot run: (YAML path, why and the fix)."""
    from nemo_gym.orchestration.api import (
        RayServiceConfig,
        VllmPDServiceConfig,
        VllmServiceConfig,
        env_sources_of,
    )

    compute = f"compute.{compute_name}"
    elsewhere = "or submit to a Slurm compute"
    for name, service in config.services.items():
        at = f"services.{name}"
        if isinstance(service, VllmPDServiceConfig):
            return (
                f"{at}.type",
                f"is vllm_pd, whose prefill and decode tiers need nodes of their own, but {compute} runs each job "
                f"as one Kubernetes pod; serve the model as type: vllm, {elsewhere}",
            )
        if isinstance(service, RayServiceConfig):
            return (
                f"{at}.type",
                f"is ray, a Ray cluster across nodes, but {compute} runs each job as one Kubernetes pod; submit "
                f"to a Slurm compute",
            )
        if isinstance(service, VllmServiceConfig) and service.use_ray_serve:
            return (
                f"{at}.use_ray_serve",
                f"is true, but {compute} runs one pod per job, without Ray; drop use_ray_serve (vLLM's own "
                f"data parallelism serves number_of_instances in the pod), {elsewhere}",
            )
        problem = _not_carried(at, service.mounts, env_sources_of(service), compute)
        if problem:
            return problem
    problem = _not_carried("driver", config.driver.mounts, env_sources_of(config.driver), compute)
    if problem:
        return problem
    gpus_per_node = getattr(config.compute[compute_name], "gpus_per_node", None)
    return _too_big(config, compute, gpus_per_node) or _ambiguous(config) or _otel(config, compute)


def _too_big(config: SubmitConfig, compute: str, gpus_per_node: int | None) -> tuple[str, str] | None:
    """A pod that asks more GPUs than a node has: one service alone, or all of them together."""
    asked = {name: service_gpus(s.model_dump()) for name, s in config.services.items()}
    asked = {name: n for name, n in asked.items() if n}
    if gpus_per_node is None:
        return None
    for name, n in asked.items():
        if n > gpus_per_node:
            service = config.services[name]
            field = "number_of_instances" if getattr(service, "number_of_instances", 1) > 1 else "tensor_parallel_size"
            return (
                f"services.{name}.{field}",
                f"asks {n} GPUs in one pod (number_of_instances x tensor_parallel_size x pipeline_parallel_size), "
                f"but {compute}.gpus_per_node is {gpus_per_node}; ask for fewer, or submit to a Slurm compute",
            )
    if sum(asked.values()) > gpus_per_node:
        each = ", ".join(f"{name} {n}" for name, n in asked.items())
        return (
            f"{compute}.gpus_per_node",
            f"is {gpus_per_node}, but each job's pod runs every service and asks {sum(asked.values())} GPUs "
            f"({each}); ask for fewer, or raise it if the cluster's nodes have more",
        )
    return None


def _ambiguous(config: SubmitConfig) -> tuple[str, str] | None:
    """Names that would be one name once made Kubernetes names (containers of one pod, Jobs of one run)."""
    containers: dict[str, str] = {object_name(DRIVER_CONTAINER): "the driver"}
    for name in config.services:
        other = containers.setdefault(object_name(name), f"service {name}")
        if other != f"service {name}":
            return (
                f"services.{name}",
                f"is named {object_name(name)!r} as a container of the pod, as {other} is; rename one of them",
            )
    jobs: dict[str, str] = {}
    for name in config.driver.benchmarks:
        other = jobs.setdefault(object_name(name), name)
        if other != name:
            return (
                f"driver.benchmarks.{name}",
                f"would be the same Kubernetes Job name as benchmark {other} ({object_name(name)!r}); rename one",
            )
    return None


def _otel(config: SubmitConfig, compute: str) -> tuple[str, str] | None:
    if config.otel.enabled:
        return (
            "otel.enabled",
            f"is true, but the collector's token travels in the submitting shell's environment, which a pod of "
            f"{compute} does not inherit (Kubernetes Secrets for it are to come); set otel.enabled: false",
        )
    return None


def _not_carried(at: str, mounts: list[str], sources: Mapping[str, Any], compute: str) -> tuple[str, str] | None:
    """A container's mounts and host: values, which a pod cannot be given."""
    if mounts:
        return (
            f"{at}.mounts",
            f"{compute} mounts only its PVC (pvc_name, at job.output_path) in every container; put what this "
            f"reads there or in its image, and drop mounts",
        )
    for key, source in sources.items():
        if source.kind == "host":
            return (
                f"{at}.env.{key}",
                f"is a host: value, read from the submitting shell's environment, which a pod of {compute} does "
                f"not inherit (Kubernetes Secrets for it are to come); write a literal or runtime: value",
            )
    return None


def credentials_left_behind(config: SubmitConfig, compute_name: str, environ: Mapping[str, str]) -> list[str]:
    """The exporters' variables this shell has (credentials, MLflow's tracking URI), which reach a
    Slurm job with its submission but not a pod: its own export runs without them."""
    from nemo_gym.orchestration.plan.exports import export_carried_env

    here = [name for name in export_carried_env(config) if environ.get(name)]
    if not here:
        return []
    return [
        f"job.export: {', '.join(here)} {'is' if len(here) == 1 else 'are'} set in this shell, but a pod of "
        f"compute.{compute_name} does not inherit the submitting shell's environment: each job's own export "
        f"runs without {'it' if len(here) == 1 else 'them'}; `gym eval export RUN` sends from here once the run has ended"
    ]
