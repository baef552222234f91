"""The gateway's pure parts (header filtering, replica argv/env, the watch's rules, the packing
rule, CLI), without Ray."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from nemo_gym.orchestration import shipping
from nemo_gym.orchestration.gateway import ray_serve_gateway as entry
from nemo_gym.orchestration.gateway.proxy import filter_headers
from nemo_gym.orchestration.gateway.replica import replica_argv, replica_env
from nemo_gym.orchestration.gateway.supervision import (
    EXIT_NOT_READY,
    EXIT_NOT_RECOVERED,
    EXIT_USAGE,
    Observation,
    Verdict,
    Watch,
)


def test_the_shipped_gateway_imports_neither_ray_nor_aiohttp_nor_starlette_until_it_runs(tmp_path):
    for rel, text in shipping.staged(shipping.Program.GATEWAY).items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    code = (
        "import sys; sys.modules['ray'] = None; sys.modules['aiohttp'] = None; sys.modules['starlette'] = None; "
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
        ("Date", "Sun, 06 Dec 2026 12:00:00 GMT"),
        ("Server", "uvicorn"),
    ]
    assert filter_headers(headers, request=True) == [
        ("Content-Type", "application/json"),
        ("Authorization", "Bearer t"),
        ("Date", "Sun, 06 Dec 2026 12:00:00 GMT"),
        ("Server", "uvicorn"),
    ]
    # Serve's proxy sets its own Date and Server on the client's hop.
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


@pytest.mark.parametrize(
    ("gpus_per_instance", "node_gpus", "per_node"),
    [
        (0, [8.0, 8.0], None),  # engines' GPUs unknown: no rule
        (2, [0.0], None),  # no GPU node (a CPU test bed)
        (2, [4.0, 0.0], 2),  # the CPU head does not count
        (3, [8.0, 8.0], 2),
        (16, [8.0, 8.0, 8.0, 8.0], 1),  # wider than a node: one replica a node
        (4, [8.0, 4.0], 1),  # the smallest node decides
    ],
)
def test_replicas_per_node(gpus_per_instance, node_gpus, per_node):
    assert entry.replicas_per_node(gpus_per_instance, node_gpus) == per_node


def _seen(status: str, running: int, target: int = 2) -> Observation:
    return Observation(status, running, target)


# (seconds since the start, what serve.status says) -> (exit status or None, state after, log line starts)
_STORY = [
    (1, _seen("DEPLOYING", 0), None, "starting", None),
    (5, _seen("DEPLOYING", 1), None, "starting", None),
    (6, _seen("RUNNING", 2), None, "ready", "ready in 6.0s"),
    (50, _seen("UNHEALTHY", 1), None, "degraded", "degraded (UNHEALTHY, 1 of 2"),
    (60, _seen("DEPLOYING", 1), None, "degraded", None),
    (70, _seen("RUNNING", 2), None, "ready", "recovered in 20.0s"),
    (80, _seen("RUNNING", 1), None, "degraded", "degraded (RUNNING, 1 of 2"),  # running, short of one
    (180, _seen("UNKNOWN", 0), None, "degraded", None),  # the controller unreachable: still counting
    (180.5, _seen("UNHEALTHY", 1), EXIT_NOT_RECOVERED, "degraded", None),  # 100.5 s > the bound
]


def test_the_watch_tells_ready_degraded_recovered_and_the_bound():
    rules = Watch(started=0, startup_timeout=300, recovery_timeout=100)
    for now, seen, code, state, line in _STORY:
        verdict, event = rules.observe(now, seen)
        assert (verdict.code if verdict else None, rules.state) == (code, state), (now, verdict, event)
        assert (event or "").startswith(line or ""), (now, event)
        assert (event is None) == (line is None), (now, event)
    assert rules.recoveries == [20.0]
    assert "not recovered in 100s (UNHEALTHY, 1 of 2 replica(s) running)" in verdict.reason


@pytest.mark.parametrize(
    ("ready", "now", "seen", "verdict"),
    [
        (
            False,
            10,
            _seen("DEPLOY_FAILED", 0),
            Verdict(EXIT_NOT_READY, "Serve could not start the replicas (DEPLOY_FAILED, 0 of 2 replica(s) running)"),
        ),
        (
            False,
            301,
            _seen("DEPLOYING", 1),
            Verdict(EXIT_NOT_READY, "not ready in 300s (DEPLOYING, 1 of 2 replica(s) running)"),
        ),
        (False, 299, _seen("DEPLOYING", 1), None),
        (
            True,
            20,
            _seen("DEPLOY_FAILED", 1),
            Verdict(EXIT_NOT_RECOVERED, "Serve gave up replacing replicas (DEPLOY_FAILED, 1 of 2 replica(s) running)"),
        ),
        (True, 20, _seen("RUNNING", 2), None),
    ],
)
def test_the_watch_before_and_after_ready(ready, now, seen, verdict):
    rules = Watch(started=0, startup_timeout=300, recovery_timeout=100)
    if ready:
        rules.observe(5, _seen("RUNNING", 2))
    assert rules.observe(now, seen)[0] == verdict


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


def test_recovery_bound_defaults_to_the_startup_timeout():
    base = ["--address", "h:6379", "--port", "8000", "--instances", "2", "--startup-timeout", "900"]
    assert entry.parse_args([*base, "--", "vllm", "serve", "m"]).recovery_timeout == 900
    assert entry.parse_args([*base, "--recovery-timeout", "60", "--", "vllm"]).recovery_timeout == 60


def _group_alive(pgid: int) -> list[str]:
    """Live (not zombie) members of a process group."""
    out = subprocess.run(["ps", "-o", "stat=", "-g", str(pgid)], capture_output=True, text=True).stdout.split()
    return [s for s in out if not s.startswith("Z")]


def _running(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie has ended)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(") ")[-1].split()[0] != "Z"
    except OSError:
        return False


def test_an_engine_s_leftovers_die_with_it_and_with_its_replica(tmp_path):
    """vLLM's EngineCore and workers outlive their API server: the engine's whole group goes,
    whether the engine exited (kill_group) or its replica died without running any code (the
    reaper, watching the replica's pid: here a process killed with SIGKILL)."""
    import signal
    import time

    from nemo_gym.orchestration.gateway.replica import Engine

    exited = Engine([], "h:1", str(tmp_path), None)
    exited.argv = ["sh", "-c", "sleep 1000 & exit 7"]
    pgid = exited.start()
    assert exited.proc is not None and exited.proc.wait(10) == 7
    assert _group_alive(pgid)  # its child lives on
    assert exited.reaper is not None and _running(exited.reaper)  # detached: no child of this process
    exited.kill_group()
    time.sleep(0.3)
    deadline = time.monotonic() + 5
    while _running(exited.reaper) and time.monotonic() < deadline:  # stood down
        time.sleep(0.1)
    assert not _group_alive(pgid) and not _running(exited.reaper)

    # A replica (this program, its own session) starts a stubborn engine and is killed outright.
    replica = (
        "import sys, time; sys.path[:0] = sys.argv[1:2]\n"
        "from nemo_gym.orchestration.gateway.replica import Engine\n"
        "e = Engine([], 'h:1', '.', None)\n"
        "e.argv = ['bash', '-c', 'trap \"\" TERM; sleep 1000 & sleep 1000 & wait']\n"
        "print(e.start(), flush=True)\n"
        "time.sleep(1000)\n"
    )
    src = str(Path(sys.modules[Engine.__module__].__file__).parents[3])
    proc = subprocess.Popen(
        [sys.executable, "-c", replica, src], stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        assert proc.stdout is not None
        pgid = int(proc.stdout.readline())
        assert len(_group_alive(pgid)) == 3
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)
        deadline = time.monotonic() + 20
        while _group_alive(pgid):
            assert time.monotonic() < deadline, "the engine's group outlived its replica by 20 s"
            time.sleep(0.5)
    finally:
        if proc.poll() is None:
            proc.kill()
