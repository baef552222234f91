"""Small jobs share nodes safely (#40): two one-GPU jobs placed on the same node at the same time,
with compute.exclusive_nodes left to its default (auto: a job of one node shares it). Each job
claims its servers' ports on the node when it starts (ports.py), so both succeed, each driver is
answered by its own job's server (the stand-in vLLM's alias and checkpoint), and the ports they
used — the policy's and gym's head server's — differ."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from conftest import STANDIN_PATH, standin_records
from test_slurm_runs import _ray_minimal_bin
from test_sweeps import _answered_by, checkpoints, submit_sweep, wait_until

pytestmark = [pytest.mark.slow, pytest.mark.cluster]


def _driver_record(job: dict) -> dict:
    [record] = [json.loads(p.read_text()) for p in Path(job["job_dir"], "standin").glob("gym-run-*.json")]
    return record


def _server_records(job: dict) -> list[dict]:
    return [json.loads(p.read_text()) for p in Path(job["job_dir"], "standin").glob("vllm-*.json")]


def _swept_on_shared_nodes(
    cluster_run,
    models: list[str],
    compute: dict,
    seconds: int,
    timeout: int,
    services: dict | None = None,
    gpus: int = 1,
    otel: dict | None = None,
    driver_env: dict | None = None,
) -> tuple:
    """Stand-in jobs of one node (one GPU unless ``gpus``), one a checkpoint, with exclusive_nodes
    as ``compute`` says (auto unless set): the sweep's record and its jobs once all have ended."""
    config = cluster_run.config(
        services=services or {"policy": {"type": "vllm", "model": "/placeholder"}},
        pools={"gpu": {"partition": "debug", "nodes": 1, "gpus_per_node": gpus}},
        benchmarks={"math": {"run": {"standin_rollouts": 2, "standin_rollout_seconds": seconds}}},
        driver={"policy_model": "policy", **({"env": {"PATH": STANDIN_PATH, **driver_env}} if driver_env else {})},
        compute=compute,
    )
    if otel is not None:
        config["otel"] = otel
    sweep = submit_sweep(cluster_run, config, f"services.policy.model={','.join(models)}")
    ended = wait_until(
        cluster_run,
        sweep["sweep_id"],
        lambda jobs: all(s not in ("queued", "starting", "running") for *_, s in jobs),
        timeout,
    )
    return sweep, ended


def test_two_one_gpu_jobs_on_one_node_at_once_each_claim_their_own_ports(cluster_run, tmp_path) -> None:
    models = checkpoints(tmp_path)[:2]
    sweep, jobs = _swept_on_shared_nodes(cluster_run, models, {"extra_args": {"nodelist": "n1"}}, 8, 300)
    assert [state for *_, state in jobs] == ["succeeded", "succeeded"], jobs
    seen = []
    for record, model in zip(sweep["records"], models):
        [job] = record["benchmarks"]
        served, accuracy = _answered_by(job)
        assert served[1] == f"{record['gym_job_id']}-math-policy"  # its own server
        assert accuracy == float(Path(model, "standin-accuracy").read_text())  # its own checkpoint
        overrides = _driver_record(job)["overrides"]
        [server] = _server_records(job)
        assert server["host"] == "n1"
        port = int(server["argv"][server["argv"].index("--port") + 1])
        assert overrides["policy_base_url"] == f"http://localhost:{port}/v1"
        log = Path(job["job_dir"], f"slurm-{job['job_id']}.out").read_text()
        assert f"ports on n1: policy={port} gym_head_server={overrides['head_server.port']}" in log
        seen.append((port, int(overrides["head_server.port"]), _driver_record(job)["time"]))
    (policy_a, head_a, started_a), (policy_b, head_b, started_b) = seen
    # Each the configured port or, where another job (or anything on n1) holds it, the next free one.
    assert policy_a != policy_b and all(8000 <= p < 10000 for p in (policy_a, policy_b)), seen
    assert head_a != head_b and all(11000 <= p < 13000 for p in (head_a, head_b)), seen
    # At the same time: each driver runs 16 s (2 rollouts of 8 s), and the two started closer than that.
    assert abs(started_a - started_b) < 16, seen


def test_eight_one_gpu_jobs_of_a_sweep_share_two_four_gpu_nodes_each_answered_by_its_own_server(
    cluster_run, tmp_path
) -> None:
    """A sweep of 8 one-GPU checkpoints kept to two 4-GPU nodes: Slurm packs four jobs onto each
    (exclusive_nodes auto), every job claims its own ports there, and all 8 succeed, each driver
    answered by its own job's server and checkpoint."""
    models = checkpoints(tmp_path, {step: step / 8000 for step in range(1000, 9000, 1000)})
    sweep, jobs = _swept_on_shared_nodes(cluster_run, models, {"extra_args": {"exclude": "n3"}}, 5, 600)
    assert [state for *_, state in jobs] == ["succeeded"] * 8, jobs
    by_node: dict[str, set[int]] = {}
    for record, model in zip(sweep["records"], models):
        [job] = record["benchmarks"]
        served, accuracy = _answered_by(job)
        assert served[1] == f"{record['gym_job_id']}-math-policy"
        assert accuracy == float(Path(model, "standin-accuracy").read_text())
        [server] = _server_records(job)
        by_node.setdefault(server["host"], set()).add(int(server["argv"][server["argv"].index("--port") + 1]))
    assert set(by_node) <= {"n1", "n2"} and sum(len(ports) for ports in by_node.values()) == 8, by_node


