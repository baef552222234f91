"""The emulated Kubernetes API server and the fake kubelet, driven through the real kubectl (as the backend will)."""

from __future__ import annotations

import json
import shutil
import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("kmock", reason="kmock (test extra, Python >= 3.11) is needed for the emulated Kubernetes API")
if shutil.which("kubectl") is None:
    pytest.skip(
        "no kubectl on PATH: the emulated Kubernetes API is only worth testing through it", allow_module_level=True
    )

from fakes.fake_kube import (  # noqa: E402
    FakeKubeEnv,
    match_labels,
    running_fake_kube,
    strategic_merge_patch,
)

MANAGED = "app.kubernetes.io/managed-by"
TRUE_CONDITIONS = '{.status.conditions[?(@.status=="True")].type}'
STATE = (
    "{range .items[*]}{.metadata.name} active={.status.active} ready={.status.ready} start={.status.startTime} "
    + "true="
    + TRUE_CONDITIONS
    + '{"\\n"}{end}'
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def job_manifest(
    name: str,
    driver: str,
    *,
    sidecars: list[dict[str, Any]] | None = None,
    suspend: bool | None = None,
    labels: dict[str, str] | None = None,
) -> str:
    """A Job shaped like the backend's: native sidecars in initContainers, one `driver`, FailJob on its exit code."""
    labels = {MANAGED: "fake-kube-test", **(labels or {})}
    spec: dict[str, Any] = {
        "backoffLimit": 0,
        "ttlSecondsAfterFinished": 86400,
        "podFailurePolicy": {
            "rules": [
                {"action": "FailJob", "onExitCodes": {"containerName": "driver", "operator": "NotIn", "values": [0]}}
            ]
        },
        "template": {
            "metadata": {"labels": labels},
            "spec": {
                "restartPolicy": "Never",
                "initContainers": sidecars or [],
                "containers": [
                    {
                        "name": "driver",
                        "image": "nemo-gym:test",
                        "command": ["bash", "-c", driver, "driver"],
                        "env": [{"name": "GREETING", "value": "ok"}],
                    }
                ],
            },
        },
    }
    if suspend is not None:
        spec["suspend"] = suspend
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "labels": labels}, "spec": spec}
    return json.dumps(job)  # JSON is YAML: no surprises with `y`/`on` values


def http_sidecar(port: int) -> dict[str, Any]:
    return {
        "name": "policy",
        "image": "vllm/vllm-openai:test",
        "restartPolicy": "Always",
        "command": ["python3", "-m", "http.server", str(port), "--bind", "127.0.0.1"],
        "ports": [{"name": "http", "containerPort": port}],
        "startupProbe": {"httpGet": {"path": "/", "port": port}, "periodSeconds": 1, "failureThreshold": 30},
        "readinessProbe": {"httpGet": {"path": "/", "port": "http"}, "periodSeconds": 1},
    }


def sleeping_sidecar(name: str = "sleeper") -> dict[str, Any]:
    return {"name": name, "image": "busybox", "restartPolicy": "Always", "command": ["sleep", "300"]}


@pytest.fixture
def fake_kube(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[FakeKubeEnv]:
    """An emulated API server (1.<minor>, default 29) with its fake kubelet; knobs via indirect parametrization."""
    knobs = dict(getattr(request, "param", {}))
    knobs.setdefault("grace", 2.0)
    with running_fake_kube(tmp_path, namespace="gym", **knobs) as fk:
        yield fk
        assert fk.kubelet.errors == []


def ok(fk: FakeKubeEnv, *args: str, input: str | None = None) -> str:
    result = fk.kubectl(*args, input=input)
    assert result.returncode == 0, f"kubectl {' '.join(args)}: {result.stderr}"
    return result.stdout


def wait_for(check: Callable[[], Any], timeout: float = 15, what: str = "") -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what or check}")
        time.sleep(0.1)


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def job_state(fk: FakeKubeEnv, selector: str = f"{MANAGED}=fake-kube-test") -> dict[str, str]:
    """{job name: its STATE line} as the backend would read it (one kubectl call, label-selected)."""
    out = ok(fk, "get", "jobs", "-l", selector, "-o", f"jsonpath={STATE}")
    return {line.split()[0]: line for line in out.splitlines() if line.strip()}


# -- the whole path: apply, sidecar behind its startup probe, driver, Complete ------------------------------


