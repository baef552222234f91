"""The gateway's pure parts (header filtering, replica argv/env, routing, CLI), without Ray."""

from __future__ import annotations

import subprocess
import sys

import pytest

from nemo_gym.orchestration import shipping
from nemo_gym.orchestration.gateway import ray_serve_gateway as entry
from nemo_gym.orchestration.gateway.proxy import filter_headers, pick_replica
from nemo_gym.orchestration.gateway.replica import replica_argv, replica_env
from nemo_gym.orchestration.gateway.supervision import (
    EXIT_NOT_READY,
    EXIT_REPLICA_DIED,
    EXIT_USAGE,
    Replica,
    Supervisor,
)


def test_the_shipped_gateway_imports_neither_ray_nor_aiohttp_until_it_runs(tmp_path):
    for rel, text in shipping.staged(shipping.Program.GATEWAY).items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    code = (
        "import sys; sys.modules['ray'] = None; sys.modules['aiohttp'] = None; "
        "import nemo_gym.orchestration.gateway.ray_serve_gateway"
    )
    tree = tmp_path / "steps" / "py"
    assert subprocess.run([sys.executable, "-E", "-s", "-c", code], cwd=tree).returncode == 0


def test_hop_by_hop_headers_are_dropped_including_those_named_in_connection():
    headers = [
        ("Connection", "keep-alive, X-Private"),
        ("X-Private", "1"),
        ("Keep-Alive", "5"),
        ("TE", "trailers"),
        ("Transfer-Encoding", "chunked"),
        ("Upgrade", "h2c"),
        ("Proxy-Authorization", "x"),
        ("Proxy-Authenticate", "y"),
        ("Proxy-Connection", "close"),
        ("Trailer", "X-Sum"),
        ("Content-Type", "application/json"),
        ("Authorization", "Bearer t"),
        ("Host", "gw:8000"),
        ("Content-Length", "12"),
    ]
    assert filter_headers(headers, request=True) == [
        ("Content-Type", "application/json"),
        ("Authorization", "Bearer t"),
    ]
    assert filter_headers(headers, request=False) == [
        ("Content-Type", "application/json"),
        ("Authorization", "Bearer t"),
        ("Host", "gw:8000"),
        ("Content-Length", "12"),
    ]


def test_replica_argv_adds_port_and_ray_backend_once():
    base = ["vllm", "serve", "m", "--tensor-parallel-size", "8"]
    assert replica_argv(base, 4321) == base + ["--port", "4321", "--distributed-executor-backend", "ray"]
    chosen = base + ["--distributed-executor-backend=ray"]
    assert replica_argv(chosen, 1) == chosen + ["--port", "1"]


def test_replica_env_sets_ray_address_and_drops_worker_only_and_blank_visibility():
    env = replica_env(
        {"RAY_JOB_ID": "01000000", "CUDA_VISIBLE_DEVICES": "", "HIP_VISIBLE_DEVICES": "0,1", "HF_TOKEN": "t"},
        "10.0.0.1:6379",
    )
    assert env == {"HIP_VISIBLE_DEVICES": "0,1", "HF_TOKEN": "t", "RAY_ADDRESS": "10.0.0.1:6379"}


def test_pick_replica_least_outstanding_then_round_robin():
    reps = [Replica(i, healthy=True) for i in range(3)]
    assert [pick_replica(reps, t).index for t in range(6)] == [0, 1, 2, 0, 1, 2]
    reps[0].outstanding, reps[2].outstanding = 2, 1
    assert pick_replica(reps, 0).index == 1
    reps[1].alive = False
    assert pick_replica(reps, 0).index == 2
    for r in reps:
        r.healthy = False  # none passes /health: still route to the live ones rather than refuse
    assert pick_replica(reps, 0).index == 2
    reps[0].alive = reps[2].alive = False
    assert pick_replica(reps, 0) is None


def test_cli():
    args = entry.parse_args(
        [
            "--address",
            "h:6379",
            "--port",
            "8000",
            "--instances",
            "2",
            "--gpus-per-instance",
            "16",
            "--",
            "vllm",
            "serve",
            "m",
            "--max-model-len",
            "8192",
        ]
    )
    assert (args.address, args.port, args.instances, args.gpus_per_instance) == ("h:6379", 8000, 2, 16)
    assert args.vllm == ["vllm", "serve", "m", "--max-model-len", "8192"]
    for bad in (
        ["--address", "h:1", "--port", "1", "--instances", "2", "vllm", "serve", "m"],
        ["--address", "h:1", "--port", "1", "--instances", "2", "--", "vllm", "serve", "m", "--port", "9"],
        ["--address", "h:1", "--port", "1", "--instances", "0", "--", "vllm"],
        ["--address", "h:1", "--port", "1", "--instances", "1", "--"],
    ):
        with pytest.raises(SystemExit) as exc:
            entry.parse_args(bad)
        assert exc.value.code == EXIT_USAGE


@pytest.mark.parametrize(("fails_in", "code"), [("start_replicas", EXIT_NOT_READY), ("monitor", EXIT_REPLICA_DIED)])
def test_an_error_ray_raises_is_a_failure_exit_never_zero(fails_in, code, monkeypatch):
    """An actor that never started raises Ray's own error, neither ReplicaDied nor StartupError:
    the gateway still fails (before serving: not ready; while serving: the service died)."""
    import asyncio

    args = entry.parse_args(["--address", "h:6379", "--port", "8000", "--instances", "1", "--", "vllm", "serve", "m"])
    supervisor = Supervisor(args)

    async def nothing() -> None:
        return None

    async def ray_error() -> None:
        raise RuntimeError("The actor died unexpectedly before finishing this task.")

    for step in ("wait_cluster", "start_replicas", "wait_healthy", "monitor"):
        monkeypatch.setattr(supervisor, step, ray_error if step == fails_in else nothing)
    asyncio.run(supervisor.lifecycle())
    assert (supervisor.exit_code, supervisor.state, supervisor.done.is_set()) == (code, "failed", True)
