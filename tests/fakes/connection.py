"""A connection like LocalConnection and SSHConnection whose scripts run here, with `bash -s`, against
a FakeCluster, and whose link to the "remote" side can be made to break at a chosen script.

Faults are set by call number: the Nth script given to this connection, or to any connection its
``connect()`` opened (they share one FaultPlan), counting from 1 and counting run_script and
stream_script alike.

    conn = FakeConnection(cluster)
    conn.lose_during(1, after_output="__GYM_JOB:first:")   # the 1st script dies right after that line
    conn.patch_connect(monkeypatch)                          # code under test's connect() gets siblings
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nemo_gym.orchestration.connection import Result
from nemo_gym.orchestration.errors import ConnectionLost, UserError

from .cluster import FakeCluster

STREAM_RELAY = Path(__file__).with_name("_stream_relay.py")

# Runs before a script that must die right after printing a given text. The check sits in a DEBUG
# trap, before every command (functrace carries it into functions and $(...)), and reads stdout
# back from its file, so the cut falls exactly between two commands, whatever the timing.
CUT_PRELUDE = """\
__fake_cut_out={out}
__fake_cut_text={text}
set -o functrace
trap '{{ IFS= read -r -d "" __fake_cut_seen <"$__fake_cut_out" || true; }} 2>/dev/null; \
[[ ${{__fake_cut_seen-}} == *"$__fake_cut_text"* ]] && kill -KILL 0; true' DEBUG
"""


class FaultNotTriggered(AssertionError):
    """A lose_during script ended without printing the text it was to die after."""


@dataclass
class Fault:
    kind: str  # "before" | "after" | "during"
    after_output: str = ""


@dataclass
class FaultPlan:
    """The faults to come and the scripts given so far, shared by a connection and its siblings."""

    faults: dict[int, Fault] = field(default_factory=dict)
    scripts: list[str] = field(default_factory=list)
    refusing: bool = False
    file_write_error: str | None = None  # set: every file-writing script fails with this on stderr
    connections: list[FakeConnection] = field(default_factory=list)

    def add(self, call_number: int, fault: Fault) -> None:
        if call_number <= len(self.scripts):
            raise ValueError(f"script {call_number} has been given already ({len(self.scripts)} so far)")
        if call_number in self.faults:
            raise ValueError(f"script {call_number} has a fault already: {self.faults[call_number]}")
        self.faults[call_number] = fault

    def take(self, script: str) -> Fault | None:
        """Record the next script; its fault, if one was planned."""
        self.scripts.append(script)
        return self.faults.pop(len(self.scripts), None)


class FakeConnection:
    def __init__(self, cluster: FakeCluster, hostname: str | None = "login.fake", plan: FaultPlan | None = None):
        self.cluster = cluster
        self.hostname = hostname
        self.round_trips = 0
        self.connected = False  # as SSHConnection's master: opened by the first script
        self.plan = plan if plan is not None else FaultPlan()
        self.plan.connections.append(self)

    @property
    def scripts(self) -> list[str]:
        """Every script given to this connection and its siblings, in order."""
        return self.plan.scripts

    # -- faults ------------------------------------------------------------------------------------

    def lose_before(self, call_number: int) -> None:
        """That script never reaches the other side; the caller gets ConnectionLost."""
        self.plan.add(call_number, Fault("before"))

    def lose_after(self, call_number: int) -> None:
        """That script runs to its end, then the caller gets ConnectionLost instead of its output."""
        self.plan.add(call_number, Fault("after"))

    def lose_during(self, call_number: int, after_output: str) -> None:
        """That script runs until its stdout holds ``after_output``, then its process group is
        killed before its next command, and the caller gets ConnectionLost."""
        if not after_output:
            raise ValueError("after_output must be a non-empty text the script prints")
        self.plan.add(call_number, Fault("during", after_output))

    def refuse_connect(self, refuse: bool = True) -> None:
        """The first script of this connection or a sibling not yet connected fails as ssh does
        when it cannot connect (the script never runs)."""
        self.plan.refusing = refuse

    def fail_file_writes(self, message: str | None = "disk full") -> None:
        """Every script writing files (``write_remote_files``'s heredocs), on this connection or a
        sibling, fails with ``message`` on stderr, as a full or read-only disk makes ``cat`` fail;
        None: they work again."""
        self.plan.file_write_error = message

    # -- opening -----------------------------------------------------------------------------------

    def connect(self, hostname: str | None) -> FakeConnection:
        """A new connection to ``hostname``, sharing this one's cluster and fault plan."""
        return FakeConnection(self.cluster, hostname, self.plan)

    def patch_connect(self, monkeypatch: Any) -> None:
        """Make ``connect(hostname)`` in the code under test (wherever it was imported) return
        siblings of this connection."""
        from nemo_gym.orchestration import connection

        original = connection.connect
        for name, module in list(sys.modules.items()):
            if name.startswith("nemo_gym.orchestration") and getattr(module, "connect", None) is original:
                monkeypatch.setattr(module, "connect", self.connect)

    def __enter__(self) -> FakeConnection:
        return self

    def _connect(self) -> None:
        if not self.connected and self.plan.refusing:
            raise UserError(
                f"cannot connect to {self._host()} over ssh (fake: connection refused); check that "
                f"'ssh {self._host()} true' works without a password prompt"
            )
        self.connected = True

    def __exit__(self, *exc: object) -> None:
        return None

    # -- running -----------------------------------------------------------------------------------

    def run_script(self, script: str, timeout: float | None = None) -> Result:
        self._connect()
        self.round_trips += 1
        fault = self.plan.take(script)
        if fault is not None and fault.kind == "before":
            raise self._lost("before the script reached it")
        if fault is not None and fault.kind == "during":
            self._run_until(script, fault.after_output, timeout)
            raise self._lost(f"after the script printed {fault.after_output!r}")
        if self.plan.file_write_error is not None and "<<'GYM_FILE_EOF'" in script:
            return Result(1, "", f"{self.plan.file_write_error}\n")
        proc = subprocess.run(
            ["bash", "-s"], input=script, capture_output=True, text=True, timeout=timeout, env=self._env()
        )
        if fault is not None:
            raise self._lost("after the script ran")
        return Result(proc.returncode, proc.stdout, proc.stderr)

    def stream_script(self, script: str) -> subprocess.Popen[str]:
        """Like ssh's: a lost connection ends the stream, and the process exits 255."""
        self._connect()
        self.round_trips += 1
        fault = self.plan.take(script)
        if fault is None:
            return subprocess.Popen(["bash", "-c", script], stdout=subprocess.PIPE, text=True, env=self._env())
        script_file = self._work_dir() / "script.sh"
        script_file.write_text(script)
        return subprocess.Popen(
            [sys.executable, str(STREAM_RELAY), fault.kind, fault.after_output, str(script_file)],
            stdout=subprocess.PIPE,
            text=True,
            env=self._env(),
        )

    def _run_until(self, script: str, text: str, timeout: float | None) -> None:
        work = self._work_dir()
        out_path, err_path = work / "stdout", work / "stderr"
        prelude = CUT_PRELUDE.format(out=shlex.quote(str(out_path)), text=shlex.quote(text))
        with open(out_path, "w") as out, open(err_path, "w") as err:
            proc = subprocess.Popen(
                ["bash", "-s"],
                stdin=subprocess.PIPE,
                stdout=out,
                stderr=err,
                text=True,
                env=self._env(),
                start_new_session=True,
            )
            try:
                proc.communicate(prelude + script, timeout=timeout)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                raise
        stdout = out_path.read_text()
        if text not in stdout:
            raise FaultNotTriggered(
                f"the script ended (exit {proc.returncode}) without printing {text!r}; "
                f"stdout: {stdout[-500:]!r}; stderr: {err_path.read_text()[-500:]!r}"
            )

    def _lost(self, when: str) -> ConnectionLost:
        return ConnectionLost(
            f"the ssh connection to {self._host()} failed (fake: lost {when}); nothing after the failure "
            f"ran; check the connection and retry"
        )

    def _host(self) -> str:
        return self.hostname or "localhost"

    def _env(self) -> dict[str, str]:
        return {**os.environ, **self.cluster.env()}

    def _work_dir(self) -> Path:
        return Path(tempfile.mkdtemp(dir=self.cluster.root, prefix="connection-"))
