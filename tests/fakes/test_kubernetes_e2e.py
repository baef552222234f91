"""`compute: {type: kubernetes}` end to end through the real kubectl, against an emulated API server.

No Kubernetes API server can run on this machine, so the server is kmock's emulator (extended in
fakes/fake_kube.py) and the kubelet is a fake that runs each container's command as a local process
(no images: a fake container runtime); the PVC is a directory of this machine at the same path. What
is real: our CLI, the manifests it applies, kubectl 1.29 and 1.33 talking HTTP to the server, the
job script and the step scripts running in the "containers", the stand-in vLLM and gym
(tests/standins) they start."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

pytest.importorskip("kmock", reason="kmock (test extra, Python >= 3.11) emulates the Kubernetes API server")
if shutil.which("kubectl") is None:
    pytest.skip("no kubectl on PATH: these tests drive the real client", allow_module_level=True)

from fakes.fake_kube import FakeKubeEnv, running_fake_kube  # noqa: E402

STANDINS = Path(__file__).resolve().parents[1] / "standins"
PATH = f"lit:{STANDINS}:/usr/local/bin:/usr/bin:/bin"
MANAGED = "app.kubernetes.io/managed-by=gym-orchestration"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def write_config(tmp_path: Path, benchmarks: dict, driver_env: dict | None = None, **compute) -> Path:
    config = {
        "services": {
            "policy": {
                "type": "vllm",
                "container": "vllm/vllm-openai:test",
                "model": "/m/tiny",
                "served_model_name": "tiny",
                "port": free_port(),
                "env": {"PATH": PATH},
            }
        },
        "compute": {"k8s": {"type": "kubernetes", "namespace": "evals", "pvc_name": "gym-results", **compute}},
        "driver": {
            "container": "nemo-gym:test",
            "policy_model": "policy",
            "benchmarks": benchmarks,
            "env": {"PATH": PATH, **(driver_env or {})},
        },
        "job": {"output_path": str(tmp_path / "pvc")},
        "otel": {"enabled": False},
    }
    path = tmp_path / "k8s.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def gym(fk: FakeKubeEnv, tmp_path: Path, *args: str, rc: int | None = 0) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **fk.env, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    proc = subprocess.run(
        [sys.executable, "-m", "nemo_gym.orchestration.cli.main", "eval", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert rc is None or proc.returncode == rc, f"gym eval {' '.join(args)}: {proc.returncode}\n{proc.stderr}"
    return proc


def states(fk: FakeKubeEnv, tmp_path: Path, run: str) -> dict[str, tuple[str, str]]:
    doc = json.loads(gym(fk, tmp_path, "status", run, "--json", rc=None).stdout)
    return {job["benchmark"]: (job["state"], job["detail"]) for job in doc["jobs"]}


def wait_for(fk: FakeKubeEnv, tmp_path: Path, run: str, done, timeout: float = 60) -> dict[str, tuple[str, str]]:
    """Status until ``done(states)``; every state seen on the way is kept in ``seen``."""
    deadline = time.monotonic() + timeout
    while True:
        now = states(fk, tmp_path, run)
        seen.update({(b, s) for b, (s, _) in now.items()})
        if done(now):
            return now
        if time.monotonic() > deadline:
            raise AssertionError(f"not done within {timeout}s: {now}")
        time.sleep(0.3)


seen: set[tuple[str, str]] = set()


def ended(now: dict[str, tuple[str, str]]) -> bool:
    return all(s in ("succeeded", "failed", "cancelled", "timed out") for s, _ in now.values())


@pytest.mark.parametrize("minor", ["29", "33"])
def test_submit_status_logs_and_results_through_the_real_kubectl(tmp_path, minor) -> None:
    seen.clear()
    with running_fake_kube(tmp_path / "kube", minor=minor, hold=True, max_pods=1) as fk:
        config = write_config(tmp_path, {"a": {"run": {"limit": 2}}, "b": {}})
        record = json.loads(gym(fk, tmp_path, "submit", "-c", str(config), "--json").stdout)
        [run] = record.get("runs", [record])
        run_id = run["gym_job_id"]
        assert run["executor"] == "kubernetes"
        names = {b["benchmark"]: b["job_id"] for b in run["benchmarks"]}
        listed = fk.kubectl("--namespace=evals", "get", "jobs", "-l", MANAGED, "-o", "name").stdout.split()
        assert sorted(listed) == sorted(f"job.batch/{n}" for n in names.values())
        # The kubelet holds every pod back: the Jobs wait, as on a full cluster.
        now = states(fk, tmp_path, run_id)
        assert {s for s, _ in now.values()} == {"queued"}, now
        assert all("waiting in Kubernetes" in d for _, d in now.values())
        fk.kubelet.hold = False
        final = wait_for(fk, tmp_path, run_id, ended)
        assert final == {b: ("succeeded", final[b][1]) for b in names}, final
        assert ("a", "running") in seen or ("a", "starting") in seen, seen
        # The job's own files on the "PVC", as under Slurm: the sidecar's log, the driver's, the samples.
        for b in run["benchmarks"]:
            job_dir = Path(b["job_dir"])
            assert (job_dir / "logs" / f"policy-{b['job_id']}.log").exists()
            assert (job_dir / "logs" / f"driver-{b['job_id']}.log").exists()
            assert (job_dir / "artifacts" / "rollouts.jsonl").exists()
        [driver] = [
            json.loads(p.read_text()) for p in Path(run["benchmarks"][0]["job_dir"], "standin").glob("gym-run-*.json")
        ]
        assert driver["policy_models"]["data"][0]["id"] == "tiny"
        results = json.loads(gym(fk, tmp_path, "results", run_id, "--json").stdout)
        assert results
        logs = gym(fk, tmp_path, "logs", run_id, "a").stdout
        assert "job finished with status 0" in logs
        # Each container's output is also its stdout, as kubectl logs shows it.
        pod = fk.kubelet.pod_name("evals", names["a"])
        shown = fk.kubectl("--namespace=evals", "logs", pod, "-c", "policy").stdout
        assert "step policy" in shown


def test_a_failed_benchmark_is_resubmitted_as_a_new_job_held_until_recorded(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("GYM_K8S_TEST_FAIL", "1")  # read by the driver in its container (runtime:)
    with running_fake_kube(tmp_path / "kube", minor="29") as fk:
        config = write_config(tmp_path, {"a": {}}, {"STANDIN_DRIVER_FAIL": "runtime:GYM_K8S_TEST_FAIL"})
        run = json.loads(gym(fk, tmp_path, "submit", "-c", str(config), "--json").stdout)
        [run] = run.get("runs", [run])
        run_id, first = run["gym_job_id"], run["benchmarks"][0]["job_id"]
        final = wait_for(fk, tmp_path, run_id, ended)
        assert final["a"][0] == "failed" and "driver failed" in final["a"][1], final
        monkeypatch.setenv("GYM_K8S_TEST_FAIL", "")
        out = gym(fk, tmp_path, "resubmit", run_id, rc=None)
        assert out.returncode == 0, out.stdout + out.stderr
        again = f"{first}-a2"
        job = fk.kube.job("evals", again)
        assert job is not None and job["spec"]["suspend"] is False
        final = wait_for(fk, tmp_path, run_id, ended)
        assert final["a"][0] == "succeeded", final
        doc = json.loads(gym(fk, tmp_path, "status", run_id, "--json").stdout)
        assert doc["jobs"][0]["job_id"] == again


def test_cancel_deletes_the_job_and_its_processes(tmp_path) -> None:
    with running_fake_kube(tmp_path / "kube", minor="33", grace=20) as fk:
        config = write_config(tmp_path, {"a": {}}, {"STANDIN_DRIVER_SECONDS": "lit:300"})
        run = json.loads(gym(fk, tmp_path, "submit", "-c", str(config), "--json").stdout)
        [run] = run.get("runs", [run])
        run_id, name = run["gym_job_id"], run["benchmarks"][0]["job_id"]
        wait_for(fk, tmp_path, run_id, lambda now: now["a"][0] == "running")
        pids = fk.kubelet.pids("evals", name)
        assert set(pids) == {"policy", "driver"}
        gym(fk, tmp_path, "cancel", run_id)
        final = wait_for(fk, tmp_path, run_id, ended)
        assert final["a"][0] == "cancelled", final
        assert fk.kube.job("evals", name) is None
        deadline = time.monotonic() + 10
        while any(_alive(pid) for pid in pids.values()) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not any(_alive(pid) for pid in pids.values())
        state = Path(run["benchmarks"][0]["job_dir"], ".gym", name, "cause").read_text().strip()
        assert state == "cancelled"


def test_a_job_past_its_deadline_is_timed_out_and_says_walltime(tmp_path) -> None:
    """active_deadline_seconds is the Job's walltime: Kubernetes ends it (DeadlineExceeded), the job
    script tells its TERM was the deadline's, and status says timed out."""
    with running_fake_kube(tmp_path / "kube", minor="33", grace=20) as fk:
        config = write_config(tmp_path, {"a": {}}, {"STANDIN_DRIVER_SECONDS": "lit:300"}, active_deadline_seconds=4)
        [run] = (lambda r: r.get("runs", [r]))(
            json.loads(gym(fk, tmp_path, "submit", "-c", str(config), "--json").stdout)
        )
        final = wait_for(fk, tmp_path, run["gym_job_id"], ended, timeout=60)
        assert final["a"][0] == "timed out", final
        job = run["benchmarks"][0]
        assert Path(job["job_dir"], ".gym", job["job_id"], "cause").read_text().strip() == "walltime"


