"""Fixtures for tests on the real local Slurm cluster (scripts/local-slurm)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
STANDINS = REPO / "tests" / "standins"
STANDIN_PATH = f"lit:{STANDINS}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
FINAL_STATES = {
    "COMPLETED",
    "FAILED",
    "CANCELLED",
    "TIMEOUT",
    "NODE_FAIL",
    "OUT_OF_MEMORY",
    "PREEMPTED",
    "BOOT_FAIL",
    "DEADLINE",
}


class ClusterRun:
    """Submit a config through the real CLI and wait for its jobs."""

    def __init__(self, tmp_path: Path):
        self.tmp_path = tmp_path
        self.output = tmp_path / "runs"
        self.output.mkdir()
        self.job_ids: list[str] = []

    def config(
        self,
        services: dict,
        pools: dict | None = None,
        benchmarks: dict | None = None,
        driver: dict | None = None,
        compute: dict | None = None,
    ) -> dict[str, Any]:
        for service in services.values():
            service.setdefault("env", {}).setdefault("PATH", STANDIN_PATH)
            service.setdefault("container", "standin:latest")
        drv = {"benchmarks": benchmarks or {"bench": {}}, "env": {"PATH": STANDIN_PATH}, **(driver or {})}
        return {
            "services": services,
            # By default a job takes all 4 GPUs of one node, so that jobs never share a node
            # (and a model port) unless a test asks for it.
            "compute": {
                "local": {
                    "type": "slurm",
                    "account": "acct",
                    "walltime": "00:05:00",
                    "node_pools": pools or {"gpu": {"partition": "debug", "gpus_per_node": 4}},
                    **(compute or {}),
                }
            },
            "driver": drv,
            "job": {"output_path": str(self.output)},
            "otel": {"enabled": False},
        }

    def submit(self, config: dict[str, Any], *extra: str, expect_rc: int = 0, path_prefix: str = "") -> dict[str, Any]:
        """Submit through the CLI; ``path_prefix`` goes in front of PATH for the job's own shell
        (what sbatch passes on), e.g. the stand-in apptainer."""
        path = self.tmp_path / "config.yaml"
        path.write_text(yaml.safe_dump(config, sort_keys=False))
        env = {**os.environ, "XDG_CACHE_HOME": str(self.tmp_path / "cache")}
        if path_prefix:
            env["PATH"] = f"{path_prefix}:{env['PATH']}"
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "nemo_gym.orchestration.cli.main",
                "eval",
                "submit",
                "-c",
                str(path),
                "--json",
                *extra,
            ],
            capture_output=True,
            text=True,
            env=env,
        )
        assert proc.returncode == expect_rc, proc.stderr
        self.last_stderr = proc.stderr
        record = json.loads(proc.stdout)
        self.job_ids += [u["job_id"] for b in record["benchmarks"] for u in b.get("shards") or [b] if u["job_id"]]
        return record

    def cli(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
        """Run `gym eval ARGS` with the same local index as submit."""
        return subprocess.run(
            [sys.executable, "-m", "nemo_gym.orchestration.cli.main", "eval", *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            env={**os.environ, "XDG_CACHE_HOME": str(self.tmp_path / "cache")},
        )

    def status(self) -> dict[str, dict]:
        proc = self.cli("status", "--last", "--json")
        assert proc.returncode == 0, proc.stderr
        return {j["benchmark"]: j for j in json.loads(proc.stdout)["jobs"]}

    def wait_for(self, benchmark: str, states: set[str], timeout: float = 60) -> dict:
        deadline = time.monotonic() + timeout
        while True:
            job = self.status()[benchmark]
            if job["state"] in states:
                return job
            if time.monotonic() > deadline:
                raise AssertionError(f"{benchmark} never reached {states}: {job}")
            time.sleep(0.3)

    def wait(self, job_id: str, timeout: float = 120) -> dict[str, str]:
        deadline = time.monotonic() + timeout
        while True:
            fields = job_fields(job_id)
            if fields.get("JobState") in FINAL_STATES:
                return fields
            if time.monotonic() > deadline:
                subprocess.run(["scancel", job_id])
                raise AssertionError(f"job {job_id} did not end within {timeout}s: {fields}")
            time.sleep(0.3)


def wait_for_rows(job_dir: str | Path, rows: int, timeout: float = 90) -> Path:
    """The benchmark's rollouts file once it holds ``rows`` lines (a job part way through)."""
    rollouts = Path(job_dir, "artifacts", "rollouts.jsonl")
    deadline = time.monotonic() + timeout
    while not rollouts.exists() or len(rollouts.read_text().splitlines()) < rows:
        assert time.monotonic() < deadline, f"{rollouts} never held {rows} rows"
        time.sleep(0.2)
    return rollouts


