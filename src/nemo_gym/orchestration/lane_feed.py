"""A job of a lane (``feeding``) queues the next job of its lane as it starts, to start once this
one has ended, so that a lane never holds more than two of its jobs at once.

The job's ``contract.LANE_NEXT_FILE`` names the next job's directory (first line) and where this
program's tree was staged for the submission (second line; the job script reads only that). The
next is queued once: not again when Slurm requeues this job or a resumable job's successor starts
(the next's chain says it was fed, or why not). A next that ``gym eval cancel`` marked is passed
over for the one after it. What happened is written to the next's chain (``RECORD_FED`` with its
id, or ``RECORD_UNFED`` with what the scheduler said), which status reads; only this program
writes those records: ``gym eval resubmit`` queuing a lane's stalled job runs it on the submit host
too (``--fed-by-resubmit``, inline with the host's ``python3``) to record that job fed.

Stdlib only, Python 3.8 syntax: it runs on the node with its ``python3``, shipped for the
submission (``shipping.Program.LANE_FEEDER``) with the backend's node module it queues through.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from typing import NamedTuple

from nemo_gym.orchestration import chain as ch
from nemo_gym.orchestration import contract as c
from nemo_gym.orchestration.resume import JobDirectory, load_scheduler

# A lane of cancelled jobs is passed over one pointer at a time: a loop of pointers (never written
# by a submission, but read from files) ends here rather than spinning.
MAX_HOPS = 10000
TRIES = 3
RETRY_SECONDS = 10
POINTER_BYTES = 8192  # a pointer file holds two paths
CHAIN_BYTES = 1024 * 1024  # the chain of a job not started yet: a few records


class Choice(NamedTuple):
    """The job to queue (None: none), the cancelled ones passed over, and why none when none."""

    next_dir: str | None
    passed_over: list[str]
    why_none: str


def _read(path: str, max_bytes: int) -> str | None:
    try:
        with open(path, "rb") as fh:
            return fh.read(max_bytes).decode("utf-8", "replace")
    except OSError:
        return None


def pointed_to(job_dir: str) -> str:
    """The next job's directory a job's pointer names: "" without one."""
    text = _read(os.path.join(job_dir, c.LANE_NEXT_FILE), POINTER_BYTES) or ""
    first = text.split("\n", 1)[0].strip()
    return first if os.path.isabs(first) else ""


def already_told(next_dir: str) -> bool:
    """Whether a job of the lane already queued ``next_dir`` or said why it could not."""
    chain = ch.parse_chain(_read(os.path.join(next_dir, c.CHAIN_FILE), CHAIN_BYTES) or "")
    return chain.fed_as is not None or chain.unfed is not None


def choose_next(job_dir: str) -> Choice:
    """The job this one queues: the next of its lane not cancelled, never one already fed."""
    passed: list[str] = []
    next_dir = pointed_to(job_dir)
    while next_dir and os.path.exists(os.path.join(next_dir, c.CHAIN_CANCELLED_FILE)):
        if len(passed) >= MAX_HOPS:
            return Choice(None, passed, f"more than {MAX_HOPS} cancelled jobs in a row")
        passed.append(next_dir)
        next_dir = pointed_to(next_dir)
    if not next_dir:
        return Choice(None, passed, "this job is the last of its lane")
    if not os.path.isfile(os.path.join(next_dir, c.JOB_SCRIPT)):
        return Choice(None, passed, f"{next_dir} holds no job script")
    if already_told(next_dir):
        return Choice(None, passed, f"{next_dir} was queued already (or its lane said why not)")
    return Choice(next_dir, passed, "")


def feed(
    job_dir: str,
    me: str,
    queue: Callable[[str, str], tuple[str | None, str]],
    say: Callable[[str], None],
    sleep: Callable[[float], None] = time.sleep,
    now: Callable[[], float] = time.time,
) -> str | None:
    """Queue the next job of this job's lane after ``me``; its id, or None. ``queue(job_script,
    me)`` is the scheduler's (id or None, what it said on one line)."""
    choice = choose_next(job_dir)
    for skipped in choice.passed_over:
        say(f"the next job of this lane ({skipped}) was cancelled: passing it over")
    if choice.next_dir is None:
        return None
    said = ""
    for attempt in range(1, TRIES + 1):
        found, said = queue(os.path.join(choice.next_dir, c.JOB_SCRIPT), me)
        if found is not None:
            record_fed(choice.next_dir, found, me, now)
            say(f"queued job {found}, the next of this job's lane ({choice.next_dir})")
            return found
        if attempt < TRIES:
            sleep(RETRY_SECONDS)
    JobDirectory(choice.next_dir).append(c.RECORD_UNFED, me, said)
    say(f"WARNING: could not queue the next job of this lane ({choice.next_dir}): {said}")
    return None


def record_fed(job_dir: str, job_id: str, by: str, now: Callable[[], float] = time.time) -> None:
    """The one writer of a lane job's ``RECORD_FED``: queued as ``job_id`` by ``by`` (the job of its
    lane before it, or ``contract.FED_BY_RESUBMIT``), at ``now``'s second."""
    JobDirectory(job_dir).append(c.RECORD_FED, job_id, by, int(now()))


def _say(message: str) -> None:
    print(f"[gym {time.strftime('%H:%M:%S', time.gmtime())}] lane: {message}", flush=True)


def main(argv: list[str] | None = None) -> int:
    """``lane_feed.py --scheduler MODULE`` (a lane's job, as it starts): the job directory and this
    job's id come from GYM_JOB_DIR and GYM_JOB_ID; exit 0 whether or not a job was queued (status
    says which). ``lane_feed.py --fed-by-resubmit JOB_DIR JOB_ID`` (the resubmit script, a stalled
    job queued held): exit 0 once recorded, 1 when the chain cannot be written (the job is then
    cancelled unrun)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) == 2 and args[0] == "--scheduler":
        scheduler = load_scheduler(args[1])
        feed(os.environ[c.ENV_JOB_DIR], os.environ[c.ENV_JOB_ID], scheduler.queue_after, _say)
        return 0
    if len(args) == 3 and args[0] == "--fed-by-resubmit":
        try:
            record_fed(args[1], args[2], c.FED_BY_RESUBMIT)
        except OSError as exc:
            print(f"cannot write {os.path.join(args[1], c.CHAIN_FILE)}: {exc}", file=sys.stderr)
            return 1
        return 0
    print(f"usage: {sys.argv[0]} --scheduler MODULE | --fed-by-resubmit JOB_DIR JOB_ID", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
