"""A real ``mlflow server`` for the tests (session-scoped fixtures in tests/conftest.py) and MLflow's own
client to read back what was exported. Needs the environment scripts/envs/mlflow-env.sh builds, named
by GYM_MLFLOW_PYTHON; skipped without it (a failure under scripts/test, GYM_REQUIRE_CLUSTER=1)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

SERVER_START_TIMEOUT = 180


def _unavailable(reason: str) -> None:
    # Under scripts/test (and CI) the environment is built first: missing it is a failure.
    if os.environ.get("GYM_REQUIRE_CLUSTER") == "1":
        pytest.fail(reason)
    pytest.skip(reason)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _stop_group(proc: subprocess.Popen[Any], timeout: float = 15) -> None:
    """End a process we started in its own session, and its process group."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait(10)


def backend_python() -> str:
    python = os.environ.get("GYM_MLFLOW_PYTHON", "")
    if not python:
        _unavailable("GYM_MLFLOW_PYTHON is not set: no Python with mlflow and wandb (scripts/envs/mlflow-env.sh)")
    probe = subprocess.run([python, "-c", "import mlflow, wandb"], capture_output=True, text=True)
    if probe.returncode != 0:
        _unavailable(f"mlflow/wandb not importable by GYM_MLFLOW_PYTHON={python}: {probe.stderr.strip()[-200:]}")
    return python


class Server:
    def __init__(self, url: str, data: Path, started_in: float) -> None:
        self.url = url
        self.data = data
        self.started_in = started_in


def mlflow_server(backend_python: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """``mlflow server`` with a SQLite store; artifacts through its proxy (``mlflow-artifacts:/``,
    the default when no --default-artifact-root is given) into a directory of the session's."""
    data = tmp_path_factory.mktemp("mlflow")
    port = _free_port()
    mlflow = str(Path(backend_python).with_name("mlflow"))
    # The nodes reach this machine at its cluster address, which MLflow's Host guard must allow.
    allowed = ",".join(
        f"{h},{h}:*" for h in ("localhost", "127.0.0.1", os.environ.get("LOCAL_SLURM_HOST_ADDRESS")) if h
    )
    argv = [
        mlflow,
        "server",
        "--backend-store-uri",
        f"sqlite:///{data}/mlflow.db",
        "--artifacts-destination",
        str(data / "artifacts"),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--workers",
        "1",
        "--allowed-hosts",
        allowed,
    ]
    log = open(data / "server.log", "w")  # noqa: SIM115 - the server writes it until the session ends
    started = time.monotonic()
    proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, cwd=data)
    url = f"http://127.0.0.1:{port}"
    try:
        while True:
            try:
                with urllib.request.urlopen(f"{url}/health", timeout=2) as resp:
                    if resp.status == 200:
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() - started > SERVER_START_TIMEOUT:
                pytest.fail(f"mlflow server did not start: {(data / 'server.log').read_text()[-2000:]}")
            time.sleep(0.25)
        yield Server(url, data, time.monotonic() - started)
    finally:
        _stop_group(proc)
        log.close()


READ_MLFLOW = r"""
import hashlib, json, sys, tempfile
from mlflow.tracking import MlflowClient
url, experiment, key = sys.argv[1:4]
client = MlflowClient(url)
exp = client.get_experiment_by_name(experiment)
runs = client.search_runs([exp.experiment_id], f"tags.`gym.export_key` = '{key}'") if exp else []
out = []
for run in runs:
    artifacts = {}
    for info in client.list_artifacts(run.info.run_id):
        path = client.download_artifacts(run.info.run_id, info.path, tempfile.mkdtemp())
        artifacts[info.path] = hashlib.sha256(open(path, "rb").read()).hexdigest()
    out.append({
        "run_id": run.info.run_id, "status": run.info.status, "run_name": run.info.run_name,
        "params": run.data.params, "metrics": run.data.metrics, "tags": run.data.tags, "artifacts": artifacts,
        "history": {k: len(client.get_metric_history(run.info.run_id, k)) for k in ("mean/reward", "gym/samples_written")},
        "steps": sorted({m.step for m in client.get_metric_history(run.info.run_id, "mean/reward")}),
    })
print(json.dumps(out))
"""


def mlflow_runs(python: str, server: Server, experiment: str, key: str) -> list[dict[str, Any]]:
    """The runs of an export key (``<run id>/<benchmark>``), read back with MLflow's own client."""
    done = subprocess.run(
        [python, "-c", READ_MLFLOW, server.url, experiment, key], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return list(json.loads(done.stdout.splitlines()[-1]))


class Forwarder:
    """A TCP forwarder on a fixed port to the real server: "the server" is down while it is
    stopped (connection refused), goes down mid-export when it stops accepting after ``limit``
    connections (urllib opens one per request), and with ``hold_uploads`` never answers an
    artifact upload (a PUT), so an export hangs there until whatever runs it is killed.
    ``host``: where it listens (the cluster's nodes reach this machine at its cluster address)."""

    def __init__(self, target_port: int, host: str = "127.0.0.1") -> None:
        self.host = host
        self.port = _free_port()
        self.target_port = target_port
        self.hold_uploads = False
        self._listener: socket.socket | None = None
        self._threads: list[threading.Thread] = []
        self._held: list[socket.socket] = []

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def uploads_held(self) -> int:
        """How many artifact uploads it has accepted and never answered."""
        return len(self._held)

    def start(self, limit: int | None = None) -> None:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((self.host, self.port))
        listener.listen(16)
        self._listener = listener
        thread = threading.Thread(target=self._accept, args=(listener, limit), daemon=True)
        thread.start()
        self._threads.append(thread)

    def stop(self) -> None:
        if self._listener is not None:
            self._listener.close()
            self._listener = None

    def _accept(self, listener: socket.socket, limit: int | None) -> None:
        served = 0
        while limit is None or served < limit:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            served += 1
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()
        listener.close()  # the server "goes down": further connections are refused

    def _serve(self, client: socket.socket) -> None:
        first = client.recv(65536)
        if self.hold_uploads and first.startswith(b"PUT "):
            self._held.append(client)  # accepted, never answered
            return
        upstream = socket.create_connection(("127.0.0.1", self.target_port))
        upstream.sendall(first)
        for a, b in ((client, upstream), (upstream, client)):
            threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
