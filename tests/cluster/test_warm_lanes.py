"""Warm lanes on the real local Slurm cluster (#40), with the stand-in vLLM (no GPU here), which
reloads its weights as vLLM's development endpoint does and says, in every answer, which weights
gave it: a 10-checkpoint sweep with ``job.deployment: reload`` and ``job.max_concurrent: 2`` is 2
allocations; every run is answered by its own checkpoint; a torn checkpoint in the middle fails
alone, named; and another process on the lane's node cannot reload the server."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest
from conftest import REPO, STANDIN_PATH, job_fields, standin_records
from standin_checkpoints import checkpoint
from test_sweeps import submit_sweep, submit_sweep_cli, sweep_config

from nemo_gym.orchestration import contract

pytestmark = [pytest.mark.slow, pytest.mark.cluster]

PORT = 18123


def lane_config(cluster_run, compute: dict | None = None, **job) -> dict:
    # Each driver winds down for 4 s after its last row, as gym does: the lane loads the next
    # weights meanwhile, never before the last row.
    run = {"standin_rollouts": 4, "standin_rollout_seconds": 0.5, "standin_wind_down_seconds": 4}
    config = sweep_config(cluster_run, {"math": {"run": run}}, **({"compute": compute} if compute else {}))
    config["services"]["policy"].update(served_model_name="policy", port=PORT)
    config["job"].update(deployment="reload", **job)
    return config


def wait_final(cluster_run, sweep_id: str, runs: int, timeout: float = 240) -> dict[str, dict]:
    """Run id -> its one job's status, once every run's job is final."""
    deadline = time.monotonic() + timeout
    while True:
        proc = cluster_run.cli("status", sweep_id, "--json")
        assert proc.returncode == 0, proc.stderr
        jobs = {run["run"]: run["jobs"][0] for run in json.loads(proc.stdout)["runs"]}
        if len(jobs) == runs and all(j["state"] in ("succeeded", "failed", "cancelled") for j in jobs.values()):
            return jobs
        assert time.monotonic() < deadline, f"the lanes did not end: {jobs}"
        time.sleep(1)


def test_ten_checkpoints_in_two_warm_lanes_each_answered_by_its_own_weights(cluster_run, tmp_path) -> None:
    root = tmp_path / "ckpt"
    models = [checkpoint(root, step * 100, step / 10, torn=step == 5) for step in range(10)]
    # Both lanes on one node at once (exclusive_nodes auto: a lane's job shares its node): each
    # claims its server's port and each of its drivers a head server of its own.
    config = lane_config(cluster_run, {"extra_args": {"nodelist": "n1"}}, max_concurrent=2)
    sweep = submit_sweep(cluster_run, config, "services.policy.model=" + ",".join(models))
    records = sweep["records"]
    allocations = {b["job_id"] for r in records for b in r["benchmarks"]}
    assert len(allocations) == 2, allocations  # two lanes, one allocation each (10 runs)

    _another_process_cannot_reload(records)
    jobs = wait_final(cluster_run, sweep["sweep_id"], 10)
    by_model = {r["model"]: r for r in records}
    for model in models:
        record = by_model[model]
        [bench] = record["benchmarks"]
        job = jobs[record["gym_job_id"]]
        if model.endswith("step-500"):
            assert job["state"] == "failed", job
            assert "weights were not loaded" in job["detail"] and "model.safetensors" in job["detail"], job
            assert "weights" not in _provenance(bench["job_dir"])
            continue
        assert job["state"] == "succeeded", job
        # The stand-in gym asked the server once it ran: the weights that answered are the run's own.
        [driver] = [json.loads(p.read_text()) for p in Path(bench["job_dir"], "standin").glob("gym-run-*.json")]
        assert driver["policy_models"]["data"][0]["standin_weights"] == model
        weights = _provenance(bench["job_dir"])
        assert weights["weights"] == model and weights["weights.fingerprint"].startswith("sha256:")
        assert weights["weights.how"] == (
            "started" if record["deployment_host"] == record["gym_job_id"] else "reloaded"
        )
        # Every rollout asked the server: each was answered by the run's own weights.
        rows = [json.loads(line) for line in Path(bench["job_dir"], contract.ROLLOUTS_FILE).read_text().splitlines()]
        assert len(rows) == 4 and {row["standin_weights"] for row in rows} == {model}, rows
    _every_request_answered_by_its_runs_weights(records)
    _next_weights_loaded_while_the_last_driver_wound_down(records)
    _the_lanes_shared_n1_on_ports_of_their_own(records, allocations)


def _the_lanes_shared_n1_on_ports_of_their_own(records: list[dict], allocations: set[str]) -> None:
    """Both lanes ran on n1; when they ran at the same time (as they do unless n1 was busy), their
    servers were on different ports (the ports each lane's job claimed, as it wrote them)."""
    fields = [job_fields(job) for job in allocations]
    assert {f.get("NodeList") for f in fields} == {"n1"}, fields
    served = []
    for lane_dir in {
        Path(r["benchmarks"][0]["job_dir"]).parent for r in records if r["deployment_host"] == r["gym_job_id"]
    }:
        [ports] = Path(lane_dir, contract.SHARED_DEPLOYMENT_DIR, contract.MARKERS_DIR).glob("*/ports")
        served.append(ports.read_text())
    overlapped = max(f["StartTime"] for f in fields) < min(f["EndTime"] for f in fields)
    assert len(served) == 2 and (not overlapped or served[0] != served[1]), (served, fields)


def test_a_run_cancelled_before_its_turn_is_skipped_and_its_weights_never_loaded(cluster_run, tmp_path) -> None:
    """A 3-checkpoint lane, the middle run cancelled as the lane starts: the lane goes on, never
    loads that checkpoint, and the first and last runs succeed."""
    models = [checkpoint(tmp_path / "ckpt", step, step / 1000) for step in (100, 200, 300)]
    sweep = submit_sweep(
        cluster_run, lane_config(cluster_run, max_concurrent=1), "services.policy.model=" + ",".join(models)
    )
    first, middle, last = sweep["records"]
    assert len({b["job_id"] for r in sweep["records"] for b in r["benchmarks"]}) == 1  # one lane
    proc = cluster_run.cli("cancel", middle["gym_job_id"])
    assert proc.returncode == 0, proc.stderr
    assert "skips it and goes on for the others" in proc.stdout, proc.stdout
    jobs = wait_final(cluster_run, sweep["sweep_id"], 3)
    assert jobs[middle["gym_job_id"]]["state"] == "cancelled", jobs
    assert jobs[middle["gym_job_id"]]["detail"] == "cancelled by the user (gym eval cancel)"
    for record in (first, last):
        assert jobs[record["gym_job_id"]]["state"] == "succeeded", jobs
        [bench] = record["benchmarks"]
        assert _provenance(bench["job_dir"])["weights"] == record["model"]
    assert not list(Path(middle["benchmarks"][0]["job_dir"]).glob("standin/gym-run-*.json"))  # never driven
    lane_dir = Path(first["benchmarks"][0]["job_dir"]).parent / contract.SHARED_DEPLOYMENT_DIR
    [log] = list(Path(lane_dir, "standin").glob("requests-*.jsonl"))
    asked = [json.loads(line) for line in log.read_text().splitlines()]
    reloaded = [
        a["body"]["kwargs"]["weights_path"] for a in asked if a["path"] == "/collective_rpc" and not a["refused"]
    ]
    assert reloaded == [last["model"]], reloaded  # the middle checkpoint was never loaded
    assert {a["weights"] for a in asked if a["path"] == "/v1/models"} == {first["model"], last["model"]}


def test_a_run_cancelled_while_its_driver_runs_is_stopped_and_the_lane_goes_on(cluster_run, tmp_path) -> None:
    """The lane's running run cancelled: its driver (an srun step) is stopped, the next run's
    weights are loaded once it has ended, and that run succeeds."""
    models = [checkpoint(tmp_path / "ckpt", step, 0.5) for step in (100, 200)]
    config = lane_config(cluster_run, max_concurrent=1)
    config["driver"]["benchmarks"]["math"]["run"].update(standin_rollouts=20, standin_wind_down_seconds=0)
    sweep = submit_sweep(cluster_run, config, "services.policy.model=" + ",".join(models))
    first, second = sweep["records"]
    [bench] = first["benchmarks"]
    deadline = time.monotonic() + 120
    while not list(Path(bench["job_dir"]).glob("standin/gym-run-*.json")):
        assert time.monotonic() < deadline, "the first run's driver never started"
        time.sleep(0.5)
    proc = cluster_run.cli("cancel", first["gym_job_id"])
    assert proc.returncode == 0 and "skips it and goes on for the others" in proc.stdout, proc
    jobs = wait_final(cluster_run, sweep["sweep_id"], 2)
    assert (jobs[first["gym_job_id"]]["state"], jobs[second["gym_job_id"]]["state"]) == ("cancelled", "succeeded"), jobs
    state = Path(bench["job_dir"], contract.state_dir(bench["job_id"]), contract.STATE_FILE).read_text()
    assert "detail=cancelled while its driver ran" in state
    rows = Path(bench["job_dir"], contract.ROLLOUTS_FILE)
    assert len(rows.read_text().splitlines() if rows.exists() else []) < 20  # stopped before its end
    assert _provenance(second["benchmarks"][0]["job_dir"])["weights"] == second["model"]


def _provenance(job_dir: str) -> dict[str, str]:
    path = Path(job_dir, contract.PROVENANCE_FILE)
    return dict(line.split("=", 1) for line in path.read_text().splitlines()) if path.exists() else {}


def _another_process_cannot_reload(records: list[dict]) -> None:
    """A process on a lane's node that is not the job (no token) is refused the reload endpoint."""
    host = next(r for r in records if r["benchmarks"][0]["job_dir"].split("/")[-2] == r["gym_job_id"])
    body = json.dumps({"method": "reload_weights", "kwargs": {"weights_path": "/tmp"}})
    deadline = time.monotonic() + 180  # a loaded machine starts jobs slowly
    while True:
        assert time.monotonic() < deadline, "the lane never ran"
        node = job_fields(host["benchmarks"][0]["job_id"]).get("NodeList", "")
        if node in ("", "(null)"):  # not started yet
            time.sleep(0.5)
            continue
        proc = subprocess.run(
            [str(REPO / "scripts" / "local-slurm"), "on", node, "curl", "-s", "-o", "/dev/null", "-w", "%{http_code}",
             "-X", "POST", "-d", body, f"http://localhost:{PORT}/collective_rpc"],
            capture_output=True, text=True, timeout=30,
        )  # fmt: skip
        if proc.stdout.strip() not in ("", "000"):
            assert proc.stdout.strip() == "403", proc
            return
        assert time.monotonic() < deadline, f"the lane's server never answered: {proc}"
        time.sleep(0.5)


def _every_request_answered_by_its_runs_weights(records: list[dict]) -> None:
    """The stand-in's own record: each /v1/models answer came from the weights of a run whose
    driver was then running, and a reload was never asked for while a driver ran."""
    hosts = {r["deployment_host"] for r in records}
    for host in hosts:
        lane_dir = next(Path(r["benchmarks"][0]["job_dir"]).parent for r in records if r["gym_job_id"] == host)
        [log] = list(Path(lane_dir, contract.SHARED_DEPLOYMENT_DIR, "standin").glob("requests-*.jsonl"))
        asked = [json.loads(line) for line in log.read_text().splitlines()]
        served = [a for a in asked if a["path"] == "/v1/models"]
        reloads = [a for a in asked if a["path"] == "/collective_rpc" and a["refused"] is None]
        assert served and reloads
        lane_models = {r["model"] for r in records if r["deployment_host"] == host}
        assert {a["weights"] for a in served} <= lane_models


def _next_weights_loaded_while_the_last_driver_wound_down(records: list[dict]) -> None:
    """In each lane, every reload came after the run before had written every row (the stand-in's
    rows above) but before that run's driver ended (its wind-down): the allocation does not wait."""
    for host in {r["deployment_host"] for r in records}:
        lane_dir = next(Path(r["benchmarks"][0]["job_dir"]).parent for r in records if r["gym_job_id"] == host)
        [events] = list(Path(lane_dir, contract.SHARED_DEPLOYMENT_DIR, contract.MARKERS_DIR).glob("*/events"))
        seen = [line.split(" ")[1:] for line in events.read_text().splitlines()]
        started: list[str] = []
        for i, (word, *rest) in enumerate(seen):
            if word == "driver-start":
                started.append(rest[0])
            elif word == "reload":
                ended_after = [e for e in seen[i:] if e[0] == "driver-end" and e[1] == started[-1]]
                assert ended_after, f"reload {rest} waited for {started[-1]}'s driver to end: {seen}"


def test_a_checkpoint_that_breaks_the_server_fails_alone_and_the_lane_starts_its_server_again(
    cluster_run, tmp_path
) -> None:
    """A 4-checkpoint lane whose second checkpoint fails the reload half-way (the stand-in then
    holds weights nobody can name): that run fails, named; the lane stops its server and starts it
    again, and the last two runs succeed, each answered by its own weights, never by the unknown ones."""
    models = [checkpoint(tmp_path / "ckpt", step, step / 1000) for step in (100, 200, 300, 400)]
    (Path(models[1]) / "standin-corrupt").write_text("")
    sweep = submit_sweep(
        cluster_run, lane_config(cluster_run, max_concurrent=1), "services.policy.model=" + ",".join(models)
    )
    records = sweep["records"]
    assert len({b["job_id"] for r in records for b in r["benchmarks"]}) == 1  # one lane
    jobs = wait_final(cluster_run, sweep["sweep_id"], 4)
    states = [jobs[r["gym_job_id"]]["state"] for r in records]
    assert states == ["succeeded", "failed", "succeeded", "succeeded"], jobs
    broken = jobs[records[1]["gym_job_id"]]["detail"]
    assert "weights were not loaded" in broken and "step-200" in broken, broken
    for record in (records[0], records[2], records[3]):
        [bench] = record["benchmarks"]
        assert _provenance(bench["job_dir"])["weights"] == record["model"]
        rows = [json.loads(line) for line in Path(bench["job_dir"], contract.ROLLOUTS_FILE).read_text().splitlines()]
        assert {row["standin_weights"] for row in rows} == {record["model"]}, rows
    lane_dir = Path(records[0]["benchmarks"][0]["job_dir"]).parent / contract.SHARED_DEPLOYMENT_DIR
    assert len(list(Path(lane_dir, "standin").glob("vllm-*.json"))) == 2  # started, and once again
    [events] = list(Path(lane_dir, contract.MARKERS_DIR).glob("*/events"))
    seen = [line.split(" ")[1] for line in events.read_text().splitlines()]
    assert seen.count("restart") == 1 and seen.count("launched") >= 2, seen
    asked = [json.loads(line) for log in Path(lane_dir, "standin").glob("requests-*.jsonl") for line in log.open()]
    # Nothing was asked of the unknown weights but the reload's own answer: the next run waited for the new server.
    assert not [a for a in asked if a["weights"] is None and a["path"] != "/collective_rpc"], asked


def test_a_prefill_decode_sweep_is_one_restart_lane_each_checkpoint_served_by_its_own_pair(
    cluster_run, tmp_path, router_bin
) -> None:
    """Prefill/decode cannot switch weights in place: a restart lane. One allocation serves the
    three checkpoints; for each, both tiers start on its checkpoint and the real vllm-router in
    front of them, on the ports the job claimed once. The middle checkpoint's tiers do not start:
    that run fails, named, and the last run is served by a pair started on its own checkpoint."""
    models = [
        checkpoint(tmp_path / "ckpt", 100, 0.1),
        checkpoint(tmp_path / "FAIL_AT_START", 200, 0.2),
        checkpoint(tmp_path / "ckpt", 300, 0.3),
    ]
    run = {"standin_rollouts": 2, "standin_rollout_seconds": 0.2}
    config = sweep_config(cluster_run, {"math": {"run": run}})
    config["services"]["policy"] = {
        "type": "vllm_pd",
        "model": "/placeholder",
        "env": {"PATH": STANDIN_PATH, "GYM_ROUTER_BIN": f"lit:{router_bin}"},
        "container": "standin:latest",
        "prefill": {"node_pool": "gpu"},
        "decode": {"node_pool": "gpu"},
    }
    config["job"].update(deployment="reload")
    proc = submit_sweep_cli(cluster_run, config, "services.policy.model=" + ",".join(models))
    assert proc.returncode == 0, proc.stderr
    assert "3 checkpoint run(s) in 1 restart lane(s)" in proc.stderr and "vllm_pd" in proc.stderr, proc.stderr
    sweep = json.loads(proc.stdout)
    records = sweep["records"]
    cluster_run.job_ids += [b["job_id"] for r in records for b in r["benchmarks"] if b["job_id"]]
    assert len({b["job_id"] for r in records for b in r["benchmarks"]}) == 1  # one allocation
    jobs = wait_final(cluster_run, sweep["sweep_id"], 3)
    assert [jobs[r["gym_job_id"]]["state"] for r in records] == ["succeeded", "failed", "succeeded"], jobs
    failed = jobs[records[1]["gym_job_id"]]["detail"]
    assert "deployment did not start" in failed and "policy-prefill" in failed, failed
    lane_dir = Path(records[0]["benchmarks"][0]["job_dir"]).parent / contract.SHARED_DEPLOYMENT_DIR
    started = [r for r in standin_records(str(lane_dir), "vllm") if r["tool"] == "vllm"]
    # Each turn's tiers started on its own checkpoint (the failed one's too: a pair starts together).
    for role in ("kv_producer", "kv_consumer"):
        assert sorted(r["argv"][1] for r in started if role in str(r["argv"])) == sorted(models)
    assert len({r["argv"][r["argv"].index("--port") + 1] for r in started if "kv_producer" in str(r["argv"])}) == 1
    assert len(standin_records(str(lane_dir), "vllm-router")) == 3  # the router started anew with each pair
    for record in (records[0], records[2]):
        [bench] = record["benchmarks"]
        assert _provenance(bench["job_dir"])["weights"] == record["model"]
        assert _provenance(bench["job_dir"])["weights.how"] == "started"
        rows = [json.loads(line) for line in Path(bench["job_dir"], contract.ROLLOUTS_FILE).read_text().splitlines()]
        assert rows and {row.get("standin_weights") for row in rows} == {record["model"]}, rows