def test_two_prefill_decode_jobs_on_one_node_each_answered_through_its_own_router(
    cluster_run, tmp_path, router_bin
) -> None:
    """Two one-node prefill/decode jobs (stand-in vLLM tiers, which hold their NIXL side channels;
    the real vllm-router) placed on n1 at the same time with exclusive_nodes false: each claims its
    tiers', side channels', router's and router metrics' ports when it starts, so both succeed, and
    each driver is answered through its own router by its own tiers (their alias, its checkpoint)."""
    models = checkpoints(tmp_path)[:2]
    services = {
        "policy": {
            "type": "vllm_pd",
            "model": "/placeholder",
            "env": {"GYM_ROUTER_BIN": f"lit:{router_bin}"},
            "prefill": {"node_pool": "gpu"},
            "decode": {"node_pool": "gpu", "number_of_instances": 2},  # two side-channel ports
        }
    }
    compute = {"exclusive_nodes": False, "extra_args": {"nodelist": "n1"}}
    sweep, jobs = _swept_on_shared_nodes(cluster_run, models, compute, 8, 300, services, gpus=2)
    assert [state for *_, state in jobs] == ["succeeded", "succeeded"], jobs
    held, started = [], []
    for record, model in zip(sweep["records"], models):
        [job] = record["benchmarks"]
        served, accuracy = _answered_by(job)
        assert served[1] in {f"{record['gym_job_id']}-math-policy-{tier}" for tier in ("prefill", "decode")}
        assert accuracy == float(Path(model, "standin-accuracy").read_text())  # its own checkpoint
        tiers = {
            json.loads(r["argv"][r["argv"].index("--kv-transfer-config") + 1])["kv_role"]: r
            for r in _server_records(job)
            if r["tool"] == "vllm"
        }
        prefill, decode = tiers["kv_producer"], tiers["kv_consumer"]
        tier_ports = [int(r["argv"][r["argv"].index("--port") + 1]) for r in (prefill, decode)]
        channels = [int(r["env"]["VLLM_NIXL_SIDE_CHANNEL_PORT"]) for r in (prefill, decode)]
        [router] = [r for r in _server_records(job) if r["tool"] == "vllm-router"]
        argv = router["argv"]
        port, metrics = (int(argv[argv.index(flag) + 1]) for flag in ("--port", "--prometheus-port"))
        assert [int(argv[argv.index(flag) + 1].rsplit(":", 1)[1]) for flag in ("--prefill", "--decode")] == tier_ports
        assert _driver_record(job)["overrides"]["policy_base_url"] == f"http://localhost:{port}/v1"
        assert {r["host"] for r in (prefill, decode, router)} == {"n1"}
        held.append({port, metrics, *tier_ports, channels[0], channels[1], channels[1] + 1})
        started.append(_driver_record(job)["time"])
    first, second = held
    assert len(first) == len(second) == 7 and not first & second, held  # no port of one job is the other's
    assert abs(started[0] - started[1]) < 16, started  # at the same time: each driver runs 16 s


def test_two_jobs_with_the_stand_in_collector_on_one_node_each_claim_its_receivers_and_health_port(
    cluster_run, tmp_path, monkeypatch
) -> None:
    """Two one-GPU jobs with telemetry on, on n1 at once (exclusive_nodes auto): each job's collector
    — the stand-in, which binds what its config names as the collector would, no real otelcol-contrib
    being available here — listens on the OTLP and health ports its job claimed, its config scrapes
    its own policy's claimed port, and its driver sends to its own collector; both succeed."""
    monkeypatch.setenv("OTEL_TOKEN", "otel-token")
    otel = {
        "endpoint": "https://otel.example.com",
        "service_name": "gym-tests",
        "gym_telemetry": False,
        "binary": str(Path(__file__).resolve().parents[1] / "standins" / "otelcol-contrib"),
    }
    models = checkpoints(tmp_path)[:2]
    compute = {"extra_args": {"nodelist": "n1"}}
    sweep, jobs = _swept_on_shared_nodes(cluster_run, models, compute, 8, 300, otel=otel)
    assert [state for *_, state in jobs] == ["succeeded", "succeeded"], jobs
    listened = []
    for record in sweep["records"]:
        [job] = record["benchmarks"]
        [collector] = [json.loads(p.read_text()) for p in Path(job["job_dir"], "standin").glob("otelcol-*.json")]
        ports = collector["listeners"]
        assert collector["host"] == "n1" and set(ports) == {"health_check", "grpc", "http"}
        assert [int(collector["env"][f"GYM_PORT_OTEL_{k}"]) for k in ("HEALTH", "GRPC", "HTTP")] == [
            ports["health_check"],
            ports["grpc"],
            ports["http"],
        ]
        driver = _driver_record(job)
        assert driver["env"]["OTEL_EXPORTER_OTLP_ENDPOINT"] == f"http://localhost:{ports['http']}"
        [server] = [r for r in _server_records(job) if r["tool"] == "vllm"]
        policy = server["argv"][server["argv"].index("--port") + 1]
        assert collector["env"]["GYM_PORT_POLICY"] == policy  # what its config scrapes
        assert "${env:GYM_NODE_0}:${env:GYM_PORT_POLICY}" in Path(job["job_dir"], "otel", "collector.yaml").read_text()
        listened.append(set(ports.values()))
    assert not listened[0] & listened[1], listened


