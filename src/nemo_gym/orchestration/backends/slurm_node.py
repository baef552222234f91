"""Slurm's words, and the few Slurm commands a job runs on its node: the one place they are spelled.

Read by the Slurm backend on the submitting machine (status, cancel, the job's TERM handling) and
by the resume judge and a lane's feeder on the node (``NodeScheduler``: what Slurm says of a job,
queue a successor or a lane's next job, cancel one). Stdlib only, Python 3.8 syntax: shipped with
``resume.py`` and ``lane_feed.py`` (``shipping``), and imported there by the node's ``python3``.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Sequence

from nemo_gym.orchestration import contract as c

# -- Slurm's job states ------------------------------------------------------------------------------

PENDING = "PENDING"
CANCELLED = "CANCELLED"
RUNNING_STATES = ("RUNNING", "COMPLETING", "CONFIGURING", "SUSPENDED", "STOPPED", "RESIZING")
ENDED_STATES = (
    "COMPLETED",
    "FAILED",
    CANCELLED,
    "TIMEOUT",
    "NODE_FAIL",
    "PREEMPTED",
    "BOOT_FAIL",
    "DEADLINE",
    "OUT_OF_MEMORY",
)

# What an ended Slurm state says about the job, for the resume judge.
STATE_OUTCOMES = {
    "TIMEOUT": c.Outcome.TIMEOUT,
    "DEADLINE": c.Outcome.TIMEOUT,
    "PREEMPTED": c.Outcome.PREEMPTED,
    "NODE_FAIL": c.Outcome.NODE_FAILURE,
    "BOOT_FAIL": c.Outcome.NODE_FAILURE,
    "OUT_OF_MEMORY": c.Outcome.OUT_OF_MEMORY,
    CANCELLED: c.Outcome.CANCELLED,
}

# While a job is being ended, Slurm's word for why (what its TERM was): a field of its scontrol
# line -> cause. A walltime also shows as Reason=TimeLimit while the job is still COMPLETING; a
# preemption that cancels (PreemptMode=CANCEL) only as the time it was preempted (PreemptTime=...),
# until it has ended. A word ending in "=" is the field set to a time (not None).
ENDING_CAUSES = (
    ("JobState=TIMEOUT", c.Cause.WALLTIME),
    ("JobState=DEADLINE", c.Cause.WALLTIME),
    ("Reason=TimeLimit", c.Cause.WALLTIME),
    ("JobState=PREEMPTED", c.Cause.PREEMPTED),
    ("PreemptTime=", c.Cause.PREEMPTED),
    ("JobState=CANCELLED", c.Cause.CANCELLED),
)


def case_pattern(word: str) -> str:
    """The bash ``case`` pattern matching an scontrol line that holds ``word`` (one field)."""
    return f'*" {word}"[0-9]*' if word.endswith("=") else f'*" {word} "*'


def ending_groups() -> list[tuple[c.Cause, list[str]]]:
    """``ENDING_CAUSES`` grouped by cause, in order, as case patterns: [(cause, [pattern, ...]), ...]."""
    groups: list[tuple[c.Cause, list[str]]] = []
    for word, cause in ENDING_CAUSES:
        if groups and groups[-1][0] == cause:
            groups[-1][1].append(case_pattern(word))
        else:
            groups.append((cause, [case_pattern(word)]))
    return groups


def state_word(state: str) -> str:
    """``CANCELLED by 1000`` (sacct) and ``CANCELLED+`` -> ``CANCELLED``."""
    word = state.split()[0] if state.split() else ""
    return word.rstrip("+")


def outcome(state: str) -> c.Outcome | None:
    """The outcome an ended Slurm state gives, or None when it says nothing conclusive."""
    return STATE_OUTCOMES.get(state_word(state))


def is_running(state: str) -> bool:
    return state_word(state) in RUNNING_STATES


def parse_scontrol_line(line: str) -> dict[str, str]:
    """``scontrol show job -o`` fields. Values without spaces, which is all we read."""
    out = {}
    for item in line.split():
        key, sep, value = item.partition("=")
        if sep:
            out[key] = value
    return out


def successor_id(sbatch_stdout: str) -> str | None:
    """``sbatch --parsable`` prints ``id[;cluster]`` as its last line; site plugins may say more before."""
    lines = [line for line in sbatch_stdout.splitlines() if line.strip()]
    last = lines[-1].strip().split(";")[0] if lines else ""
    return last if c.is_count(last) else None


# -- the resume judge's scheduler, on the node --------------------------------------------------------

# A job's own variables (job.sh exports them), never handed down to a job it queues.
_THIS_JOBS_VARIABLES = (c.ENV_JOB_DIR, c.ENV_JOB_ID, c.ENV_NODES, c.ENV_REQUEUE)


def _run(argv: Sequence[str], cwd: str | None = None, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    try:
        proc = subprocess.run(list(argv), capture_output=True, text=True, cwd=cwd, env=env)
    except OSError as exc:
        return 127, "", str(exc)
    return proc.returncode, proc.stdout, proc.stderr


def _sbatch(args: list[str], cwd: str | None = None, env: dict[str, str] | None = None) -> tuple[str | None, str]:
    """``sbatch ARGS``: the id of the job it queued (None when refused), and what it said, on one line."""
    rc, out, err = _run(["sbatch", *args], cwd=cwd, env=env)
    return (successor_id(out) if rc == 0 else None), " ".join((out + " " + err).split())


def _first_line(argv: Sequence[str]) -> str:
    """The first line a command printed, "" when it failed or printed nothing."""
    rc, out, _ = _run(argv)
    return out.splitlines()[0] if rc == 0 and out.strip() else ""


class NodeScheduler:
    """Slurm as the resume judge (``resume.Scheduler``) needs it."""

    submit_command = "sbatch"

    def outcome(self, job_id: str) -> c.Outcome | None:
        """What Slurm's word for a job says of its end: scontrol, then sacct where there is
        accounting; None when neither knows or the word is not conclusive."""
        # A heterogeneous job prints a line per component: the first is its leader's.
        state = parse_scontrol_line(_first_line(["scontrol", "show", "job", "-o", job_id])).get("JobState", "")
        if not state:
            state = state_word(_first_line(["sacct", "-X", "-n", "-P", "-j", job_id, "-o", "State"]))
        return outcome(state) if state else None

    def queue_successor(self, job_script: str, me: str) -> tuple[str | None, str]:
        """Queue ``job_script`` to run only if job ``me`` ends badly: (its id or None, what sbatch said)."""
        return _sbatch(["--parsable", f"--dependency=afternotok:{me}", "--kill-on-invalid-dep=yes", job_script, me])

    def queue_after(self, job_script: str, me: str) -> tuple[str | None, str]:
        """Queue ``job_script`` (a lane's next job) to start once job ``me`` has ended, however it
        ended: (its id or None, what sbatch said). It runs from its own directory, without this
        job's variables: the next job sets its own."""
        env = {k: v for k, v in os.environ.items() if k not in _THIS_JOBS_VARIABLES}
        return _sbatch(["--parsable", f"--dependency=afterany:{me}", job_script], os.path.dirname(job_script), env)

    def cancel(self, job_id: str) -> None:
        _run(["scancel", job_id])
