"""The exports against the real backends: a real ``mlflow server`` on loopback (SQLite store, the
artifact proxy it serves by default), the real ``wandb`` library offline, and the table's files.

The exports run as a job runs them: ``run_exports`` shipped (``shipping.staged``) into a copy of the
real quickstart job, run by a python that has no access to our package (the one of the MLflow
environment, which also has wandb, as a node's python3 might). What they wrote is read back with
MLflow's own client and with wandb's own record format.

Needs the environment scripts/envs/mlflow-env.sh builds, named by GYM_MLFLOW_PYTHON; skipped
without it (a failure under scripts/test, GYM_REQUIRE_CLUSTER=1). One server serves the session;
every test uses an experiment of its own. Every process started here is ended by its id.
"""

from __future__ import annotations

import hashlib
import json
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from export_jobs import BENCHMARK, RUN_ID, receipt, run_staged, staged_job
from mlflow_server import Forwarder, Server, mlflow_runs

from nemo_gym.orchestration import contract, shipping
from nemo_gym.orchestration.exporters import SPEC_FILE, spec
from nemo_gym.orchestration.shipping import Program

pytestmark = pytest.mark.slow

TOKEN = "mlflow-token-SENTINEL-3f9a"
WANDB_KEY = "wandb-key-SENTINEL-81c2" + "0" * 17  # wandb keys are 40 characters
SERVER_START_TIMEOUT = 180


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def export_env() -> dict[str, str]:
    return {"MLFLOW_TRACKING_TOKEN": TOKEN, "WANDB_API_KEY": WANDB_KEY}


# -- MLflow ----------------------------------------------------------------------------------------------


def test_an_export_reaches_mlflow_whole(backend_python: str, mlflow_server: Server, tmp_path: Path) -> None:
    experiment = f"exp-{tmp_path.name}"
    job = staged_job(
        tmp_path, {"mlflow": {"tracking_uri": mlflow_server.url, "experiment": experiment, "tags": {"team": "eval"}}}
    )
    started = time.monotonic()
    done = run_staged(job, backend_python, env=export_env())
    took = time.monotonic() - started
    assert done.returncode == 0, done.stderr
    assert len(done.stdout.splitlines()) == 1 and "export mlflow: done (first export): run " in done.stdout
    runs = mlflow_runs(backend_python, mlflow_server, experiment, f"{RUN_ID}/{BENCHMARK}")
    assert len(runs) == 1
    run = runs[0]
    got = receipt(job, "mlflow")
    assert got is not None and got.state == "done" and got.backend_run_id == run["run_id"]
    assert run["status"] == "FINISHED" and run["run_name"] == f"{RUN_ID}/{BENCHMARK}"
    staged_spec = spec.read_spec(str(job / SPEC_FILE))
    assert run["params"] == staged_spec.params
    assert run["metrics"]["mean/reward"] == 0.0 and run["metrics"]["pass_1_avg-of-1_/accuracy"] == 0.0
    assert run["metrics"]["gym/samples_written"] == 12 and run["metrics"]["gym/samples_expected"] == 12
    assert run["metrics"]["gym/wall_seconds"] == pytest.approx(59.632, abs=0.01)
    assert run["metrics"]["gym/gpu_hours"] == pytest.approx(59.632 / 3600, abs=1e-5)
    assert {k: run["tags"][k] for k in ("gym.export_key", "gym.state", "gym.samples", "gym.complete", "team")} == {
        "gym.export_key": f"{RUN_ID}/{BENCHMARK}",
        "gym.state": "succeeded",
        "gym.samples": "12/12",
        "gym.complete": "true",
        "team": "eval",
    }
    assert run["artifacts"] == {"rollouts.jsonl": sha256(job / "artifacts" / "rollouts.jsonl")}
    print(f"mlflow server answered after {mlflow_server.started_in:.1f}s; one export took {took:.2f}s")


KILL_AFTER_FIRST_BATCH = r"""
import os, signal, sys
sys.path.insert(0, sys.argv[1])
from nemo_gym.orchestration.exporters import mlflow_rest, run_exports
logged = mlflow_rest.MlflowClient.log_batch
def log_then_die(self, *args, **kwargs):
    logged(self, *args, **kwargs)
    os.kill(os.getpid(), signal.SIGKILL)  # the job killed mid-export: no handler runs, nothing is cleaned up
mlflow_rest.MlflowClient.log_batch = log_then_die
run_exports.main(sys.argv[2:])
"""


