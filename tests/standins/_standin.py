"""Shared code of the stand-in executables (vllm, ray, gym) used where the real ones cannot run.

A stand-in records what it was started with — argv, host, selected environment — as one JSON
file under $GYM_JOB_DIR/standin/, so tests can assert what each node really received.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import sys
import time

RECORDED_ENV_PREFIXES = ("SLURM_", "PYXIS_", "GYM_", "CUDA_", "RAY_", "STANDIN_", "HF_", "OTEL_", "VLLM_", "NEMO_GYM_")


def record(tool: str, extra: dict | None = None) -> str:
    job_dir = os.environ.get("GYM_JOB_DIR", os.getcwd())
    out_dir = os.path.join(job_dir, "standin")
    os.makedirs(out_dir, exist_ok=True)
    host = os.environ.get("SLURMD_NODENAME") or socket.gethostname()
    payload = {
        "tool": tool,
        "argv": sys.argv[1:],
        "host": host,
        "pid": os.getpid(),
        "cwd": os.getcwd(),
        "time": time.time(),
        "env": {k: _safe(k, v) for k, v in os.environ.items() if k.startswith(RECORDED_ENV_PREFIXES)},
        **(extra or {}),
    }
    path = os.path.join(out_dir, f"{tool}-{host}-{os.getpid()}.json")
    with open(path, "w") as fh:
        json.dump(payload, fh, indent=1)
    return path


def _safe(key: str, value: str) -> str:
    """Secrets are recorded as a digest, so a test can check them without writing them to disk."""
    if "TOKEN" in key or "SECRET" in key:
        return "sha256:" + hashlib.sha256(value.encode()).hexdigest()
    return value


def option(argv: list[str], name: str, default: str | None = None) -> str | None:
    for i, arg in enumerate(argv):
        if arg == name and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith(name + "="):
            return arg.split("=", 1)[1]
    return default


def sleep_forever() -> None:
    while True:
        time.sleep(3600)