def job_fields(job_id: str) -> dict[str, str]:
    out = subprocess.run(["scontrol", "show", "job", "-o", job_id], capture_output=True, text=True).stdout
    fields = {}
    for token in out.split():
        if "=" in token:
            key, value = token.split("=", 1)
            fields[key] = value
    return fields


def standin_records(job_dir: str | Path, tool: str) -> list[dict[str, Any]]:
    return [json.loads(p.read_text()) for p in sorted(Path(job_dir, "standin").glob(f"{tool}-*.json"))]


def state_of(job_dir: str | Path) -> dict[str, str]:
    [state] = list(Path(job_dir, ".gym").glob("*/state"))
    return dict(line.split("=", 1) for line in state.read_text().splitlines() if "=" in line)


@pytest.fixture
def cluster_run(slurm, tmp_path: Path):
    run = ClusterRun(tmp_path)
    yield run
    # A test that failed half-way must not leave jobs holding nodes (and ports) for the next.
    if run.job_ids:
        subprocess.run(["scancel", *run.job_ids], capture_output=True)


@pytest.fixture
def router_bin() -> str:
    """Where the real vllm-router is (the prefill/decode tests put it in front of stand-in tiers)."""
    path = os.environ.get("GYM_ROUTER_BIN", "")
    if not Path(path, "vllm-router").exists():
        if os.environ.get("GYM_REQUIRE_CLUSTER") == "1":
            pytest.fail("GYM_ROUTER_BIN is not set (scripts/test sets it: scripts/envs/router-env.sh)")
        pytest.skip('no real vllm-router (eval "$(scripts/envs/router-env.sh)")')
    return path


@pytest.fixture
def ssh_env(slurm, tmp_path):
    """(environment, log) for `gym eval` over the loopback sshd, every ssh call it makes recorded in log."""
    config = os.environ.get("GYM_TEST_SSH_CONFIG")
    if not config:
        if os.environ.get("GYM_REQUIRE_CLUSTER") == "1":
            pytest.fail("the loopback sshd is not up (scripts/local-sshd up)")
        pytest.skip("no loopback sshd (scripts/local-sshd up)")
    # A recording wrapper in front of the real ssh, to count connections and round trips.
    shim = tmp_path / "shim"
    shim.mkdir()
    log = tmp_path / "ssh-calls.log"
    (shim / "ssh").write_text(f'#!/bin/bash\nprintf "%s\\n" "$*" >>{log}\nexec /usr/bin/ssh "$@"\n')
    (shim / "ssh").chmod(0o755)
    env = {
        **os.environ,
        "GYM_SSH_OPTIONS": f"-F {config}",
        "PATH": f"{shim}:{os.environ['PATH']}",
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
    }
    return env, log


@pytest.fixture
def reachable_server(mlflow_server, slurm):
    """The MLflow server, as the nodes (and this machine) reach it; stopped and started by the test."""
    from mlflow_server import Forwarder

    host = os.environ.get("LOCAL_SLURM_HOST_ADDRESS", "")
    if not host:
        pytest.fail("LOCAL_SLURM_HOST_ADDRESS is not set (scripts/local-slurm env sets it)")
    forwarder = Forwarder(int(mlflow_server.url.rsplit(":", 1)[1]), host=host)
    yield forwarder
    forwarder.stop()


def left_in_squeue(ids: set[str], within_seconds: float = 60) -> set[str]:
    """Which of ``ids`` squeue still lists after at most ``within_seconds``: scancel only asks, and a
    cancelled job stays "completing" while its TERM handler stops its steps and frees its ports."""
    deadline = time.monotonic() + within_seconds
    while True:
        listed = subprocess.run(["squeue", "-h", "-r", "-o", "%i"], capture_output=True, text=True).stdout.split()
        left = ids & set(listed)
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(1)
