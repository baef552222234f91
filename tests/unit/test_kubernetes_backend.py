"""The Kubernetes backend without a cluster: its manifests against the real Kubernetes schemas
(PyPI kubernetes-validate, strict, 1.29 and 1.33) and the rules the schemas do not state, its
refusals, its names, and how it reads what Kubernetes says of a Job.

No Kubernetes API server can run on this machine; tests/fakes/test_kubernetes_e2e.py drives the real
kubectl against an emulated one."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st
from render_helpers import GOLDEN_DIR, stage

from nemo_gym.orchestration import contract
from nemo_gym.orchestration.backends import backend_named
from nemo_gym.orchestration.backends.base import JobProbe, JobState
from nemo_gym.orchestration.backends.kubernetes import describe_answer, job_state
from nemo_gym.orchestration.backends.kubernetes_manifest import job_command, sidecar_command, times_quantity
from nemo_gym.orchestration.backends.kubernetes_rules import DNS_LABEL_RE, object_name
from nemo_gym.orchestration.contract import Phase, StateFile, Status
from nemo_gym.orchestration.errors import UserError
from nemo_gym.orchestration.validate import validate_config

CONFIG = GOLDEN_DIR / "configs" / "kubernetes.yaml"
KUBERNETES_VERSIONS = ("1.29", "1.33")


def manifests(config: Path = CONFIG, overrides: list[str] | None = None) -> dict[str, dict]:
    staged = stage(config, overrides=overrides)
    return {
        rel: yaml.safe_load(f.content) for rel, f in staged.files.items() if rel.endswith("/" + contract.JOB_MANIFEST)
    }


# -- the real schemas -------------------------------------------------------------------------------


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
@pytest.mark.parametrize(
    "overrides", [[], ["+job.deployment=shared"], ["+job.shards=2"]], ids=["plain", "shared", "sharded"]
)
def test_every_manifest_passes_the_real_kubernetes_schemas_strictly(version, overrides) -> None:
    kv = pytest.importorskip("kubernetes_validate")
    found = manifests(overrides=overrides)
    assert found
    for rel, doc in found.items():
        try:
            assert kv.validate(doc, version, strict=True) == version
        except kv.ValidationError as e:  # pragma: no cover - the message is the point
            pytest.fail(f"{rel} for {version}: {'.'.join(map(str, e.path))}: {e.message}")


def test_a_manifest_the_schemas_refuse_is_refused() -> None:
    """The check above can fail: a field Kubernetes does not have is refused in strict mode."""
    kv = pytest.importorskip("kubernetes_validate")
    doc = next(iter(manifests().values()))
    doc["spec"]["template"]["spec"]["containers"][0]["restartPolicee"] = "Always"
    with pytest.raises(kv.ValidationError):
        kv.validate(doc, "1.29", strict=True)


# -- what the schemas do not say -------------------------------------------------------------------


def test_services_are_native_sidecars_and_the_driver_the_one_container() -> None:
    for doc in manifests().values():
        pod = doc["spec"]["template"]["spec"]
        assert pod["restartPolicy"] == "Never" and doc["spec"]["backoffLimit"] == 0
        assert [c["name"] for c in pod["containers"]] == ["driver"]
        assert "restartPolicy" not in pod["containers"][0]
        sidecars = pod["initContainers"]
        assert [c["name"] for c in sidecars] == ["policy"]
        for sidecar in sidecars:
            assert sidecar["restartPolicy"] == "Always"
            probe = sidecar["readinessProbe"]["httpGet"]
            assert probe == {"path": "/health", "port": 18000}
            assert probe["port"] in [p["containerPort"] for p in sidecar["ports"]]
            # tensor_parallel_size 2: two GPUs, each with memory_per_gpu (32Gi), and /dev/shm.
            assert sidecar["resources"]["limits"] == {"nvidia.com/gpu": 2, "memory": "64Gi"}
            assert {"name": "dshm", "mountPath": "/dev/shm"} in sidecar["volumeMounts"]
        # Every container mounts the PVC at the output path; the driver has no GPUs and no /dev/shm.
        for container in [*sidecars, *pod["containers"]]:
            assert {"name": "gym-output", "mountPath": "/mnt/gym-results"} in container["volumeMounts"]
        assert pod["containers"][0]["volumeMounts"] == [{"name": "gym-output", "mountPath": "/mnt/gym-results"}]
        assert {"name": "gym-output", "persistentVolumeClaim": {"claimName": "gym-results"}} in pod["volumes"]
        assert pod["serviceAccountName"] == "gym-runner"
        assert pod["nodeSelector"] == {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}


def test_labels_are_on_the_job_and_its_pod_and_names_are_dns_labels() -> None:
    found = manifests()
    names = set()
    for rel, doc in found.items():
        meta, template = doc["metadata"], doc["spec"]["template"]["metadata"]
        assert meta["labels"] == template["labels"]
        assert meta["labels"]["app.kubernetes.io/managed-by"] == "gym-orchestration"
        assert meta["labels"]["team"] == "evals"
        assert meta["annotations"]["owner"] == "evals@example.com"
        assert meta["annotations"]["gym-orchestration/benchmark"] == rel.split("/")[0]
        assert meta["namespace"] == "gym-evals"
        assert DNS_LABEL_RE.match(meta["name"]) and len(meta["name"]) <= 63 - 4
        names.add(meta["name"])
    assert len(names) == len(found)


def test_the_resubmit_rewrite_finds_exactly_one_name_and_one_suspend_line() -> None:
    """gym eval resubmit creates the staged manifest again under another name, suspended, with sed
    on the lines '  name: ' and '  suspend: false': each must be there once, and be the Job's."""
    staged = stage(CONFIG)
    for rel, f in staged.files.items():
        if not rel.endswith(contract.JOB_MANIFEST):
            continue
        lines = f.content.splitlines()
        assert len([x for x in lines if x.startswith("  name: ")]) == 1
        assert lines.count("  suspend: false") == 1
        rewritten = subprocess.run(
            ["sed", "-e", "s/^  name: .*/  name: again-a2/", "-e", "s/^  suspend: false$/  suspend: true/"],
            input=f.content,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        doc = yaml.safe_load(rewritten)
        assert doc["metadata"]["name"] == "again-a2" and doc["spec"]["suspend"] is True
        original = yaml.safe_load(f.content)
        original["metadata"]["name"], original["spec"]["suspend"] = "again-a2", True
        assert doc == original


def test_the_job_id_reaches_the_containers_from_the_pod_label_the_job_controller_sets() -> None:
    for doc in manifests().values():
        pod = doc["spec"]["template"]["spec"]
        for container in [*pod["initContainers"], *pod["containers"]]:
            (env,) = [e for e in container["env"] if e["name"] == "GYM_JOB_ID"]
            assert env["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.labels['job-name']"


def _commands() -> list[str]:
    staged = stage(CONFIG)
    job = staged.plan.jobs[0]
    return [sidecar_command(job.steps[0].launch), job_command(job)]


@pytest.mark.parametrize("command", _commands(), ids=["sidecar", "driver"])
def test_container_commands_parse_and_pass_shellcheck(command) -> None:
    assert subprocess.run(["bash", "-n", "-c", command], capture_output=True).returncode == 0
    if shutil.which("shellcheck") is None:
        pytest.skip("shellcheck is not installed (scripts/test installs it)")
    proc = subprocess.run(["shellcheck", "-s", "bash", "-"], input=command, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout


def test_a_sidecar_command_really_runs_its_step_into_its_log(tmp_path) -> None:
    """The wrapper as a container runs it: the step's output in its log and on stdout, the state
    directories made, the step's exit status its own."""
    from nemo_gym.orchestration.plan.model import Launch, NodeSlice

    script = tmp_path / "steps" / "svc.sh"
    script.parent.mkdir()
    script.write_text('echo "served by $GYM_JOB_ID"; exit 7\n')
    launch = Launch("svc", str(tmp_path), NodeSlice(0, 1), "img", (), False)
    proc = subprocess.run(
        ["bash", "-c", sidecar_command(launch), "gym-sidecar"],
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin", "GYM_JOB_ID": "job-x", "GYM_JOB_DIR": str(tmp_path)},
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 7
    assert "served by job-x" in proc.stdout
    assert (tmp_path / "logs" / "svc-job-x.log").read_text() == "served by job-x\n"
    for sub in (contract.EXITED_DIR, contract.READY_DIR, contract.WHY_DIR):
        assert (tmp_path / contract.state_dir("job-x") / sub).is_dir()


def test_a_sidecar_started_again_after_a_kill_leaves_the_death_the_job_reads(tmp_path) -> None:
    """A KILL (the OOM killer) leaves no exit status; the kubelet starts the sidecar again: that
    start does not serve again but writes 137 and why, which the job reads as the service's death."""
    from nemo_gym.orchestration.plan.model import Launch, NodeSlice

    script = tmp_path / "steps" / "svc.sh"
    script.parent.mkdir()
    script.write_text("echo serving >>served.txt; exit 0\n")
    launch = Launch("svc", str(tmp_path), NodeSlice(0, 1), "img", (), False)
    env = {"PATH": "/usr/bin:/bin", "GYM_JOB_ID": "job-x", "GYM_JOB_DIR": str(tmp_path)}
    run = lambda: subprocess.run(["bash", "-c", sidecar_command(launch), "gym-sidecar"], cwd=tmp_path, env=env)  # noqa: E731
    assert run().returncode == 0  # served once; its own exit status is the step's to write (lib.sh)
    node = subprocess.run(["hostname"], capture_output=True, text=True).stdout.strip()
    state = tmp_path / contract.state_dir("job-x")
    assert (state / contract.STARTED_DIR / f"svc@{node}").exists()
    assert run().returncode == 137  # started again, with no exit status written: killed
    assert (state / contract.EXITED_DIR / f"svc@{node}").read_text().strip() == "137"
    assert "killed" in (state / contract.WHY_DIR / f"svc@{node}").read_text()
    assert (tmp_path / "served.txt").read_text() == "serving\n"  # never served a second time
    (state / contract.EXITED_DIR / f"svc@{node}").write_text("3\n")
    assert run().returncode == 3  # a step that ended says so again, and is not run again


def _snapshot_answers(tmp_path, jobs_out: str, pods_out: str, ok: bool = True) -> dict[str, list[str]]:
    """What the real probe's bash makes of kubectl's answer (a stand-in kubectl prints it), per job,
    as the probe hands it to ``describe``."""
    from nemo_gym.orchestration.observe import probe_functions, snapshot_script

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (tmp_path / "jobs.txt").write_text(jobs_out)
    (tmp_path / "pods.txt").write_text(pods_out)
    fake = bin_dir / "kubectl"
    fake.write_text(
        "#!/bin/bash\n"
        + ("" if ok else "exit 1\n")
        + f'case " $* " in *" get jobs "*) cat {tmp_path}/jobs.txt ;; *" get pods "*) cat {tmp_path}/pods.txt ;; esac\n'
    )
    fake.chmod(0o755)
    staged = stage(CONFIG)
    from render_helpers import golden_record

    record = golden_record(staged)
    backend = backend_named("kubernetes")
    names = [b.job_id for b in record.benchmarks]
    script = "\n".join(
        [
            probe_functions(backend),
            snapshot_script(backend, [record]),
            *(f'gym_describe_job {n}; printf "%s=%s\\n" {n} "$gym_answer"' for n in names),
        ]
    )
    out = subprocess.run(
        ["bash", "-c", script], capture_output=True, text=True, env={"PATH": f"{bin_dir}:/usr/bin:/bin"}
    ).stdout
    return {line.split("=", 1)[0]: line.split("=", 1)[1].split("\x1f") for line in out.splitlines() if "=" in line}


def test_the_probe_keeps_every_field_of_kubectls_answer_in_its_place(tmp_path) -> None:
    """A running Job has no True condition: its last fields are empty, and its pod's must not slide
    into them (bash's read merges empty tab-separated fields)."""
    staged = stage(CONFIG)
    from render_helpers import golden_record

    first, second = (b.job_id for b in golden_record(staged).benchmarks)
    jobs = f"{first}\tfalse\t1\t0\t{STARTED}\t\t\n{second}\tfalse\t\t0\t{STARTED}\tFailed\tDeadlineExceeded\n"
    pods = f"{first}\tPending\t ImagePullBackOff\t\n"
    answers = _snapshot_answers(tmp_path, jobs, pods)
    assert answers[first] == ["false", "1", "0", STARTED, "", "", "Pending", " ImagePullBackOff", ""]
    view = describe_answer(answers[first])
    assert view.running and view.reason == "ImagePullBackOff"
    probe = JobProbe(own=StateFile.from_fields({}), scheduler=view)
    assert job_state(first, probe, 0) == JobState(Status.STARTING, "pod waiting: ImagePullBackOff")
    timed_out = JobProbe(
        own=StateFile.from_fields({"phase": "failed", "detail": "stopped by a signal (SIGTERM)"}),
        scheduler=describe_answer(answers[second]),
    )
    assert job_state(second, timed_out, 0).status == Status.TIMED_OUT


def test_an_unreachable_cluster_is_said_so(tmp_path) -> None:
    answers = _snapshot_answers(tmp_path, "", "", ok=False)
    (name, answer), *_ = answers.items()
    probe = JobProbe(own=StateFile.from_fields({"phase": "running"}), scheduler=describe_answer(answer))
    state = job_state(name, probe, 0)
    # As with Slurm's controller down: the job as it last wrote, said to be that, never ended.
    assert state.status == Status.RUNNING and state.detail.startswith(
        "Kubernetes cannot be reached (kubectl could not reach"
    )


# -- refusals ---------------------------------------------------------------------------------------


def _refusal(tmp_path, edit) -> str:
    data = yaml.safe_load(CONFIG.read_text())
    edit(data)
    path = tmp_path / "k8s.yaml"
    path.write_text(yaml.safe_dump(data))
    from nemo_gym.orchestration.compose import compose_config

    with pytest.raises(UserError) as caught:
        validate_config(compose_config(path, []))
    text = str(caught.value)
    assert "\n" not in text.strip() and "Traceback" not in text
    return text


def _pd(data: dict) -> None:
    data["services"]["policy"] = {
        "type": "vllm_pd",
        "container": "vllm:1",
        "model": "/m",
        "prefill": {"node_pool": None},
        "decode": {},
    }


@pytest.mark.parametrize(
    "edit, where",
    [
        (_pd, "services.policy.type: is vllm_pd"),
        (
            lambda d: d["services"].update(envs={"type": "ray", "container": "ray:1"}),
            "services.envs.type: is ray",
        ),
        (lambda d: d["services"]["policy"].update(use_ray_serve=True), "services.policy.use_ray_serve"),
        (lambda d: d["services"]["policy"].update(mounts=["/data:/data"]), "services.policy.mounts"),
        (lambda d: d["driver"].update(mounts=["/data:/data"]), "driver.mounts"),
        (lambda d: d["otel"].update(enabled=True), "otel.enabled"),
        (lambda d: d["services"]["policy"].update(tensor_parallel_size=16), "services.policy.tensor_parallel_size"),
        (lambda d: d["compute"]["cluster"].update(namespace="Evals"), "compute.cluster.namespace"),
        (lambda d: d["compute"]["cluster"].update(memory_per_gpu="lots"), "compute.cluster.memory_per_gpu"),
        (lambda d: d["compute"]["cluster"].update(extra_args={"env": {"A": "b"}}), "compute.cluster.extra_args"),
        (lambda d: d["compute"]["cluster"].pop("pvc_name"), "compute.cluster.pvc_name"),
        (
            lambda d: d["services"].update(
                judge={"type": "vllm", "container": "vllm:1", "model": "/j", "port": 18001, "tensor_parallel_size": 8}
            ),
            "compute.cluster.gpus_per_node: is 8, but each job's pod runs every service and asks 10 GPUs",
        ),
        (
            lambda d: d["services"].update(
                driver={"type": "vllm", "container": "vllm:1", "model": "/j", "port": 18001}
            ),
            "services.driver: is named 'driver' as a container of the pod, as the driver is",
        ),
        (
            lambda d: d["driver"]["benchmarks"].update({"First": {}}),
            "would be the same Kubernetes Job name as benchmark",
        ),
    ],
    ids=lambda x: x if isinstance(x, str) else "",
)
def test_what_one_pod_cannot_run_is_refused_in_one_line_naming_the_field(tmp_path, edit, where) -> None:
    assert where in _refusal(tmp_path, edit)


def test_a_host_value_is_refused_where_a_pod_cannot_inherit_it(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("GYM_K8S_TOKEN", "x")
    text = _refusal(tmp_path, lambda d: d["services"]["policy"]["env"].update(HF_TOKEN="host:GYM_K8S_TOKEN"))
    assert "services.policy.env.HF_TOKEN" in text


# -- names ------------------------------------------------------------------------------------------


@given(st.text(min_size=0, max_size=120), st.text(min_size=0, max_size=120))
def test_object_names_are_dns_labels_with_room_for_a_resubmission(run_id, unit) -> None:
    name = object_name(run_id, unit, room=4)
    assert DNS_LABEL_RE.match(name) and len(name) <= 59
    assert DNS_LABEL_RE.match(name + "-a12")


def test_long_names_stay_apart() -> None:
    run = "gym-job-20260101T000000Z-000000"
    a, b = object_name(run, "x" * 80 + "a", room=4), object_name(run, "x" * 80 + "b", room=4)
    assert a != b and len(a) == len(b) == 59


def test_memory_is_asked_per_gpu() -> None:
    assert times_quantity("32Gi", 2) == "64Gi"
    assert times_quantity("1.5G", 3) == "4.5G"
    assert times_quantity("100", 1) == "100"


# -- what Kubernetes says of a Job ------------------------------------------------------------------


def _answer(suspend="", active="", ready="", started="", types="", reasons="", phase="", waiting="", sched=""):
    return [suspend, active, ready, started, types, reasons, phase, waiting, sched]


STARTED = "2026-12-03T10:00:00Z"


@pytest.mark.parametrize(
    "answer, own, status, words",
    [
        (_answer(suspend="true"), None, Status.QUEUED, "suspended"),
        (_answer(), None, Status.UNKNOWN, "does not know"),
        (_answer(phase="Pending", sched="Unschedulable"), None, Status.QUEUED, "Unschedulable"),
        (
            _answer(active="1", ready="0", started=STARTED, phase="Pending", waiting="ImagePullBackOff"),
            None,
            Status.STARTING,
            "ImagePullBackOff",
        ),
        (_answer(active="1", ready="0", started=STARTED, phase="Running"), Phase.STARTING, Status.STARTING, ""),
        (_answer(active="1", ready="1", started=STARTED, phase="Running"), Phase.RUNNING, Status.RUNNING, "rollout"),
        (
            _answer(started=STARTED, types="Complete", reasons="CompletionsReached"),
            Phase.SUCCEEDED,
            Status.SUCCEEDED,
            "",
        ),
        (
            _answer(started=STARTED, types="FailureTarget Failed", reasons="PodFailurePolicy PodFailurePolicy"),
            Phase.FAILED,
            Status.FAILED,
            "",
        ),
        (
            _answer(started=STARTED, types="Failed", reasons="DeadlineExceeded"),
            Phase.RUNNING,
            Status.TIMED_OUT,
            "active_deadline_seconds",
        ),
        (
            _answer(started=STARTED, types="Failed", reasons="BackoffLimitExceeded"),
            None,
            Status.FAILED,
            "BackoffLimitExceeded",
        ),
        # 1.31 on: FailureTarget comes first, and is not the end.
        (
            _answer(active="1", ready="1", started=STARTED, types="FailureTarget", reasons="PodFailurePolicy"),
            Phase.RUNNING,
            Status.RUNNING,
            "",
        ),
        (
            ["?"],
            Phase.RUNNING,
            Status.RUNNING,
            "cannot be reached (kubectl could not reach the cluster); as the job last wrote",
        ),
        (["?"], None, Status.QUEUED, "the job has written nothing yet, so it was last known queued"),
    ],
)
def test_job_states(answer, own, status, words) -> None:
    state_file = StateFile.from_fields({"phase": own.value, "detail": "driver finished"} if own else {})
    probe = JobProbe(own=state_file, scheduler=describe_answer(answer))
    state = job_state("gym-x-first", probe, 3)
    assert state.status == status, state
    assert words in state.detail


def test_a_cancel_wins_once_the_pod_is_gone() -> None:
    probe = JobProbe(
        own=StateFile.from_fields({"phase": "running"}), scheduler=describe_answer(_answer()), cancelled_by_user=True
    )
    assert job_state("j", probe, 0).status == Status.CANCELLED


def test_the_backend_is_registered_by_its_type() -> None:
    backend = backend_named("kubernetes")
    assert backend.is_job_id("gym-job-20260101t000000z-000000-first-a2")
    assert not backend.is_job_id("Bad_Name") and not backend.is_job_id("a;rm -rf /")
    assert backend.requeued_id("j", 3) == "j-a3"
    # Read back from a record: made a name again, and always within 63 with its suffix.
    assert backend.is_job_id(backend.requeued_id("x" * 63, 100))
    assert backend.is_job_id(backend.requeued_id("a/b&c", 2))
    assert re.fullmatch(backend.job_id_pattern, object_name("R", "b", room=4))


def test_exporter_credentials_this_shell_has_are_said_to_stay_behind(tmp_path) -> None:
    """MLflow's token reaches a Slurm job with its submission, but not a pod: --dry-run and submit
    say so (one warning line), and say nothing when this shell has none."""
    from nemo_gym.orchestration.compose import compose_config
    from nemo_gym.orchestration.preflight import staging_warnings

    data = yaml.safe_load(CONFIG.read_text())
    data["job"]["export"] = {"mlflow": {"tracking_uri": "http://mlflow.example:5000", "experiment": "evals"}}
    path = tmp_path / "k8s.yaml"
    path.write_text(yaml.safe_dump(data))
    config, _ = validate_config(compose_config(path, []))
    assert staging_warnings(config, {}) == []
    [warning] = staging_warnings(config, {"MLFLOW_TRACKING_TOKEN": "t"})
    assert warning.startswith("job.export: MLFLOW_TRACKING_TOKEN is set in this shell, but a pod of compute.cluster")
    assert "gym eval export RUN" in warning and "\n" not in warning


def test_a_sidecar_with_a_health_check_has_a_startup_probe_the_driver_waits_on() -> None:
    """A native sidecar is 'started' once its startup probe passes: only then does the kubelet start
    the driver. Without one the driver would start while the model is still loading."""
    for manifest in manifests().values():
        sidecars = manifest["spec"]["template"]["spec"]["initContainers"]
        probed = [c for c in sidecars if "readinessProbe" in c]
        assert probed
        for container in probed:
            startup = container["startupProbe"]
            assert startup["httpGet"] == container["readinessProbe"]["httpGet"]
            assert startup["failureThreshold"] * startup["periodSeconds"] >= 60  # the health check's timeout