@pytest.mark.parametrize("minor", ["29", "33"])
def test_emulated_api_server_runs_a_job_with_a_sidecar_to_completion(tmp_path, minor):
    port = free_port()
    # It runs a second at least: on a loaded machine a first poll slower than the job saw it only finished.
    driver = f"curl -sf http://127.0.0.1:{port}/ >/dev/null && sleep 1 && echo $GREETING from $HOSTNAME"
    manifest_path = tmp_path / "job.json"
    manifest_path.write_text(job_manifest("gym-mmlu", driver, sidecars=[http_sidecar(port)]))
    with running_fake_kube(tmp_path, minor=minor, namespace="gym", grace=2.0) as fk:
        assert f"Server Version: v1.{minor}.0" in ok(fk, "version")
        assert ok(fk, "apply", "-f", str(manifest_path)) == "job.batch/gym-mmlu created\n"
        assert ok(fk, "apply", "-f", str(manifest_path)) == "job.batch/gym-mmlu unchanged\n"
        seen = []

        def finished() -> bool:
            line = job_state(fk).get("gym-mmlu", "")
            seen.append(line)
            return "Complete" in line

        wait_for(finished, what="the Job to complete")
        assert any("active=1 " in line for line in seen), seen  # it was seen running, not only finished
        final = seen[-1]
        assert "active= " in final and "ready=0" in final  # a real server omits zero counts but not `ready`
        expected = "SuccessCriteriaMet Complete" if minor == "33" else "true=Complete"
        assert expected in final
        assert ok(fk, "wait", "--for=condition=Complete", "job/gym-mmlu", "--timeout=5s").strip() == (
            "job.batch/gym-mmlu condition met"
        )
        pod = ok(fk, "get", "pods", "-l", "job-name=gym-mmlu", "-o", "jsonpath={.items[0].metadata.name}")
        assert pod.startswith("gym-mmlu-") and len(pod) == len("gym-mmlu-") + 5
        assert ok(fk, "logs", pod, "-c", "driver") == f"ok from {pod}\n"
        assert "GET / HTTP" in ok(fk, "logs", pod, "-c", "policy")  # the probes and the driver's curl
        statuses = json.loads(ok(fk, "get", "pod", pod, "-o", "jsonpath={.status}"))
        assert statuses["phase"] == "Succeeded"
        assert statuses["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 0
        assert "terminated" in statuses["initContainerStatuses"][0]["state"]  # the sidecar was stopped
        assert fk.kubelet.all_pids() == set()
        assert fk.kubelet.errors == []


def test_emulated_api_server_reports_a_driver_exit_code_as_a_failed_job(fake_kube):
    ok(fake_kube, "apply", "-f", "-", input=job_manifest("gym-bad", "echo boom; exit 3", sidecars=[sleeping_sidecar()]))
    line = wait_for(lambda: "Failed" in job_state(fake_kube).get("gym-bad", "") and job_state(fake_kube)["gym-bad"])
    assert "true=FailureTarget Failed" in line  # podFailurePolicy FailJob: FailureTarget first, even on 1.29
    reason = ok(fake_kube, "get", "job", "gym-bad", "-o", 'jsonpath={.status.conditions[?(@.type=="Failed")].reason}')
    assert reason == "PodFailurePolicy"
    assert ok(fake_kube, "get", "job", "gym-bad", "-o", "jsonpath={.status.failed}") == "1"
    exit_code = ok(
        fake_kube,
        "get",
        "pods",
        "-l",
        "job-name=gym-bad",
        "-o",
        'jsonpath={.items[0].status.containerStatuses[?(@.name=="driver")].state.terminated.exitCode}',
    )
    assert exit_code == "3"
    assert ok(fake_kube, "logs", "job/gym-bad", "-c", "driver") == "boom\n"
    assert fake_kube.kubelet.all_pids() == set()  # the sidecar went with the driver


def test_emulated_api_server_delete_job_stops_its_processes(fake_kube, tmp_path):
    pid_file = tmp_path / "driver.pid"
    driver = f"echo $$$$ > {pid_file}; exec sleep 300"  # Kubernetes turns $$ into $ (as it escapes $(VAR))
    ok(fake_kube, "apply", "-f", "-", input=job_manifest("gym-long", driver, sidecars=[sleeping_sidecar()]))
    wait_for(lambda: pid_file.exists() and pid_file.read_text().strip(), what="the driver to start")
    pids = fake_kube.kubelet.pids("gym", "gym-long")
    assert set(pids) == {"sleeper", "driver"} and pids["driver"] == int(pid_file.read_text())
    assert all(alive(pid) for pid in pids.values())
    assert ok(fake_kube, "delete", "job", "gym-long", "--wait=false") == 'job.batch "gym-long" deleted\n'
    wait_for(lambda: not any(alive(pid) for pid in pids.values()), timeout=5, what="the processes to die")
    wait_for(lambda: ok(fake_kube, "get", "pods", "-o", "name") == "", timeout=5, what="the pod to go")
    gone = fake_kube.kubectl("get", "job", "gym-long")
    assert gone.returncode == 1 and 'Error from server (NotFound): jobs.batch "gym-long" not found' in gone.stderr
    assert fake_kube.kubectl("delete", "job", "gym-long", "--ignore-not-found").returncode == 0


def test_emulated_api_server_foreground_delete_waits_for_the_pod(fake_kube):
    ok(fake_kube, "apply", "-f", "-", input=job_manifest("gym-fg", "exec sleep 300"))
    wait_for(lambda: fake_kube.kubelet.pids("gym", "gym-fg"), what="the driver to start")
    pid = fake_kube.kubelet.pids("gym", "gym-fg")["driver"]
    ok(fake_kube, "delete", "job", "gym-fg", "--cascade=foreground")  # returns once the Job is really gone
    assert not alive(pid)
    assert ok(fake_kube, "get", "jobs,pods", "-o", "name") == ""


@pytest.mark.parametrize("fake_kube", [{"hold": True}], indirect=True)
def test_fake_kubelet_hold_leaves_the_job_queued_without_start_time(fake_kube):
    ok(fake_kube, "apply", "-f", "-", input=job_manifest("gym-queued", "echo never"))
    time.sleep(0.6)  # a few kubelet polls
    assert job_state(fake_kube)["gym-queued"] == "gym-queued active= ready= start= true="
    assert ok(fake_kube, "get", "pods", "-o", "name") == ""
    fake_kube.kubelet.hold = False  # the knob works while it runs
    wait_for(lambda: "Complete" in job_state(fake_kube)["gym-queued"], what="the Job to run once released")


def test_emulated_api_server_suspended_job_starts_only_once_patched(fake_kube):
    ok(fake_kube, "apply", "-f", "-", input=job_manifest("gym-susp", "echo resumed", suspend=True))
    wait_for(lambda: "true=Suspended" in job_state(fake_kube)["gym-susp"], what="the Suspended condition")
    time.sleep(0.4)
    assert "start= " in job_state(fake_kube)["gym-susp"]
    assert ok(fake_kube, "get", "pods", "-o", "name") == ""
    patched = ok(fake_kube, "patch", "job", "gym-susp", "--type=merge", "-p", '{"spec":{"suspend":false}}')
    assert patched == "job.batch/gym-susp patched\n"
    line = wait_for(lambda: "Complete" in job_state(fake_kube)["gym-susp"] and job_state(fake_kube)["gym-susp"])
    assert "start=20" in line and "true=Complete" in line  # Suspended is now False (JobResumed)
    assert ok(fake_kube, "logs", "job/gym-susp", "-c", "driver") == "resumed\n"


def test_emulated_api_server_label_selectors_filter_lists(fake_kube):
    fake_kube.kubelet.hold = True
    for name, run in (("gym-a", "run-1"), ("gym-b", "run-2"), ("gym-c", "run-1")):
        ok(fake_kube, "apply", "-f", "-", input=job_manifest(name, "true", labels={"nemo-gym/run-id": run}))
    other = job_manifest("not-ours", "true").replace("fake-kube-test", "someone-else")
    ok(fake_kube, "apply", "-f", "-", input=other)

    def names(selector: str) -> list[str]:
        return ok(fake_kube, "get", "jobs", "-l", selector, "-o", "jsonpath={.items[*].metadata.name}").split()

    assert names(f"{MANAGED}=fake-kube-test") == ["gym-a", "gym-b", "gym-c"]
    assert names(f"{MANAGED}=fake-kube-test,nemo-gym/run-id=run-1") == ["gym-a", "gym-c"]
    assert names("nemo-gym/run-id in (run-2,run-9)") == ["gym-b"]
    assert names("nemo-gym/run-id!=run-1") == ["gym-b", "not-ours"]
    assert names("!nemo-gym/run-id") == ["not-ours"]
    assert ok(fake_kube, "get", "jobs", "--field-selector", "metadata.name=gym-b", "-o", "name") == "job.batch/gym-b\n"
    ok(fake_kube, "delete", "jobs", "-l", "nemo-gym/run-id=run-1")
    assert names(f"{MANAGED}=fake-kube-test") == ["gym-b"]


@pytest.mark.parametrize("fake_kube", [{"fail_image_pull": {"policy"}}], indirect=True)
def test_fake_kubelet_image_pull_failure_keeps_the_pod_pending(fake_kube):
    ok(
        fake_kube,
        "apply",
        "-f",
        "-",
        input=job_manifest("gym-pull", "echo never", sidecars=[http_sidecar(free_port())]),
    )
    jsonpath = (
        '{.items[0].status.phase} {.items[0].status.initContainerStatuses[?(@.name=="policy")].state.waiting.reason}'
    )
    # Until the Job controller has made the pod, the jsonpath has no item 0: kubectl fails, and we wait.
    wait_for(
        lambda: (
            fake_kube.kubectl("get", "pods", "-l", "job-name=gym-pull", "-o", f"jsonpath={jsonpath}").stdout
            == "Pending ImagePullBackOff"
        ),
        what="ImagePullBackOff",
    )
    line = job_state(fake_kube)["gym-pull"]
    assert "active=1 ready=0 start=20" in line and line.endswith("true=")
    logs = fake_kube.kubectl("logs", "job/gym-pull", "-c", "driver")
    assert logs.returncode == 1 and "is waiting to start" in logs.stderr
    assert fake_kube.kubelet.all_pids() == set()  # nothing ran


def test_emulated_api_server_refuses_what_a_real_one_refuses(fake_kube):
    fake_kube.kubelet.hold = True
    manifest = job_manifest("gym-x", "echo one")
    ok(fake_kube, "apply", "-f", "-", input=manifest)
    again = fake_kube.kubectl("create", "-f", "-", input=manifest)
    assert (
        again.returncode == 1
        and 'Error from server (AlreadyExists): error when creating "STDIN": jobs.batch "gym-x" already exists'
        in again.stderr
    )
    changed = fake_kube.kubectl("apply", "-f", "-", input=manifest.replace("echo one", "echo two"))
    assert changed.returncode == 1 and 'The Job "gym-x" is invalid: spec.template: Invalid value' in changed.stderr
    unknown = job_manifest("gym-y", "true").replace('"image": "nemo-gym:test"', '"image": "x", "bogusField": 1')
    strict = fake_kube.kubectl("apply", "-f", "-", input=unknown)
    assert (
        strict.returncode == 1
        and 'strict decoding error: unknown field "spec.template.spec.containers[0].bogusField"' in strict.stderr
    )
    bad_label = job_manifest("gym-z", "true", labels={"nemo-gym/run-id": "not a label"})
    refused = fake_kube.kubectl("apply", "-f", "-", input=bad_label)
    assert refused.returncode == 1 and 'metadata.labels: Invalid value: "not a label"' in refused.stderr
    assert ok(fake_kube, "get", "jobs", "-o", "name") == "job.batch/gym-x\n"


def test_fake_kubelet_kills_what_it_started_even_when_the_test_fails(tmp_path):
    pids: dict[str, int] = {}
    with pytest.raises(RuntimeError, match="the test failed"), running_fake_kube(tmp_path, grace=30.0) as fk:
        ok(
            fk,
            "apply",
            "-f",
            "-",
            input=job_manifest("gym-orphan", "trap '' TERM; sleep 300 & wait", sidecars=[sleeping_sidecar()]),
        )
        pids = wait_for(
            lambda: len(fk.kubelet.pids("default", "gym-orphan")) == 2 and fk.kubelet.pids("default", "gym-orphan")
        )
        raise RuntimeError("the test failed")
    assert pids and not any(alive(pid) for pid in pids.values())  # SIGTERM-proof driver included, no 30 s wait


# -- the pure helpers ---------------------------------------------------------------------------------------


def test_emulated_api_server_label_selector_semantics():
    labels = {"app": "gym", "tier": "eval"}
    assert match_labels(labels, "app=gym,tier==eval")
    assert match_labels(labels, "app in (gym, other),!missing,tier notin (train)")
    assert match_labels(labels, "missing!=x")  # an absent key is "not equal"
    assert not match_labels(labels, "app!=gym")
    assert not match_labels(labels, "tier in (train)")
    assert not match_labels(labels, "missing")


def test_emulated_api_server_strategic_merge_patch_merges_containers_by_name():
    live = {
        "spec": {
            "containers": [
                {"name": "driver", "image": "a", "env": [{"name": "X", "value": "1"}]},
                {"name": "b", "image": "b"},
            ],
            "volumes": [{"name": "v"}],
        }
    }
    patch = {
        "spec": {
            "$setElementOrder/containers": [{"name": "driver"}, {"name": "b"}],
            "containers": [
                {"name": "driver", "image": "a2", "env": [{"name": "Y", "value": "2"}]},
                {"name": "b", "$patch": "delete"},
            ],
            "volumes": None,
        }
    }
    assert strategic_merge_patch(live, patch) == {
        "spec": {
            "containers": [
                {"name": "driver", "image": "a2", "env": [{"name": "X", "value": "1"}, {"name": "Y", "value": "2"}]}
            ]
        }
    }
