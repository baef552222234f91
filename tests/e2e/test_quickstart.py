"""The quickstart for real: `vllm serve` (CPU build) with the tiny locally built model, and NeMo
Gym's `gym eval run` on the offline answer-judge benchmark — locally and on the Slurm cluster.
Needs the environments of scripts/setup-envs (scripts/test builds them)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
ENVS = Path(os.environ.get("GYM_ENVS_DIR", Path.home() / ".cache" / "gym-orchestration" / "envs"))

pytestmark = [pytest.mark.slow, pytest.mark.e2e]


@pytest.fixture(scope="module")
def envs() -> Path:
    ready = all((ENVS / part / ".setup-envs-done").exists() for part in ("vllm", "gym", "models/tiny-llama"))
    if not ready:
        if os.environ.get("GYM_REQUIRE_CLUSTER") == "1":
            pytest.fail(f"the model and driver environments are missing under {ENVS} (scripts/setup-envs)")
        pytest.skip(f"no environments under {ENVS} (run scripts/setup-envs)")
    return ENVS


def gym(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "GYM_ENVS_DIR": str(ENVS), "GYM_RUNS_DIR": str(tmp_path / "runs"),
           "XDG_CACHE_HOME": str(tmp_path / "cache")}  # fmt: skip
    return subprocess.run([sys.executable, "-m", "nemo_gym.orchestration.cli.main", "eval", *args],
                          capture_output=True, text=True, env=env, timeout=900)  # fmt: skip


def run_quickstart(tmp_path: Path, config: str, *overrides: str) -> tuple[dict, dict]:
    submitted = gym(tmp_path, "submit", "-c", str(REPO / "examples" / config), "--json", *overrides)
    assert submitted.returncode == 0, submitted.stderr
    record = json.loads(submitted.stdout)
    watched = gym(tmp_path, "status", record["gym_job_id"], "--watch", "--json", "--interval", "1")
    return record, json.loads(watched.stdout)


def assert_real_results(record: dict, status: dict) -> None:
    [job] = status["jobs"]
    job_dir = Path(job["job_dir"])
    assert job["state"] == "succeeded", (job_dir / f"slurm-{job['job_id']}.out").read_text()
    rollouts = [json.loads(line) for line in (job_dir / "artifacts" / "rollouts.jsonl").read_text().splitlines()]
    assert len(rollouts) == 12  # every answer-judge task
    assert all("reward" in r and isinstance(r["reward"], (int, float)) for r in rollouts)
    assert sorted(r["_ng_task_index"] for r in rollouts) == list(range(12))
    metrics = json.loads((job_dir / "artifacts" / "rollouts_aggregate_metrics.json").read_text())
    assert "mean/reward" in metrics[0]["key_metrics"]
    logs = {p.name for p in (job_dir / "logs").iterdir()}
    assert {f"policy-{job['job_id']}.log", f"driver-{job['job_id']}.log"} <= logs
    assert "Application startup complete" in (job_dir / "logs" / f"policy-{job['job_id']}.log").read_text()


def test_quickstart_locally(envs, tmp_path) -> None:
    record, status = run_quickstart(tmp_path, "quickstart.yaml")
    assert record["executor"] == "local"
    assert_real_results(record, status)
    results = gym(tmp_path, "results", record["gym_job_id"])
    assert results.returncode == 0, results.stdout + results.stderr
    assert "answer-judge  succeeded  12" in results.stdout and "mean/reward=" in results.stdout


def test_quickstart_on_the_slurm_cluster(envs, slurm, tmp_path) -> None:
    record, status = run_quickstart(tmp_path, "quickstart-slurm.yaml")
    assert record["executor"] == "slurm"
    assert_real_results(record, status)


def test_bad_model_path_fails_fast_naming_the_service(envs, tmp_path) -> None:
    start = time.monotonic()
    record, status = run_quickstart(tmp_path, "quickstart.yaml", "services.policy.model=/nonexistent/model")
    [job] = status["jobs"]
    assert job["state"] == "failed"
    assert job["detail"].startswith("service policy died")
    assert time.monotonic() - start < 120  # not the 600 s health timeout
    out = (Path(job["job_dir"]) / f"slurm-{job['job_id']}.out").read_text()
    assert "service policy died" in out and "/nonexistent/model" in out
