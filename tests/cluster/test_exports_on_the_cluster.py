"""Exports run by the jobs on the real local cluster into a real `mlflow server` on this machine,
which the nodes reach at its cluster address (scripts/local-slurm puts this machine on the cluster
network, as a login node is): a server down during the job, and a job killed by its walltime in
the middle of an export and resumed — each export exactly once in MLflow, no credential in a file."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from conftest import job_fields
from mlflow_server import mlflow_runs

pytestmark = [pytest.mark.slow, pytest.mark.cluster]

TOKEN = "mlflow-token-CLUSTER-SENTINEL-41"


def no_credential_in(run_dir: str) -> list[Path]:
    return [p for p in Path(run_dir).rglob("*") if p.is_file() and TOKEN.encode() in p.read_bytes()]


def test_a_server_down_during_the_job_is_exported_later_by_gym_eval_export(
    cluster_run, reachable_server, backend_python, mlflow_server, monkeypatch
) -> None:
    monkeypatch.setenv("MLFLOW_TRACKING_TOKEN", TOKEN)
    experiment = f"cluster-{cluster_run.tmp_path.name}"
    config = cluster_run.config(services={"policy": {"type": "vllm", "model": "m"}}, driver={"policy_model": "policy"})
    config["job"]["export"] = {"mlflow": {"tracking_uri": reachable_server.url, "experiment": experiment}}
    [job] = cluster_run.submit(config)["benchmarks"]
    assert cluster_run.wait(job["job_id"])["JobState"] == "COMPLETED"
    status = cluster_run.status()["bench"]
    assert status["state"] == "succeeded" and "export mlflow failed" in status["detail"], status
    reachable_server.start()
    later = cluster_run.cli("export", "--last")
    assert later.returncode == 0 and "export mlflow: done" in later.stdout, later.stdout + later.stderr
    [run] = mlflow_runs(backend_python, mlflow_server, experiment, f"{Path(job['job_dir']).parent.name}/bench")
    assert run["status"] == "FINISHED" and "rollouts.jsonl" in run["artifacts"]
    assert no_credential_in(str(Path(job["job_dir"]).parent)) == [] and TOKEN not in later.stdout + later.stderr


def test_a_job_killed_mid_export_is_resumed_and_exports_exactly_once(
    cluster_run, reachable_server, backend_python, mlflow_server, monkeypatch
) -> None:
    """The first job's export hangs on its artifact upload until the 1-minute walltime kills the
    job; the job queued behind it resumes, finds the MLflow run the first one made, and finishes it."""
    monkeypatch.setenv("MLFLOW_TRACKING_TOKEN", TOKEN)
    experiment = f"cluster-kill-{cluster_run.tmp_path.name}"
    reachable_server.hold_uploads = True
    reachable_server.start()
    config = cluster_run.config(
        services={"policy": {"type": "vllm", "model": "m"}},
        driver={"policy_model": "policy"},
        benchmarks={"bench": {"resumable": True}},
        compute={"walltime": "1"},
    )
    config["job"]["export"] = {"mlflow": {"tracking_uri": reachable_server.url, "experiment": experiment}}
    [job] = cluster_run.submit(config)["benchmarks"]
    receipt = Path(job["job_dir"], ".gym", "exports", "mlflow.json")
    deadline = time.monotonic() + 60
    while not (
        receipt.exists() and '"running"' in receipt.read_text() and '"backend_run_id": ""' not in receipt.read_text()
    ):
        assert time.monotonic() < deadline, "the export never got as far as its run"
        time.sleep(0.5)
    # The run is made before the upload: wait until the upload itself is held, or it may get through.
    while not reachable_server.uploads_held:
        assert time.monotonic() < deadline, "the export never got as far as its upload"
        time.sleep(0.2)
    reachable_server.hold_uploads = False  # the server answers again; the walltime still cuts this job
    final = cluster_run.wait_for("bench", {"succeeded", "failed", "cancelled", "timed out", "unknown"}, timeout=240)
    cluster_run.job_ids += final["chain"][1:]
    assert final["state"] == "succeeded" and len(final["chain"]) == 2, final
    assert job_fields(final["chain"][0])["JobState"] == "TIMEOUT"
    assert final["exports"]["mlflow"]["state"] == "done", final
    [run] = mlflow_runs(backend_python, mlflow_server, experiment, f"{Path(job['job_dir']).parent.name}/bench")
    assert run["status"] == "FINISHED" and "rollouts.jsonl" in run["artifacts"]
    assert no_credential_in(str(Path(job["job_dir"]).parent)) == []
