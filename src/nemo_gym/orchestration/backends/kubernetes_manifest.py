"""A Kubernetes Job's manifest, built as data from the plan and written as YAML: its labels and
annotations, the native sidecars that run the model services (their GPUs, memory and probes), the
driver container that runs the job script, and the PVC mounted at the output path in each. Pure:
the backend (``kubernetes.py``) writes it beside the job script and applies it.
"""

from __future__ import annotations

import json
import math
import posixpath
import re
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import TYPE_CHECKING, Any

import yaml

from nemo_gym.orchestration.backends.kubernetes_rules import label_value, object_name

if TYPE_CHECKING:
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
# A resubmitted job is its first job's name and "-a<attempt>": room kept at the end of every name.
RESUBMIT_SUFFIX_ROOM = 4
READINESS_PERIOD_SECONDS = 5
# The driver container's copy of activeDeadlineSeconds: a TERM near it is the deadline's.
DEADLINE_ENV = "GYM_ACTIVE_DEADLINE_SECONDS"


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


def sidecar_command(launch: Launch) -> str:
    """What a sidecar runs (``templates/backend-kubernetes-sidecar.sh.j2``): the step's script, its
    output in its log and on the container's stdout; a second start after a death leaves the exit
    status the job reads."""
    from nemo_gym.orchestration.templating import render_template

    return render_template("backend-kubernetes-sidecar.sh.j2", launch=launch).rstrip("\n")


def job_command(job: JobPlan) -> str:
    """What the driver container runs (``templates/backend-kubernetes-job.sh.j2``): the job script,
    its output in the job's log and on stdout."""
    from nemo_gym.orchestration.templating import render_template

    return render_template("backend-kubernetes-job.sh.j2", job=job).rstrip("\n")