def test_an_export_killed_mid_way_is_finished_by_the_rerun_in_the_same_run(
    backend_python: str, mlflow_server: Server, tmp_path: Path
) -> None:
    experiment = f"exp-{tmp_path.name}"
    job = staged_job(tmp_path, {"mlflow": {"tracking_uri": mlflow_server.url, "experiment": experiment}})
    killed = subprocess.run(
        [backend_python, "-E", "-s", "-c", KILL_AFTER_FIRST_BATCH, str(job / contract.SHIPPED_DIR), str(job)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    interrupted = receipt(job, "mlflow")
    assert interrupted is not None and interrupted.state == "running" and interrupted.backend_run_id
    (half,) = mlflow_runs(backend_python, mlflow_server, experiment, f"{RUN_ID}/{BENCHMARK}")
    assert half["status"] == "RUNNING" and half["artifacts"] == {}

    done = run_staged(job, backend_python)
    assert "export mlflow: done (retrying an export that was cut short)" in done.stdout, done.stdout + done.stderr
    (run,) = mlflow_runs(backend_python, mlflow_server, experiment, f"{RUN_ID}/{BENCHMARK}")  # still exactly one run
    assert run["run_id"] == interrupted.backend_run_id == receipt(job, "mlflow").backend_run_id  # type: ignore[union-attr]
    assert run["status"] == "FINISHED" and "rollouts.jsonl" in run["artifacts"]
    assert run["history"] == {"mean/reward": 1, "gym/samples_written": 1}  # nothing logged twice


def test_a_done_export_is_skipped_and_a_forced_one_updates_the_same_run(
    backend_python: str, mlflow_server: Server, tmp_path: Path
) -> None:
    experiment = f"exp-{tmp_path.name}"
    job = staged_job(tmp_path, {"mlflow": {"tracking_uri": mlflow_server.url, "experiment": experiment}})
    first = run_staged(job, backend_python)
    again = run_staged(job, backend_python)
    assert "done already" in again.stdout and "skipped" in again.stdout
    forced = run_staged(job, backend_python, "--to", "mlflow", "--force")
    assert "export mlflow: done (forced)" in forced.stdout and "rollouts.jsonl uploaded already" in forced.stdout
    (run,) = mlflow_runs(backend_python, mlflow_server, experiment, f"{RUN_ID}/{BENCHMARK}")
    assert run["run_id"] in first.stdout and run["history"] == {"mean/reward": 1, "gym/samples_written": 1}


def test_server_down_fails_the_export_and_a_later_rerun_completes_it(
    backend_python: str, mlflow_server: Server, tmp_path: Path
) -> None:
    experiment = f"exp-{tmp_path.name}"
    forwarder = Forwarder(int(mlflow_server.url.rsplit(":", 1)[1]))
    job = staged_job(
        tmp_path,
        {
            "mlflow": {"tracking_uri": f"http://127.0.0.1:{forwarder.port}", "experiment": experiment},
            "table": {"dir": str(tmp_path / "table")},
        },
    )

    down = run_staged(job, backend_python)  # nobody listens
    assert down.returncode == 0
    failed = receipt(job, "mlflow")
    assert failed is not None and failed.state == "failed"
    assert (
        failed.detail
        == f"MLflow at http://127.0.0.1:{forwarder.port} is not reachable: connection refused (is the server running?)"
    )
    assert "export mlflow: FAILED: MLflow at" in down.stdout and "export table: done" in down.stdout

    # Up for five requests (experiment, search, run created), then down again mid-export.
    forwarder.start(limit=5)
    midway = run_staged(job, backend_python)
    cut = receipt(job, "mlflow")
    assert cut is not None and cut.state == "failed" and cut.backend_run_id, midway.stdout
    assert "export table: done already" in midway.stdout
    forwarder.stop()

    forwarder.start()
    try:
        back = run_staged(job, backend_python)
    finally:
        forwarder.stop()
    assert "export mlflow: done (retrying after a failure)" in back.stdout, back.stdout + back.stderr
    (run,) = mlflow_runs(backend_python, mlflow_server, experiment, f"{RUN_ID}/{BENCHMARK}")
    assert run["run_id"] == cut.backend_run_id and run["status"] == "FINISHED"
    assert receipt(job, "mlflow").attempts == 3  # type: ignore[union-attr]


# -- Weights & Biases, offline ------------------------------------------------------------------------

READ_WANDB = r"""
import glob, json, struct, sys, zlib
from wandb.proto import wandb_internal_pb2 as pb
# A .wandb file: a 7-byte header (":W&B", magic 0xBEE1, version 0), then LevelDB-log blocks of 32 KiB,
# each record in chunks with a 7-byte header (crc32 of type+data, length, type: 1 full, 2 first, 3 middle, 4 last).
out = []
for path in sorted(glob.glob(sys.argv[1] + "/wandb/offline-run-*/run-*.wandb")):
    data = open(path, "rb").read()
    ident, magic, version = struct.unpack("<4sHB", data[:7])
    assert (ident, magic, version) == (b":W&B", 0xBEE1, 0), (ident, magic, version)
    pos, pending, records = 7, b"", []
    while pos + 7 <= len(data):
        left = 32768 - pos % 32768
        if left < 7:
            pos += left
            continue
        crc, length, kind = struct.unpack("<IHB", data[pos:pos + 7])
        if kind == 0:
            pos += left
            continue
        chunk = data[pos + 7:pos + 7 + length]
        assert zlib.crc32(bytes([kind]) + chunk) & 0xFFFFFFFF == crc, "bad crc"
        pos += 7 + length
        pending = chunk if kind in (1, 2) else pending + chunk
        if kind in (1, 4):
            records.append(pending)
    run = {"file": path, "summary": {}, "artifacts": []}
    for raw in records:
        rec = pb.Record()
        rec.ParseFromString(raw)
        kind = rec.WhichOneof("record_type")
        if kind == "run":
            run.update(run_id=rec.run.run_id, project=rec.run.project, group=rec.run.run_group,
                       name=rec.run.display_name, config={u.key: json.loads(u.value_json) for u in rec.run.config.update})
        elif kind == "summary":
            run["summary"].update({u.key: json.loads(u.value_json) for u in rec.summary.update if u.key})
        elif kind == "artifact":
            run["artifacts"].append({"type": rec.artifact.type, "name": rec.artifact.name,
                                     "files": [e.path for e in rec.artifact.manifest.contents]})
    out.append(run)
print(json.dumps(out))
"""


def wandb_runs(python: str, job: Path) -> list[dict[str, Any]]:
    done = subprocess.run([python, "-c", READ_WANDB, str(job)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return list(json.loads(done.stdout.splitlines()[-1]))


def test_wandb_offline_run_holds_config_summary_and_rollouts(backend_python: str, tmp_path: Path) -> None:
    job = staged_job(tmp_path, {"wandb": {"mode": "offline", "project": "gym-tests", "group": "g1"}})
    done = run_staged(job, backend_python, env=export_env())
    assert "export wandb: done (first export): offline run " in done.stdout, done.stdout + done.stderr
    (run,) = wandb_runs(backend_python, job)
    expected_id = f"{RUN_ID}--{BENCHMARK}"
    assert (run["run_id"], run["project"], run["group"], run["name"]) == (
        expected_id,
        "gym-tests",
        "g1",
        f"{RUN_ID}/{BENCHMARK}",
    )
    staged_spec = spec.read_spec(str(job / SPEC_FILE))
    assert {k: run["config"][k] for k in staged_spec.params} == staged_spec.params
    assert run["config"]["gym.run_id"] == RUN_ID and run["config"]["gym.state"] == "succeeded"
    assert (
        run["summary"]["mean/reward"] == 0.0 and run["summary"]["pass_1_avg-of-1_/accuracy"] == 0.0
    )  # one name everywhere (facts.mlflow_safe_key)
    assert run["summary"]["gym/samples_written"] == 12 and run["summary"]["gym/complete"] is True
    assert run["artifacts"] == [{"type": "rollouts", "name": f"rollouts-{expected_id}", "files": ["rollouts.jsonl"]}]
    assert receipt(job, "wandb").backend_run_id == expected_id  # type: ignore[union-attr]

    forced = run_staged(job, backend_python, "--force", env=export_env())
    assert "export wandb: done (forced)" in forced.stdout
    assert [r["run_id"] for r in wandb_runs(backend_python, job)] == [expected_id, expected_id]  # one run, resumed


# -- all three, and the credentials ------------------------------------------------------------------------


def test_no_credential_reaches_any_file_or_line(backend_python: str, mlflow_server: Server, tmp_path: Path) -> None:
    experiment = f"exp-{tmp_path.name}"
    job = staged_job(
        tmp_path / "runs",
        {
            "mlflow": {"tracking_uri": mlflow_server.url, "experiment": experiment},
            "wandb": {"mode": "offline"},
            "table": {"dir": str(tmp_path / "table")},
        },
    )
    done = run_staged(job, backend_python, env=export_env())
    assert [line.split(": ")[0].split()[-1] for line in done.stdout.splitlines()] == ["mlflow", "wandb", "table"]
    assert all("done (first export)" in line for line in done.stdout.splitlines()), done.stdout
    written = [p for root in (tmp_path, mlflow_server.data) for p in root.rglob("*") if p.is_file()]
    assert len(written) > 20
    for secret in (TOKEN, WANDB_KEY):
        assert secret not in done.stdout + done.stderr
        assert not [p for p in written if secret.encode() in p.read_bytes()]


def test_jobs_finishing_together_share_the_table(backend_python: str, tmp_path: Path) -> None:
    shared = tmp_path / "table"
    jobs = [
        staged_job(tmp_path / f"r{i}", {"table": {"dir": str(shared)}}, run_id=f"gym-job-2026113{i}T000000Z-00000{i}")
        for i in range(3)
    ]
    procs = [
        subprocess.Popen(
            [backend_python, *shipping.launch_words(Program.EXPORTERS, tree=str(j)).split()[1:], str(j)],
            stdout=subprocess.PIPE,
            text=True,
        )
        for j in jobs
    ]
    outputs = [p.communicate(timeout=120)[0] for p in procs]
    assert all("export table: done" in out for out in outputs), outputs
    rows = (shared / "results.csv").read_text().splitlines()
    assert len(rows) == 4 and sorted(r.split(",")[0] for r in rows[1:]) == [
        f"gym-job-2026113{i}T000000Z-00000{i}" for i in range(3)
    ]
    assert len(json.loads((shared / "results.json").read_text())["rows"]) == 3
