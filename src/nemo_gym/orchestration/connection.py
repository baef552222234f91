"""Where commands run: this machine, or a login node over the system ``ssh``.

Both run a bash script fed on standard input, so secrets in it never show in a process list or
on disk. Over SSH, one master connection (ControlMaster) carries every command of a CLI call,
so ``~/.ssh/config``, agents and ProxyJump work as they do for the user's own ssh.
"""

from __future__ import annotations

import os
import shlex
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from nemo_gym.orchestration.errors import ConnectionLost, UserError

# What the scripts print is read from files anyone may have written (a state file, a directory's
# name): bytes that are not UTF-8 are kept as lone surrogates, not an error, and go back out as the
# same bytes (a path in the next script); whatever shows them escapes them (display.py).
_TEXT: dict = {"text": True, "encoding": "utf-8", "errors": "surrogateescape"}


@dataclass
class Result:
    returncode: int
    stdout: str
    stderr: str


class Connection(Protocol):
    """Where a command's scripts run: ``run_script`` sends a bash script on standard input and
    waits; ``stream_script`` starts one whose output is read as it comes. Both may raise
    ``ConnectionLost`` (the other side's state is then unknown). Used as a context manager."""

    round_trips: int

    @property
    def hostname(self) -> str | None: ...

    def __enter__(self) -> Connection: ...

    def __exit__(self, *exc: object) -> None: ...

    def run_script(self, script: str, timeout: float | None = None) -> Result: ...

    def stream_script(self, script: str) -> subprocess.Popen[str]: ...


# Opens the connection to a submit host (None: this machine). Library functions take one, so
# tests can hand in a fake.
Connect = Callable[[str | None], Connection]


class LocalConnection:
    hostname: str | None = None
    round_trips = 0

    def __enter__(self) -> LocalConnection:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def run_script(self, script: str, timeout: float | None = None) -> Result:
        self.round_trips += 1
        proc = subprocess.run(["bash", "-s"], input=script, capture_output=True, **_TEXT, timeout=timeout)
        return Result(proc.returncode, proc.stdout, proc.stderr)

    def stream_script(self, script: str) -> subprocess.Popen[str]:
        """Start a script whose output is read as it comes (``logs -f``)."""
        self.round_trips += 1
        return subprocess.Popen(["bash", "-c", script], stdout=subprocess.PIPE, **_TEXT)


class SSHConnection:
    """One OpenSSH master per CLI call; every command reuses it."""

    def __init__(self, hostname: str, ssh_options: list[str] | None = None):
        self.hostname = hostname
        self.round_trips = 0
        self._options = ["-o", "BatchMode=yes", *(ssh_options or _env_ssh_options())]
        self._dir = tempfile.mkdtemp(prefix="gym-ssh-")
        self._socket = os.path.join(self._dir, "master.sock")
        self._master: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> SSHConnection:
        self._master = subprocess.Popen(
            [
                "ssh",
                *self._options,
                "-o",
                "ControlMaster=yes",
                "-o",
                f"ControlPath={self._socket}",
                "-o",
                "ControlPersist=no",
                "-N",
                self.hostname,
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        self.round_trips += 1
        deadline = time.monotonic() + 30
        while not os.path.exists(self._socket):
            if self._master.poll() is not None:
                err = (self._master.stderr.read() if self._master.stderr else b"").decode(errors="replace")
                detail = " ".join(err.split()) or f"ssh exited with status {self._master.returncode}"
                raise UserError(
                    f"cannot connect to {self.hostname} over ssh ({detail}); check that "
                    f"'ssh {self.hostname} true' works without a password prompt"
                )
            if time.monotonic() > deadline:
                self.close()
                raise UserError(f"ssh to {self.hostname} did not connect within 30 s; check the host and network")
            time.sleep(0.02)
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._master is not None and self._master.poll() is None:
            subprocess.run(
                ["ssh", "-o", f"ControlPath={self._socket}", "-O", "exit", self.hostname],
                capture_output=True,
            )
            try:
                self._master.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._master.kill()
        self._master = None
        Path(self._socket).unlink(missing_ok=True)
        try:
            os.rmdir(self._dir)
        except OSError:
            pass

    def run_script(self, script: str, timeout: float | None = None) -> Result:
        self.round_trips += 1
        proc = subprocess.run(
            [
                "ssh",
                *self._options,
                "-o",
                "ControlMaster=no",
                "-o",
                f"ControlPath={self._socket}",
                self.hostname,
                "bash -s",
            ],
            input=script,
            capture_output=True,
            **_TEXT,
            timeout=timeout,
        )
        self._check_transport(proc.returncode, proc.stderr)
        return Result(proc.returncode, proc.stdout, proc.stderr)

    def stream_script(self, script: str) -> subprocess.Popen[str]:
        """Start a script on the host whose output is read as it comes (``logs -f``)."""
        self.round_trips += 1
        return subprocess.Popen(
            [
                "ssh",
                *self._options,
                "-o",
                "ControlMaster=no",
                "-o",
                f"ControlPath={self._socket}",
                self.hostname,
                "bash -c " + shlex.quote(script),
            ],
            stdout=subprocess.PIPE,
            **_TEXT,
        )

    def _check_transport(self, returncode: int, stderr: str) -> None:
        if returncode == 255:
            detail = " ".join(stderr.split())[-300:] or "no message"
            raise ConnectionLost(
                f"the ssh connection to {self.hostname} failed ({detail}); nothing after the failure "
                f"ran; check the connection and retry"
            )


def _env_ssh_options() -> list[str]:
    """Extra ssh options from GYM_SSH_OPTIONS (e.g. ``-F /path/config``), for tests and odd setups."""
    return shlex.split(os.environ.get("GYM_SSH_OPTIONS", ""))


def is_this_machine(hostname: str | None) -> bool:
    if hostname is None:
        return True
    names = {socket.gethostname(), socket.getfqdn(), "localhost"}
    return hostname in names


def connect(hostname: str | None) -> Connection:
    if is_this_machine(hostname):
        return LocalConnection()
    assert hostname is not None
    return SSHConnection(hostname)
