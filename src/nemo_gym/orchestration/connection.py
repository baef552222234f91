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
import threading
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
    """One OpenSSH master per CLI call, opened by the call's first command, which it carries (no
    round trip of its own); every later command reuses it."""

    # A master whose CLI call died without closing it (SIGKILL) goes away this long after its last
    # command, instead of staying for good; no call idles this long between two of its commands.
    PERSIST_SECONDS = 600
    CONNECT_SECONDS = 30

    def __init__(self, hostname: str, ssh_options: list[str] | None = None):
        self.hostname = hostname
        self.round_trips = 0
        self._options = ["-o", "BatchMode=yes", *(ssh_options or _env_ssh_options())]
        self._dir = tempfile.mkdtemp(prefix="gym-ssh-")
        self._socket = os.path.join(self._dir, "master.sock")
        self._opened = False
        self._opening = threading.Lock()

    def __enter__(self) -> SSHConnection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._opened:
            try:
                subprocess.run(
                    ["ssh", *self._options, "-o", f"ControlPath={self._socket}", "-O", "exit", self.hostname],
                    capture_output=True,
                    timeout=10,
                )
            except (OSError, subprocess.TimeoutExpired):
                pass  # the master then ends PERSIST_SECONDS after its last command
            self._opened = False
        Path(self._socket).unlink(missing_ok=True)
        try:
            os.rmdir(self._dir)
        except OSError:
            pass

    def run_script(self, script: str, timeout: float | None = None) -> Result:
        with self._opening:
            if not self._opened:
                return self._open_with(script, timeout)
        self.round_trips += 1
        proc = subprocess.run(self._ssh("bash -s"), input=script, capture_output=True, **_TEXT, timeout=timeout)
        self._check_transport(proc.returncode, proc.stderr)
        return Result(proc.returncode, proc.stdout, proc.stderr)

    def stream_script(self, script: str) -> subprocess.Popen[str]:
        """Start a script on the host whose output is read as it comes (``logs -f``). The master is
        opened first when it is not yet: what runs beside the stream (its probes) needs it up."""
        with self._opening:
            if not self._opened:
                self._open_with("true", None)  # raises as any first command does when ssh fails
        self.round_trips += 1
        return subprocess.Popen(self._ssh("bash -c " + shlex.quote(script)), stdout=subprocess.PIPE, **_TEXT)

    def _ssh(self, command: str) -> list[str]:
        return [
            "ssh",
            *self._options,
            "-o",
            "ControlMaster=no",
            "-o",
            f"ControlPath={self._socket}",
            self.hostname,
            command,
        ]

    def _open_with(self, script: str, timeout: float | None) -> Result:
        """Run the first command as the master: it connects, runs ``script``, and stays in the
        background for the next commands. The script first says it started (on stderr, taken off
        again): a failure before that is a host that could not be reached, where nothing ran; one
        after it a connection lost part way, where what ran is unknown."""
        self.round_trips += 1
        master = [
            "ssh",
            *self._options,
            "-o",
            f"ConnectTimeout={self.CONNECT_SECONDS}",
            "-o",
            "ControlMaster=yes",
            "-o",
            f"ControlPersist={self.PERSIST_SECONDS}",
            "-o",
            f"ControlPath={self._socket}",
            self.hostname,
            "bash -s",
        ]
        started = f"printf '%s\\n' {_STARTED} >&2\n"
        # The master's socket appears once ssh has authenticated, before the script runs: seen, the
        # connection was up, even if the script's first words were lost with it.
        done, up = threading.Event(), threading.Event()
        watcher = threading.Thread(target=self._watch_socket, args=(done, up), daemon=True)
        watcher.start()
        try:
            proc = subprocess.run(master, input=started + script, capture_output=True, **_TEXT, timeout=timeout)
        finally:
            done.set()
            watcher.join()
            self._opened = os.path.exists(self._socket)
        before, marker, after = proc.stderr.partition(_STARTED + "\n")
        if proc.returncode == 255 and not marker and not up.is_set():
            detail = " ".join(before.split())[-300:] or "ssh exited with status 255"
            raise UserError(
                f"cannot connect to {self.hostname} over ssh ({detail}); check that "
                f"'ssh {self.hostname} true' works without a password prompt"
            )
        stderr = before + after
        self._check_transport(proc.returncode, stderr)
        return Result(proc.returncode, proc.stdout, stderr)

    def _watch_socket(self, done: threading.Event, up: threading.Event) -> None:
        while not done.is_set():
            if os.path.exists(self._socket):
                up.set()
                return
            done.wait(0.02)
        if os.path.exists(self._socket):
            up.set()

    def _check_transport(self, returncode: int, stderr: str) -> None:
        if returncode < 0:
            # ssh itself was killed (the OOM killer, a user's kill): the connection went with it.
            raise ConnectionLost(
                f"the ssh connection to {self.hostname} was killed (signal {-returncode}) part way; what ran "
                f"before is unknown; check the connection and retry"
            )
        if returncode == 255:
            detail = " ".join(stderr.split())[-300:] or "no message"
            raise ConnectionLost(
                f"the ssh connection to {self.hostname} failed ({detail}); nothing after the failure "
                f"ran; check the connection and retry"
            )


# The first script's first line prints it on stderr: the connection was up and the script began.
_STARTED = "__GYM_SSH_SCRIPT_STARTED"


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
