"""The gateway script's pure parts (header filtering, replica argv/env, routing, CLI), without Ray."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest

from nemo_gym.orchestration.gateway import SCRIPT_NAME, script_path, script_text

spec = importlib.util.spec_from_file_location("ray_serve_gateway", script_path())
gw = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = gw  # dataclasses look their module up there
spec.loader.exec_module(gw)


def test_script_is_shipped_and_standalone():
    assert script_path().name == SCRIPT_NAME and script_text().startswith("#!/usr/bin/env python3")
    # Importing it needs neither ray nor aiohttp (they are imported where used).
    code = f"import sys; sys.modules['ray'] = None; sys.modules['aiohttp'] = None; exec(open({str(script_path())!r}).read().replace('if __name__', 'if False and __name__'))"
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0


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
    assert gw.filter_headers(headers, request=True) == [
        ("Content-Type", "application/json"),
        ("Authorization", "Bearer t"),
    ]
    assert gw.filter_headers(headers, request=False) == [
        ("Content-Type", "application/json"),
        ("Authorization", "Bearer t"),
        ("Host", "gw:8000"),
        ("Content-Length", "12"),
    ]


def test_replica_argv_adds_port_and_ray_backend_once():
    base = ["vllm", "serve", "m", "--tensor-parallel-size", "8"]
    assert gw.replica_argv(base, 4321) == base + ["--port", "4321", "--distributed-executor-backend", "ray"]
    chosen = base + ["--distributed-executor-backend=ray"]
    assert gw.replica_argv(chosen, 1) == chosen + ["--port", "1"]


def test_replica_env_sets_ray_address_and_drops_worker_only_and_blank_visibility():
    env = gw.replica_env(
        {"RAY_JOB_ID": "01000000", "CUDA_VISIBLE_DEVICES": "", "HIP_VISIBLE_DEVICES": "0,1", "HF_TOKEN": "t"},
        "10.0.0.1:6379",
    )
    assert env == {"HIP_VISIBLE_DEVICES": "0,1", "HF_TOKEN": "t", "RAY_ADDRESS": "10.0.0.1:6379"}


def test_pick_replica_least_outstanding_then_round_robin():
    reps = [gw.Replica(i, healthy=True) for i in range(3)]
    assert [gw.pick_replica(reps, t).index for t in range(6)] == [0, 1, 2, 0, 1, 2]
    reps[0].outstanding, reps[2].outstanding = 2, 1
    assert gw.pick_replica(reps, 0).index == 1
    reps[1].alive = False
    assert gw.pick_replica(reps, 0).index == 2
    for r in reps:
        r.healthy = False  # none passes /health: still route to the live ones rather than refuse
    assert gw.pick_replica(reps, 0).index == 2
    reps[0].alive = reps[2].alive = False
    assert gw.pick_replica(reps, 0) is None


def test_cli():
    args = gw.parse_args(
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
            gw.parse_args(bad)
        assert exc.value.code == gw.EXIT_USAGE
