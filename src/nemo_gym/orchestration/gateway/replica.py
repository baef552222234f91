"""One replica's `vllm serve` engine: its command line and environment, and the process started,
probed and stopped from inside the Serve replica that owns it.

This module runs inside Ray's worker processes (Serve's replicas), which cannot import this
package: the gateway sends it to them by value (``register_pickle_by_value``), with the module
that imports it (``proxy``); it imports nothing of ours.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
from typing import Any

# Accelerator visibility variables an old Ray may blank in a 0-GPU actor; vLLM must not inherit "".
_VISIBILITY_VARS = ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES")
# Set by Ray in its worker processes only; a new driver (vLLM) must pick its own.
_WORKER_ONLY_VARS = ("RAY_JOB_ID",)


def has_option(argv: list[str], name: str) -> bool:
    return any(a == name or a.startswith(name + "=") for a in argv)


def option_value(argv: list[str], name: str) -> str | None:
    for i, arg in enumerate(argv):
        if arg == name and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith(name + "="):
            return arg.split("=", 1)[1]
    return None


def replica_argv(base: list[str], port: int) -> list[str]:
    """The vLLM argv of one replica: the given one plus its port and, unless chosen, the Ray executor."""
    argv = list(base) + ["--port", str(port)]
    if not has_option(base, "--distributed-executor-backend"):
        argv += ["--distributed-executor-backend", "ray"]
    return argv


def replica_env(environ: dict[str, str], address: str) -> dict[str, str]:
    env = dict(environ)
    for name in _WORKER_ONLY_VARS:
        env.pop(name, None)
    for name in _VISIBILITY_VARS:
        if env.get(name) == "":
            env.pop(name)
    env["RAY_ADDRESS"] = address
    return env


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("", 0))
        return int(s.getsockname()[1])


# Stops an engine's whole process group ($1) when the replica that started it ($3) is gone,
# however it went (Ray's SIGKILL included, when no code of the replica runs): vLLM's EngineCore
# and workers outlive their API server otherwise. SIGTERM to the group, SIGKILL after $2 seconds (3).
# It watches the replica's pid (a zombie counts as gone) rather than rely on PR_SET_PDEATHSIG,
# which follows the thread that started it; SIGUSR1 stands it down.
_GROUP_REAPER = """
trap 'exit 0' USR1
alive() { local st; st=$(ps -o stat= -p "$1" 2>/dev/null) && [ "${st#Z}" = "$st" ]; }
while alive "$3"; do sleep 1; done
kill -TERM -- "-$1" 2>/dev/null
for _ in $(seq "$2"); do kill -0 -- "-$1" 2>/dev/null || exit 0; sleep 1; done
kill -KILL -- "-$1" 2>/dev/null
"""


REAPER_NAME = "gym-engine-reaper"
# Started by a bash that exits at once, in a session of its own: the reaper is no child of the
# replica's worker, which Ray kills with its direct children (its engine's API server among them)
# when it ends a replica, leaving the engine's other processes (vLLM's EngineCore and workers)
# orphaned; the reaper outlives that and stops the engine's whole group.
_SPAWN = 'setsid bash -c "$0" "$@" </dev/null >/dev/null 2>&1 & echo "$!"'


def _detached_reaper(group: int, replica: int) -> int | None:
    """Starts the reaper of the engine's process group ``group``, which waits for ``replica`` to
    end; its pid, or None when it could not be started (the replica's own stop still ends the group)."""
    argv = ["bash", "-c", _SPAWN, _GROUP_REAPER, REAPER_NAME, str(group), "3", str(replica)]
    try:
        said = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return int(said.strip()) if said.strip().isdigit() else None


def _is_reaper(pid: int) -> bool:
    """Whether ``pid`` is still the reaper started (not a pid reused since)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return REAPER_NAME.encode() in fh.read().split(b"\0")
    except OSError:
        return False


class Engine:
    """One `vllm serve` process on this node, in a process group of its own, and its reaper."""

    def __init__(self, argv: list[str], address: str, cwd: str, log_path: str | None) -> None:
        self.port = free_port()
        self.argv = replica_argv(argv, self.port)
        self.address, self.cwd, self.log_path = address, cwd, log_path
        self.proc: subprocess.Popen | None = None
        self.reaper: int | None = None  # its reaper's pid

    @property
    def pid(self) -> int:
        return self.proc.pid if self.proc else 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> int:
        out = None
        if self.log_path:
            os.makedirs(os.path.dirname(self.log_path) or ".", exist_ok=True)
            out = open(self.log_path, "ab", buffering=0)  # noqa: SIM115 - the engine writes it for its life
        self.proc = subprocess.Popen(
            self.argv,
            env=replica_env(dict(os.environ), self.address),
            cwd=self.cwd if os.path.isdir(self.cwd) else None,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT if out else None,
            start_new_session=True,  # its own process group: stop() reaches vLLM's children too
            preexec_fn=_parent_death_signal(),
        )
        if out:
            out.close()
        self.reaper = _detached_reaper(self.proc.pid, os.getpid())
        return self.proc.pid

    def poll(self) -> int | None:
        return None if self.proc is None else self.proc.poll()

    def stop(self, timeout: float) -> int | None:
        """SIGTERM to the engine's group, SIGKILL after ``timeout``; whatever of the group is left
        when the engine has exited (its EngineCore, workers) is killed too."""
        if self.proc is None:
            return None
        rc = self.proc.poll()
        if rc is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                rc = self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                pass
        self.kill_group()
        if rc is None:
            try:
                rc = self.proc.wait(10.0)
            except subprocess.TimeoutExpired:
                rc = self.proc.poll()
        return rc

    def kill_group(self) -> None:
        """SIGKILL to every process left in the engine's group, and its reaper stood down."""
        if self.proc is not None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        if self.reaper is not None and _is_reaper(self.reaper):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(self.reaper, signal.SIGUSR1)  # stands down

    def tail(self, lines: int = 20) -> str:
        """The end of its log, for the error that says why it did not start."""
        path = self.log_path
        if not path or not os.path.exists(path):
            return ""
        with open(path, "rb") as fh:
            fh.seek(max(0, os.path.getsize(path) - 8192))
            text = fh.read().decode(errors="replace").splitlines()[-lines:]
        return "\n  last lines of its log:\n  " + "\n  ".join(text)


def _parent_death_signal() -> Any:
    """A preexec_fn that makes the child get SIGTERM when the thread that started it dies (the
    replica's user-code loop thread, which lives as long as the replica's actor: Ray killing the
    replica stops its engine). libc is loaded here, before the fork, not in the child."""
    try:
        import ctypes

        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):  # not Linux: the explicit stop() path still applies
        return None
    return lambda: prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
