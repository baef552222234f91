"""gym eval watch on the real local Slurm cluster with the stand-ins: checkpoints written over time
(two ready only later, one whose model server goes down once mid-run: an infrastructure cause),
a watcher killed and started again half-way, --max-pending 2 held against what squeue says, every
checkpoint evaluated once (the one that went down twice), the sweep's results in step order, and
each checkpoint's MLflow run with its metrics at its training step."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml
from mlflow_server import mlflow_runs

pytestmark = [pytest.mark.slow, pytest.mark.cluster]

STEPS = (100, 200, 300, 400, 500)
ACCURACY = {100: 0.2, 200: 0.4, 300: 0.6, 400: 0.8, 500: 1.0}


def write_checkpoint(root: Path, step: int, ready: bool, die_once: float | None = None) -> Path:
    path = root / f"step_{step}"
    path.mkdir()
    (path / "standin-accuracy").write_text(f"{ACCURACY[step]}\n")
    if die_once is not None:
        (path / "standin-die-once").write_text(f"{die_once}\n")
    if ready:
        (path / "DONE").write_text("")
    return path


class QueueWatch(threading.Thread):
    """The most jobs under ``output`` squeue showed at once, sampled until stopped."""

    def __init__(self, output: Path) -> None:
        super().__init__(daemon=True)
        self.output = str(output)
        self.most = 0
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.is_set():
            out = subprocess.run(["squeue", "-h", "-o", "%Z"], capture_output=True, text=True).stdout
            self.most = max(self.most, sum(1 for line in out.splitlines() if line.startswith(self.output)))
            time.sleep(0.2)


def test_watch_evaluates_each_checkpoint_once_in_step_order_within_its_pending_cap(
    cluster_run,
    reachable_server,
    backend_python,
    mlflow_server,
) -> None:
    root = cluster_run.tmp_path / "training"
    root.mkdir()
    experiment = f"watch-{cluster_run.tmp_path.name}"
    config = cluster_run.config(
        services={"policy": {"type": "vllm", "model": "/placeholder", "served_model_name": "tiny"}},
        benchmarks={"math": {"run": {"standin_rollouts": 3, "standin_rollout_seconds": 1}}},
        driver={"policy_model": "policy"},
    )
    config["job"]["export"] = {"mlflow": {"tracking_uri": reachable_server.url, "experiment": experiment}}
    reachable_server.start()
    config_path = cluster_run.tmp_path / "watch.yaml"
    config_path.write_text(yaml.safe_dump(config, sort_keys=False))
    env = {**os.environ, "XDG_CACHE_HOME": str(cluster_run.tmp_path / "cache")}
    log = cluster_run.tmp_path / "watch.log"

    def start_watcher() -> subprocess.Popen:
        cmd = [sys.executable, "-m", "nemo_gym.orchestration.cli.main", "eval", "watch", str(root), "-c"]
        cmd += [str(config_path), "--ready", "DONE", "--every", "1", "--max-pending", "2"]
        return subprocess.Popen(cmd, stdout=log.open("a"), stderr=subprocess.STDOUT, env=env)

    def sweep() -> dict:
        [path] = list((cluster_run.tmp_path / "cache" / "nemo-gym" / "jobs").glob("*.sweep.json"))
        return json.loads(path.read_text())

    def phases() -> dict[int, str]:
        try:
            return {c["step"]: c["phase"] for c in sweep()["watch"]["checkpoints"]}
        except (ValueError, FileNotFoundError):
            return {}

    def wait_until(done, timeout: float = 240) -> dict[int, str]:
        deadline = time.monotonic() + timeout
        while not done(now := phases()):
            assert time.monotonic() < deadline, f"{now}\n{log.read_text()}"
            time.sleep(0.5)
        return now

    queue = QueueWatch(cluster_run.output)
    queue.start()
    write_checkpoint(root, 100, ready=True)
    write_checkpoint(root, 200, ready=True, die_once=1.0)
    write_checkpoint(root, 300, ready=False)
    write_checkpoint(root, 400, ready=False)
    write_checkpoint(root, 500, ready=True)
    watcher = start_watcher()
    try:
        wait_until(lambda p: sum(1 for s in p.values() if s in ("queued", "running", "done", "failed")) >= 2)
        # Killed half-way (no chance to tidy up), then started again: it goes on where it was.
        watcher.send_signal(signal.SIGKILL)
        watcher.wait()
        time.sleep(2)
        (root / "step_300" / "DONE").write_text("")
        watcher = start_watcher()
        time.sleep(3)
        (root / "step_400" / "DONE").write_text("")
        final = wait_until(lambda p: len(p) == 5 and all(s in ("done", "failed", "unknown") for s in p.values()))
    finally:
        watcher.send_signal(signal.SIGINT)
        try:
            watcher.wait(timeout=30)
        except subprocess.TimeoutExpired:
            watcher.kill()
        queue.done.set()
        queue.join()
    assert final == dict.fromkeys(STEPS, "done"), log.read_text()
    assert queue.most <= 2, f"{queue.most} of its jobs were in the queue at once"
    record = sweep()
    attempts = {c["step"]: c["attempts"] for c in record["watch"]["checkpoints"]}
    assert attempts == {100: 1, 200: 2, 300: 1, 400: 1, 500: 1}, log.read_text()
    # Each checkpoint one run (the one that went down: two jobs in it), in step order.
    runs = record["runs"]
    assert [Path(r["values"]["services.policy.model"]).name for r in runs] == [f"step_{s}" for s in STEPS]
    status = cluster_run.cli("status", record["sweep_id"], "--json")
    assert status.returncode == 0, status.stderr
    jobs = [run["jobs"][0] for run in json.loads(status.stdout)["runs"]]
    assert [len(job["attempt_history"]) for job in jobs] == [1, 2, 1, 1, 1]
    assert jobs[1]["attempt_history"][0]["cause"] == "service-died"
    results = cluster_run.cli("results", record["sweep_id"])
    assert results.returncode == 0, results.stdout + results.stderr
    rows = [line.split() for line in results.stdout.splitlines() if "/step_" in line.split(" ")[0]]
    assert [Path(row[0]).name for row in rows] == [f"step_{s}" for s in STEPS]
    assert [float(row[1]) for row in rows] == pytest.approx([ACCURACY[s] for s in STEPS], abs=0.34)
    # Each checkpoint's MLflow run, its metrics at its training step: MLflow draws the curve.
    for run, step in zip(runs, STEPS):
        [logged] = mlflow_runs(backend_python, mlflow_server, experiment, f"{run['run_id']}/math")
        assert logged["steps"] == [step], logged
