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
and then unsuspended is a held job for ``gym eval resubmit``.
"""

from __future__ import annotations

import json
import math
import posixpath
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import TYPE_CHECKING, Any, ClassVar

import yaml

from nemo_gym.orchestration import contract
from nemo_gym.orchestration.backends.base import (
    CANCELLED_BY_USER,
    Backend,
    JobProbe,
    JobState,
    SchedulerView,
    job_answer_lines,
    own_process_group_line,
    recorded_outcome,
    running_state,
)
from nemo_gym.orchestration.backends.kubernetes_rules import label_value, object_name
from nemo_gym.orchestration.contract import Phase, Status

if TYPE_CHECKING:
    from nemo_gym.orchestration.api import AnyComputeConfig, SubmitConfig
    from nemo_gym.orchestration.plan.model import JobPlan, Launch, RunPlan

MANAGED_BY = ("app.kubernetes.io/managed-by", "gym-orchestration")
RUN_LABEL = "gym-orchestration/run"
BENCHMARK_LABEL = "gym-orchestration/benchmark"
RUN_ANNOTATION = "gym-orchestration/run-id"  # the run id and benchmark as written (labels are cut)
BENCHMARK_ANNOTATION = "gym-orchestration/benchmark"
GPU_RESOURCE = "nvidia.com/gpu"
OUTPUT_VOLUME = "gym-output"
SHM_VOLUME = "dshm"
DRIVER_CONTAINER = "driver"
APPLY_TIMEOUT_SECONDS = 60
REQUEST_TIMEOUT = "30s"
# A resubmitted job is its first job's name and "-a<attempt>": room kept at the end of every name.
RESUBMIT_SUFFIX_ROOM = 4
READINESS_PERIOD_SECONDS = 5
# The Job's conditions that end it; the others (SuccessCriteriaMet, FailureTarget: 1.31 on) do not.
FINAL_CONDITIONS = ("Complete", "Failed")
FAILING_CONDITION = "FailureTarget"  # 1.31 on: failed, its pod still being ended
# The Job's Failed reason when activeDeadlineSeconds ended it: its walltime.
DEADLINE_REASON = "DeadlineExceeded"
DEADLINE_ENV = "GYM_ACTIVE_DEADLINE_SECONDS"  # the driver container's copy of it
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


@dataclass(frozen=True)
class Settings:
    """The compute's settings, as the plan keeps them (``directives``: pure data)."""

    namespace: str
    pvc: str
    memory_per_gpu: str
    context: str | None = None
    service_account: str | None = None
    node_selector: tuple[tuple[str, str], ...] = ()
    ttl_seconds_after_finished: int | None = None
    active_deadline_seconds: int | None = None
    labels: tuple[tuple[str, str], ...] = ()
    annotations: tuple[tuple[str, str], ...] = ()

    @classmethod
    def of(cls, job: JobPlan) -> Settings:
        options = {key: value for key, value in job.directives[0] if value is not None}
        whole = lambda key: int(options[key]) if key in options else None  # noqa: E731
        pairs = lambda key: tuple(sorted(json.loads(options.get(key, "{}")).items()))  # noqa: E731
        return cls(
            namespace=options["namespace"],
            pvc=options["pvc"],
            memory_per_gpu=options["memory_per_gpu"],
            context=options.get("context"),
            service_account=options.get("service_account"),
            node_selector=pairs("node_selector"),
            ttl_seconds_after_finished=whole("ttl_seconds_after_finished"),
            active_deadline_seconds=whole("active_deadline_seconds"),
            labels=pairs("labels"),
            annotations=pairs("annotations"),
        )

    def where(self) -> dict[str, str]:
        """What its jobs are queued under: the record's ``queued_as``, read by every kubectl call."""
        return {"namespace": self.namespace, **({"context": self.context} if self.context else {})}


