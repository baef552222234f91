"""Exports run by the job itself, on this machine (local mode, recording stand-ins for the model and
the driver), into a real ``mlflow server`` and a table: once each, a failure shown in status but
never the benchmark's state, and `gym eval export` finishing what the job could not."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from mlflow_server import Forwarder, mlflow_runs
from test_local_runs import submit

pytestmark = pytest.mark.slow

TOKEN = "mlflow-token-LOCAL-SENTINEL-77"


def cli(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "nemo_gym.orchestration.cli.main", "eval", *args],
        capture_output=True,
        text=True,
        env={**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache"), **env},
        timeout=300,
    )


def final_status(tmp_path: Path) -> dict:
    deadline = time.monotonic() + 120
    while True:
        status = json.loads(cli(tmp_path, "status", "--last", "--json").stdout)
        [job] = status["jobs"]
        if job["state"] not in ("queued", "starting", "running"):
            return job
        assert time.monotonic() < deadline, job
        time.sleep(0.5)


def test_the_job_exports_once_a_down_server_is_retried_by_gym_eval_export(
    backend_python, mlflow_server, tmp_path, monkeypatch
) -> None:
    monkeypatch.setenv("MLFLOW_TRACKING_TOKEN", TOKEN)  # the submitting shell's credential
    forwarder = Forwarder(int(mlflow_server.url.rsplit(":", 1)[1]))  # "the server", down for now
    experiment = f"local-{tmp_path.name}"
    table = tmp_path / "table"
    record = submit(
        tmp_path,
        {"policy": {"type": "vllm", "model": "/m/step-100", "served_model_name": "ckpt", "port": 18241}},
        job={
            "export": {
                "mlflow": {"tracking_uri": f"http://127.0.0.1:{forwarder.port}", "experiment": experiment},
                "table": {"dir": str(table)},
            }
        },
    )
    job = final_status(tmp_path)
    assert job["state"] == "succeeded", job  # an export failing never fails the benchmark
    assert "export mlflow failed" in job["detail"] and job["exports"]["mlflow"]["state"] == "failed"
    assert job["exports"]["table"]["state"] == "done"
    [row] = list(csv.DictReader((table / "results.csv").open()))
    assert (row["run_id"], row["benchmark"], row["state"]) == (record["gym_job_id"], "bench", "succeeded")

    forwarder.start()  # the server is back
    try:
        retried = cli(tmp_path, "export", "--last")
        assert retried.returncode == 0, retried.stdout + retried.stderr
        assert "export mlflow: done" in retried.stdout and "export table: done already" in retried.stdout
        again = cli(tmp_path, "export", "--last", "--to", "mlflow", "--force")  # forced: the same run again
        assert again.returncode == 0, again.stderr
    finally:
        forwarder.stop()
    key = f"{record['gym_job_id']}/bench"
    [run] = mlflow_runs(backend_python, mlflow_server, experiment, key)  # exactly one run, whatever was retried
    assert run["status"] == "FINISHED" and run["tags"]["gym.state"] == "succeeded"
    assert run["params"]["services.policy.model"] == "/m/step-100"
    assert "rollouts.jsonl" in run["artifacts"]
    assert cli(tmp_path, "status", "--last", "--json").stdout.count('"state": "done"') == 2
    run_dir = Path(record["run_dir"])
    leaked = [p for p in run_dir.rglob("*") if p.is_file() and TOKEN.encode() in p.read_bytes()]
    assert leaked == [] and TOKEN not in retried.stdout + retried.stderr