def test_two_jobs_with_a_stand_in_ray_service_on_one_node_each_claim_its_heads_ports(cluster_run, tmp_path) -> None:
    """Two one-GPU jobs each with a ray service beside the policy, on n1 at once (exclusive_nodes
    auto): each Ray head — the stand-in, which binds the ports it is given as Ray would — gets the
    GCS, dashboard and dashboard agent ports its job claimed, and each driver dials
    its own head; both succeed."""
    models = checkpoints(tmp_path)[:2]
    services = {
        "policy": {"type": "vllm", "model": "/placeholder", "node_pool": "gpu"},
        "envs": {"type": "ray", "node_pools": ["gpu"]},
    }
    compute = {"extra_args": {"nodelist": "n1"}}
    sweep, jobs = _swept_on_shared_nodes(
        cluster_run, models, compute, 8, 300, services, driver_env={"RAY_ADDRESS": "runtime:GYM_RAY_ADDRESS_ENVS"}
    )
    assert [state for *_, state in jobs] == ["succeeded", "succeeded"], jobs
    held = []
    for record in sweep["records"]:
        [job] = record["benchmarks"]
        [head] = [r for r in standin_records(job["job_dir"], "ray") if "--head" in r["argv"]]
        flags = ("--port", "--dashboard-port", "--dashboard-agent-listen-port")
        ports = [int(next(a for a in head["argv"] if a.startswith(flag + "=")).split("=", 1)[1]) for flag in flags]
        assert head["host"] == "n1"
        address = _driver_record(job)["env"]["RAY_ADDRESS"]
        assert address.startswith("198.18.0.") and address.endswith(f":{ports[0]}")  # its own head
        held.append(set(ports))
    assert len(held[0]) == len(held[1]) == 3 and not held[0] & held[1], held


@pytest.mark.parametrize("ray", ["minimal", "default"])
def test_two_jobs_with_a_real_ray_service_on_one_node_each_run_their_own_head(cluster_run, tmp_path, ray) -> None:
    """As above with the real Ray: the one a vLLM image carries (no dashboard), and ray[default]
    (its dashboard too): two Ray heads on n1 at once, each started on the ports its job claimed
    (GCS, dashboard, dashboard agent), each seen ready on its own GCS port, each driver told its
    own head; both jobs succeed."""
    ray_bin = _ray_minimal_bin() if ray == "minimal" else Path(os.environ.get("GYM_RAY_PYTHON", "")).parent
    path = f"lit:{ray_bin}:{Path(__file__).resolve().parents[1] / 'standins'}:/usr/local/bin:/usr/bin:/bin"
    env = {"PATH": path, "RAY_USAGE_STATS_ENABLED": "lit:0"}
    services = {
        "policy": {"type": "vllm", "model": "/placeholder", "node_pool": "gpu", "env": dict(env)},
        "envs": {"type": "ray", "node_pools": ["gpu"], "env": dict(env)},
    }
    compute = {"extra_args": {"nodelist": "n1"}, "container_runtime": "none", "walltime": "00:10:00"}
    sweep, jobs = _swept_on_shared_nodes(
        cluster_run,
        checkpoints(tmp_path)[:2],
        compute,
        8,
        400,
        services,
        driver_env={"RAY_ADDRESS": "runtime:GYM_RAY_ADDRESS_ENVS"},
    )
    assert [state for *_, state in jobs] == ["succeeded", "succeeded"], jobs
    claimed, started = [], []
    for record in sweep["records"]:
        [job] = record["benchmarks"]
        log = Path(job["job_dir"], f"slurm-{job['job_id']}.out").read_text()
        [line] = [line for line in log.splitlines() if "ports on n1:" in line]
        ports = dict(word.split("=") for word in line.split("ports on n1:", 1)[1].split())
        assert _driver_record(job)["env"]["RAY_ADDRESS"].endswith(f":{ports['envs']}")  # its own head
        claimed.append({int(ports[name]) for name in ("envs", "envs_dashboard", "envs_dashboard_agent")})
        started.append(_driver_record(job)["time"])
    assert not claimed[0] & claimed[1], claimed
    assert abs(started[0] - started[1]) < 16, started  # at the same time: each driver runs 16 s