class KubernetesBackend(Backend):
    name: ClassVar[str] = "kubernetes"
    job_kind: ClassVar[str] = "Kubernetes Job"
    # A Job's name: a DNS-1123 label (ours are made by kubernetes_rules.object_name).
    job_id_pattern: ClassVar[str] = r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?"
    submit_command: ClassVar[str] = "kubectl apply"
    cancel_command: ClassVar[str] = "kubectl delete job"
    scheduler_name: ClassVar[str] = "Kubernetes"

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

    def launch_line(self, launch: Launch, runtime: str) -> str:
        from nemo_gym.orchestration.plan.model import DRIVER_STEP

        if launch.step == DRIVER_STEP:
            return own_process_group_line(launch)  # in the job's own container
        # Its sidecar container runs it; here it stands as the wait for its exit marker.
        return f"gym_await_sidecar {shlex.quote(launch.step)}"

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

    def submit_lines(self, plan: RunPlan, fed: Mapping[str, str]) -> list[str]:
        lines = []
        for job in plan.submitted_jobs:
            manifest = shlex.quote(f"{job.job_dir}/{contract.JOB_MANIFEST}")
            flags = " ".join(kubectl_flags(Settings.of(job).where()))
            lines += [
                f"out=$(timeout {APPLY_TIMEOUT_SECONDS} kubectl {flags} apply -f {manifest} 2>&1); rc=$?",
                # Its name is its id; a refusal is kubectl's own words.
                f'[ "$rc" -ne 0 ] || out={shlex.quote(job_name(plan, job))}',
                *job_answer_lines(plan, job.unit),
            ]
        return lines

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
        }


# -- the manifest (pure) ----------------------------------------------------------------------------


def job_name(plan: RunPlan, job: JobPlan) -> str:
    """The Job's name, which is its id: the run's id and the job's unit, DNS-1123, room kept for
    a resubmission's suffix."""
    return object_name(plan.run_id, job.unit, room=RESUBMIT_SUFFIX_ROOM)


def step_gpus(plan: RunPlan, service: str) -> int:
    """The GPUs a service's sidecar asks for, from the plan's resolved config."""
    return service_gpus(plan.resolved_config.get("services", {}).get(service) or {})


def service_gpus(service: Mapping[str, Any]) -> int:
    """The GPUs a service asks for in its pod (its config's fields): a vLLM service's instances x
    TP x PP, none for anything else."""
    if service.get("type") != "vllm":
        return 0
    return (
        int(service.get("tensor_parallel_size") or 1)
        * int(service.get("pipeline_parallel_size") or 1)
        * int(service.get("number_of_instances") or 1)
    )


def times_quantity(quantity: str, n: int) -> str:
    """``n`` times a memory quantity (validated: a number and an optional unit), as one."""
    match = re.fullmatch(r"([0-9]+(?:\.[0-9]+)?)(.*)", quantity)
    assert match is not None, quantity
    number = Decimal(match.group(1)) * n
    return f"{number.normalize():f}" + match.group(2)


