"""A fake Slurm cluster in a directory: the fake commands on a PATH, and a Python API to drive jobs.

    cluster = FakeCluster(tmp_path / "slurm")
    subprocess.run(["bash", "-c", "sbatch --parsable job.sh"], env={**os.environ, **cluster.env()})
    cluster.set_state("100", "RUNNING")

Nothing leaves the directory, so tests can run in parallel.
"""

from __future__ import annotations

import os
import shlex
import stat
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from .fake_slurm import (
    ALL_STATES,
    COMMANDS,
    DEFAULT_END_EXIT_CODES,
    DEFAULT_END_REASONS,
    DEFAULT_REFUSAL,
    ENDED_STATES,
    STARTED_STATES,
    STATE_ENV,
    StateFile,
    format_minutes,
    new_job,
    parse_time_limit,
)

FAKE_SLURM = Path(__file__).with_name("fake_slurm.py")


class FakeCluster:
    def __init__(self, root: Path | str, *, first_id: int = 100):
        self.root = Path(root)
        self.bin_dir = self.root / "bin"
        self.bin_dir.mkdir(parents=True, exist_ok=True)
        self.state_path = self.root / "slurm-state.json"
        self._state = StateFile(self.state_path)
        self._state.create(first_id)
        self._shadow_dirs: dict[str, str] = {}
        self.install_commands()

    # -- the commands --------------------------------------------------------------------------------

    def install_commands(self, *names: str) -> None:
        """Put these fake commands (all by default) on the cluster's PATH."""
        for name in names or COMMANDS:
            wrapper = self.bin_dir / name
            wrapper.write_text(
                "#!/bin/sh\n"
                f"FAKE_SLURM_STATE={shlex.quote(str(self.state_path))} "
                f'exec {shlex.quote(sys.executable)} -I {shlex.quote(str(FAKE_SLURM))} {name} "$@"\n'
            )
            wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)

    def remove_commands(self, *names: str) -> None:
        """Take these commands (all by default) off the PATH, e.g. sacct on a cluster without it."""
        for name in names or COMMANDS:
            (self.bin_dir / name).unlink(missing_ok=True)

    def without_slurm(self) -> FakeCluster:
        """No Slurm at all, for the local backend."""
        self.remove_commands()
        return self

    def env(self) -> dict[str, str]:
        """What to add to a process's environment for it to see this cluster, and no other Slurm."""
        path = [str(self.bin_dir), *self._hermetic(os.environ.get("PATH", "").split(os.pathsep))]
        return {"PATH": os.pathsep.join(path), STATE_ENV: str(self.state_path)}

    def run(self, command: str, *args: str) -> subprocess.CompletedProcess[str]:
        """Run one fake command as a script would, e.g. ``cluster.run("sbatch", "--parsable", "job.sh")``."""
        return subprocess.run(
            [command, *args], capture_output=True, text=True, env={**os.environ, **self.env()}, cwd=self.root
        )

    def _hermetic(self, directories: list[str]) -> list[str]:
        # A machine with a real Slurm (the local test bed) has sbatch in /usr/bin: a directory that
        # holds one is replaced by a shadow of links to everything else in it.
        return [self._shadow(d) if self._holds_slurm(d) else d for d in directories if d]

    @staticmethod
    def _holds_slurm(directory: str) -> bool:
        return any(os.access(os.path.join(directory, name), os.X_OK) for name in COMMANDS)

    def _shadow(self, directory: str) -> str:
        if directory not in self._shadow_dirs:
            shadow = self.root / "shadow" / str(len(self._shadow_dirs))
            shadow.mkdir(parents=True, exist_ok=True)
            for entry in os.listdir(directory):
                if entry not in COMMANDS:
                    (shadow / entry).symlink_to(os.path.join(directory, entry))
            self._shadow_dirs[directory] = str(shadow)
        return self._shadow_dirs[directory]

    # -- jobs ----------------------------------------------------------------------------------------

    def job(self, job_id: str | int) -> dict:
        return self._state.read()["jobs"][str(job_id)]

    def jobs(self) -> dict[str, dict]:
        return self._state.read()["jobs"]

    def add_job(self, name: str = "job", state: str = "PENDING", **fields: object) -> str:
        """A job as if sbatch had queued it (no script needed); returns its id."""
        with self._state.edit() as data:
            job_id = new_job(data, str(self.root / f"{name}.sh"), [], {"job-name": name, "chdir": str(self.root)})["id"]
        self.set_state(job_id, state)
        if fields:
            with self._state.edit() as data:
                data["jobs"][job_id].update(fields)
        return job_id

    def set_state(
        self,
        job_id: str | int,
        state: str,
        reason: str | None = None,
        exit_code: str | int | None = None,
        restarts: int | None = None,
        time_limit: str | None = None,
        *,
        nodes: str | None = None,
    ) -> None:
        """Move a job to ``state`` as Slurm would: start and end times, and unless given, the reason
        and exit code Slurm sets for that ending (FAILED 1:0 NonZeroExitCode, TIMEOUT TimeLimit...)."""
        if state not in ALL_STATES:
            raise ValueError(f"{state!r} is not a Slurm job state; use one of {', '.join(ALL_STATES)}")
        with self._state.edit() as data:
            job = data["jobs"][str(job_id)]
            _move(job, state, time.time())
            job["reason"] = reason if reason is not None else _default_reason(job, state)
            if exit_code is not None:
                job["exit_code"] = f"{exit_code}:0" if isinstance(exit_code, int) else exit_code
            else:
                job["exit_code"] = _default_exit_code(job, state)
            if restarts is not None:
                job["restarts"] = restarts
            if time_limit is not None:
                job["time_limit"] = format_minutes(parse_time_limit(time_limit))
            if nodes is not None:
                job["nodes"] = nodes

    def set_times(self, job_id: str | int, start: float | None, end: float | None) -> None:
        """When the job started and ended (epoch seconds), for tests of what it cost."""
        with self._state.edit() as data:
            data["jobs"][str(job_id)].update(start_time=start, end_time=end)

    def forget(self, job_id: str | int) -> None:
        """MinJobAge has passed: scontrol, squeue and scancel no longer know the job; sacct does."""
        with self._state.edit() as data:
            job = data["jobs"][str(job_id)]
            if job["state"] not in ENDED_STATES:
                raise ValueError(f"job {job_id} is {job['state']}; Slurm only forgets jobs that ended")
            job["forgotten"] = True

    # -- how the cluster behaves ---------------------------------------------------------------------------

    @property
    def next_id(self) -> int:
        return self._state.read()["next_id"]

    @next_id.setter
    def next_id(self, value: int) -> None:
        self._set("next_id", value)

    @property
    def accounting(self) -> bool:
        """Whether sacct works (AccountingStorageType=slurmdbd) or says accounting is disabled."""
        return self._state.read()["accounting"]

    @accounting.setter
    def accounting(self, enabled: bool) -> None:
        self._set("accounting", enabled)

    @property
    def slurmdbd_down(self) -> bool:
        """With accounting on: sacct cannot reach the database and fails."""
        return self._state.read()["slurmdbd_down"]

    @slurmdbd_down.setter
    def slurmdbd_down(self, down: bool) -> None:
        self._set("slurmdbd_down", down)

    @property
    def slurmctld_down(self) -> bool:
        """slurmctld does not answer (a maintenance restart): every scontrol RPC fails, ping says DOWN."""
        return self._state.read()["slurmctld_down"]

    @slurmctld_down.setter
    def slurmctld_down(self, down: bool) -> None:
        self._set("slurmctld_down", down)

    @property
    def strict_scancel(self) -> bool:
        """scancel fails (exit 1, with Slurm's message) for a job that ended or is unknown, instead
        of being silent as Slurm >= 17.11 is."""
        return self._state.read()["strict_scancel"]

    @strict_scancel.setter
    def strict_scancel(self, strict: bool) -> None:
        self._set("strict_scancel", strict)

    def limit_submit_jobs(self, account: str, limit: int) -> None:
        """The user's association in ``account`` has MaxSubmitJobs=``limit``, enforced: sbatch past
        it is refused, and ``scontrol show assoc_mgr`` states it with its use."""
        with self._state.edit() as data:
            data["submit_limits"][account] = limit

    def deny_cancel(self, job_id: str) -> None:
        """scancel refuses job ``job_id`` (exit 1, Slurm's message), as for another user's job."""
        with self._state.edit() as data:
            data["cancel_denied"].append(job_id)

    @property
    def cluster_name(self) -> str | None:
        """When set, ``sbatch --parsable`` prints ``ID;NAME`` (a federated or -M submission)."""
        return self._state.read()["cluster_name"]

    @cluster_name.setter
    def cluster_name(self, name: str | None) -> None:
        self._set("cluster_name", name)

    def refuse(self, substring: str, message: str = DEFAULT_REFUSAL, times: int | None = None) -> None:
        """sbatch of a script whose path contains ``substring`` fails with ``sbatch: error: MESSAGE``
        (every time, or the next ``times`` times). Slurm's own refusals read
        ``Batch job submission failed: <reason>``."""
        with self._state.edit() as data:
            data["refusals"].append({"match": substring, "message": message, "times": times})

    def noise(self, stdout_lines: Sequence[str] = (), stderr_lines: Sequence[str] = ()) -> None:
        """Lines every sbatch prints before its own output, as a site's submit plugin does."""
        with self._state.edit() as data:
            data["noise"] = {"stdout": list(stdout_lines), "stderr": list(stderr_lines)}

    # -- what was asked of it ------------------------------------------------------------------------------

    def calls(self, command: str | None = None) -> list[list[str]]:
        """Every fake command run, oldest first: its argv, or ``[command, *argv]`` for all commands."""
        log = self._state.read()["calls"]
        if command is None:
            return [[call["command"], *call["argv"]] for call in log]
        return [call["argv"] for call in log if call["command"] == command]

    def cancelled_ids(self) -> list[str]:
        """The job ids passed to scancel, in order (options left out)."""
        ids = []
        for argv in self.calls("scancel"):
            ids += [i for arg in argv if not arg.startswith("-") for i in arg.split(",") if i.isdigit()]
        return ids

    def _set(self, key: str, value: object) -> None:
        with self._state.edit() as data:
            data[key] = value


def _move(job: dict, state: str, now: float) -> None:
    if state == "PENDING":  # queued again (requeued): a new start to come
        job["start_time"] = job["nodes"] = None
    if state in STARTED_STATES or (state in ENDED_STATES and state != "CANCELLED"):
        job["start_time"] = job["start_time"] or now
        job["nodes"] = job["nodes"] or "n1"
    job["end_time"] = (job["end_time"] or now) if state in ENDED_STATES else None
    if state != "PENDING":
        job["dependency"] = None
    job["state"] = state


def _default_exit_code(job: dict, state: str) -> str:
    if state == "CANCELLED" and job["start_time"]:
        return "0:15"  # killed by SIGTERM
    return DEFAULT_END_EXIT_CODES.get(state, "0:0")


def _default_reason(job: dict, state: str) -> str:
    if state == "PENDING" and job["dependency"]:
        return "Dependency"
    return DEFAULT_END_REASONS.get(state, "None")