def test_a_benchmark_the_cluster_refuses_is_recorded_while_the_others_run(tmp_path) -> None:
    """A site's admission policy refuses one benchmark's Job: it is recorded with the server's words,
    the other is queued and runs, and the command says which failed."""

    def no_b(obj: dict) -> str | None:
        labels = obj.get("metadata", {}).get("labels") or {}
        return "benchmark b is not allowed here" if labels.get("gym-orchestration/benchmark") == "b" else None

    with running_fake_kube(tmp_path / "kube", minor="29") as fk:
        fk.kube.call(lambda kube: setattr(kube, "deny", no_b))
        config = write_config(tmp_path, {"a": {}, "b": {}})
        proc = gym(fk, tmp_path, "submit", "-c", str(config), rc=1)
        assert "denied the request: benchmark b is not allowed here" in proc.stdout + proc.stderr
        assert "Traceback" not in proc.stderr
        listed = fk.kubectl("--namespace=evals", "get", "jobs", "-o", "name").stdout.split()
        assert len(listed) == 1 and listed[0].endswith("-a")
        final = wait_for(fk, tmp_path, "--last", lambda now: now["a"][0] in ("succeeded", "failed"))
        assert final["a"][0] == "succeeded", final
        assert final["b"][0] == "failed" and "kubectl apply refused: Error from server (Forbidden)" in final["b"][1]


def test_an_unreachable_api_server_refuses_every_benchmark_with_kubectls_words(tmp_path) -> None:
    with running_fake_kube(tmp_path / "kube", minor="29") as fk:
        env = fk.env
    # The server is gone: kubectl's own refusal, per benchmark, and nothing left half-queued.
    config = write_config(tmp_path, {"a": {}, "b": {}})
    proc = subprocess.run(
        [sys.executable, "-m", "nemo_gym.orchestration.cli.main", "eval", "submit", "-c", str(config)],
        capture_output=True,
        text=True,
        env={**os.environ, **env, "XDG_CACHE_HOME": str(tmp_path / "cache")},
        timeout=180,
    )
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr
    assert "connect" in (proc.stdout + proc.stderr).lower()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True