def manifest(plan: RunPlan, job: JobPlan) -> dict[str, Any]:
    """The Job that runs ``job``: its sidecars (one per service step), its driver container (the
    job script), the PVC at the output path in every container."""
    settings = Settings.of(job)
    name = job_name(plan, job)
    labels = {
        **dict(settings.labels),
        MANAGED_BY[0]: MANAGED_BY[1],
        RUN_LABEL: label_value(plan.run_id),
        BENCHMARK_LABEL: label_value(job.unit),
    }
    annotations = {**dict(settings.annotations), RUN_ANNOTATION: plan.run_id, BENCHMARK_ANNOTATION: job.unit}
    output_path = posixpath.dirname(plan.run_dir)
    sidecars = [_sidecar(plan, job, step, settings, output_path) for step in job.steps]
    pod: dict[str, Any] = {"restartPolicy": "Never"}
    if settings.service_account:
        pod["serviceAccountName"] = settings.service_account
    if settings.node_selector:
        pod["nodeSelector"] = dict(settings.node_selector)
    if sidecars:
        pod["initContainers"] = sidecars
    pod["containers"] = [_driver_container(job, settings, output_path)]
    volumes: list[dict[str, Any]] = [{"name": OUTPUT_VOLUME, "persistentVolumeClaim": {"claimName": settings.pvc}}]
    if any("resources" in sidecar for sidecar in sidecars):
        volumes.append({"name": SHM_VOLUME, "emptyDir": {"medium": "Memory"}})
    pod["volumes"] = volumes
    spec: dict[str, Any] = {"suspend": False, "backoffLimit": 0}
    if settings.ttl_seconds_after_finished is not None:
        spec["ttlSecondsAfterFinished"] = settings.ttl_seconds_after_finished
    if settings.active_deadline_seconds is not None:
        spec["activeDeadlineSeconds"] = settings.active_deadline_seconds
    spec["template"] = {"metadata": {"labels": labels, "annotations": annotations}, "spec": pod}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": settings.namespace, "labels": labels, "annotations": annotations},
        "spec": spec,
    }


class _PlainDumper(yaml.SafeDumper):
    """Every mapping written out where it stands: no YAML anchors for the labels the Job and its
    pod template share (kubectl reads them, people read them too)."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def _literal_when_multiline(dumper: yaml.SafeDumper, text: str) -> yaml.ScalarNode:
    # A container's script written as it reads (a block), not as one escaped line.
    style = "|" if "\n" in text else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", text, style=style)


_PlainDumper.add_representer(str, _literal_when_multiline)


def manifest_text(plan: RunPlan, job: JobPlan) -> str:
    header = f"# gym orchestration: benchmark {job.unit} of run {plan.run_id}, as kubectl applies it.\n"
    return header + yaml.dump(manifest(plan, job), Dumper=_PlainDumper, sort_keys=False, width=10_000)


def _job_env() -> list[dict[str, Any]]:
    # The Job's name, from the label its controller puts on the pod: a resubmitted Job (another
    # name, the same manifest) is told its own.
    return [
        {"name": "GYM_JOB_ID", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['job-name']"}}},
    ]


def _mounts(output_path: str, gpus: int) -> list[dict[str, Any]]:
    mounts = [{"name": OUTPUT_VOLUME, "mountPath": output_path}]
    if gpus:
        mounts.append({"name": SHM_VOLUME, "mountPath": "/dev/shm"})
    return mounts


def _sidecar(plan: RunPlan, job: JobPlan, step: Any, settings: Settings, output_path: str) -> dict[str, Any]:
    launch = step.launch
    gpus = step_gpus(plan, step.service)
    container: dict[str, Any] = {
        "name": object_name(step.name),
        "image": launch.container,
        "restartPolicy": "Always",
        "command": ["bash", "-c", sidecar_command(launch), "gym-sidecar"],
        "workingDir": job.job_dir,
        "env": [{"name": "GYM_JOB_DIR", "value": job.job_dir}, *_job_env()],
    }
    if step.health is not None and step.health.kind == "http" and step.health.port is not None:
        container["ports"] = [{"containerPort": step.health.port}]
        probe = {
            "httpGet": {"path": step.health.path, "port": step.health.port},
            "periodSeconds": READINESS_PERIOD_SECONDS,
        }
        container["readinessProbe"] = probe
        # A native sidecar's startup probe is what the kubelet waits on before it starts the next
        # container (the driver): without one, the driver starts while the model is still loading.
        # It allows the health check's timeout, as the job script's own wait does.
        container["startupProbe"] = {
            **probe,
            "failureThreshold": max(1, math.ceil(step.health.timeout_seconds / READINESS_PERIOD_SECONDS)),
        }
    if gpus:
        memory = times_quantity(settings.memory_per_gpu, gpus)
        container["resources"] = {
            "limits": {GPU_RESOURCE: gpus, "memory": memory},
            "requests": {GPU_RESOURCE: gpus, "memory": memory},
        }
    container["volumeMounts"] = _mounts(output_path, gpus)
    return container


def _driver_container(job: JobPlan, settings: Settings, output_path: str) -> dict[str, Any]:
    env = _job_env()
    if settings.active_deadline_seconds is not None:
        # A TERM near it is the deadline's: the job records walltime (its template's ending_cause).
        env.append({"name": DEADLINE_ENV, "value": str(settings.active_deadline_seconds)})
    return {
        "name": DRIVER_CONTAINER,
        "image": job.driver.launch.container,
        "command": ["bash", "-c", job_command(job), "gym-job"],
        "workingDir": job.job_dir,
        "env": env,
        "volumeMounts": _mounts(output_path, 0),
    }


def _split_on_id(path: str) -> str:
    """A path holding ``$GYM_JOB_ID``, as one bash word that expands only the id."""
    before, _, after = path.partition("$GYM_JOB_ID")
    return f'{shlex.quote(before)}"$GYM_JOB_ID"{shlex.quote(after) if after else ""}'


def sidecar_command(launch: Launch) -> str:
    """What a sidecar runs: the step's script, its output in its log (where gym eval logs reads it)
    and on the container's stdout (``kubectl logs -c``). exec: the kubelet's TERM reaches the step;
    the tee ignores it, so that what the step says as it stops still has somewhere to go (a TERM to
    the whole container would otherwise leave it writing into a closed pipe).

    The kubelet restarts a sidecar that ends (``restartPolicy: Always``). A step that ended wrote
    its exit status, which the job has seen; one killed outright (KILL, the OOM killer) wrote none.
    Either way a second start is not run again: it leaves the exit status the job reads as the
    service's death (137 and why, when there was none)."""
    state = _split_on_id(contract.state_dir("$GYM_JOB_ID"))
    me = f'{shlex.quote(launch.step)}@"$GYM_NODES"'
    subs = (contract.EXITED_DIR, contract.READY_DIR, contract.WHY_DIR, contract.STARTED_DIR)
    log = contract.step_log(launch.step, "$GYM_JOB_ID", log_dir=launch.log_dir)
    started, exited, why = (
        f"{state}/{sub}/{me}" for sub in (contract.STARTED_DIR, contract.EXITED_DIR, contract.WHY_DIR)
    )
    died = f"{launch.step}: its container was restarted after dying without an exit status (killed: out of memory?)"
    return "\n".join(
        [
            "GYM_NODES=$(hostname)",
            "export GYM_NODES",
            f"mkdir -p {shlex.quote(posixpath.dirname(log) or '.')} {' '.join(f'{state}/{sub}' for sub in subs)}",
            f"if [ -e {started} ]; then",
            f"    [ -e {exited} ] || {{ echo {shlex.quote(died)} >{why}; echo 137 >{exited}; }}",
            f"    rc=$(head -c 16 {exited} | tr -cd '0-9')",
            '    exit "${rc:-1}"',
            "fi",
            f": >{started}",
            f"exec > >(trap '' TERM; exec tee -a {_split_on_id(log)}) 2>&1",
            f"exec bash {shlex.quote(launch.script)}",
        ]
    )


def job_command(job: JobPlan) -> str:
    """What the driver container runs: the job script, its output in the job's log and on stdout."""
    return "; ".join(
        [
            f"exec > >(trap '' TERM; exec tee -a {_split_on_id(contract.job_log('$GYM_JOB_ID'))}) 2>&1",
            f"exec bash {shlex.quote(f'{job.job_dir}/{contract.JOB_SCRIPT}')}",
        ]
    )


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
        return SchedulerView(word="unanswered", reason="kubectl could not reach the cluster")
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
    if view.word == "unanswered":
        return JobState(Status.UNKNOWN, f"{view.reason}; job {job_id} recorded no outcome yet")
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
