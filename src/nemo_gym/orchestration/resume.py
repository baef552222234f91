"""The resume judge of a resumable benchmark: run on the node by each job of the chain.

A resumable benchmark runs as a chain of Slurm jobs over one job directory. Each job, before any
work, runs ``resume.py begin``: it judges the job before it (or its own earlier attempt, after a
Slurm requeue) from what Slurm and that job's files say, records the verdict in the chain file,
and either stops or goes on and queues its own successor (``afternotok``: it runs only if this
job ends badly). A job that fails in a way a rerun would repeat runs ``resume.py finish`` to end
the chain at once.

The rules (the table of docs/jobs.md, Resumable runs):

* cut short (walltime, preemption, a Slurm requeue) after writing new rollouts -> resume, free;
* the same without new rollouts, a node failure, out of memory, a service dying mid-run, a
  driver killed by a signal, a kill nobody explains -> resume, spending one of ``max_retries``;
* a service that never started, the driver failing -> stop (a rerun would fail the same way);
* cancelled or succeeded -> stop;
* a driver that exited 0 leaving samples missing (the job ends failed, cause ``cut-short``: its
  job checks with ``resume.py missing`` before it says it succeeded) -> resume, spending a retry.

The chain also stops when its jobs have run ``max_walltime`` together, and at ``CHAIN_LIMIT`` jobs.

The scheduler is behind ``Scheduler``, a small protocol: what its word for a job says of how the
job ended, queueing a successor, cancelling one. The backend that runs the chain implements it in
a module of its own, shipped with this one and named by ``--scheduler`` (Slurm's:
``backends/slurm_node.py``).

Stdlib only, Python 3.8 syntax: shipped into the job with the contract, the facts and the
scheduler's module (``shipping.Program.RESUME_JUDGE``), and run with the node's ``python3``. The
decisions are pure functions (``outcome_of``, ``resume_action``, ``judge``, ``opening``); ``main``
does the I/O.
"""

from __future__ import annotations

import os
import sys
import time
from importlib import import_module
from typing import TYPE_CHECKING, NamedTuple

from nemo_gym.orchestration import chain as ch
from nemo_gym.orchestration import contract as c
from nemo_gym.orchestration import facts as f

EXIT_GO = 0
EXIT_STOP = 10  # the chain stops here: the job must not run


class Caps(NamedTuple):
    max_retries: int
    max_walltime: str  # as written in the config ("" for none), for messages
    max_walltime_seconds: int  # 0 for none
    chain_limit: int = c.CHAIN_LIMIT


class Judgement(NamedTuple):
    verdict: ch.Verdict
    end: tuple[c.Status, str] | None  # (end state, why) when the chain stops


# -- decisions -------------------------------------------------------------------------------------


def outcome_of(
    phase: c.Phase | None, cancelled: bool, scheduler_outcome: c.Outcome | None, cause: c.Cause | None
) -> c.Outcome:
    """How a job ended: its own success first, then a cancel marker, then what the scheduler's
    word says, then the cause the job recorded itself; ``unknown`` when nothing tells."""
    if phase == c.Phase.SUCCEEDED:
        return c.Outcome.SUCCEEDED
    if cancelled:
        return c.Outcome.CANCELLED
    if scheduler_outcome is not None:
        return scheduler_outcome
    return c.Outcome.of(cause) if cause is not None else c.Outcome.UNKNOWN


def resume_action(outcome: c.Outcome, progress: int) -> ch.Action:
    """free (resume), retry (resume, spending a retry) or stop."""
    if outcome.stops_the_chain:
        return ch.Action.STOP
    if outcome.cut_short:
        return ch.Action.FREE if progress > 0 else ch.Action.RETRY
    return ch.Action.RETRY


def judge(chain: ch.Chain, job_id: str, outcome: c.Outcome, elapsed: int, rollouts_now: int, caps: Caps) -> Judgement:
    """The verdict on job ``job_id`` and, when the chain must stop, its end record."""
    progress = rollouts_now - chain.start_rollouts.get(job_id, 0)
    action = resume_action(outcome, progress)
    why = f"{outcome.text} after {elapsed}s, {progress} new rollout(s)"
    verdict = ch.Verdict(job_id, outcome, elapsed, rollouts_now, action, why)
    return Judgement(verdict, _end_after(chain, verdict, caps))


def _end_after(chain: ch.Chain, verdict: ch.Verdict, caps: Caps) -> tuple[c.Status, str] | None:
    job = verdict.job_id
    if verdict.action == ch.Action.STOP:
        if verdict.outcome == c.Outcome.SUCCEEDED:
            return c.Status.SUCCEEDED, f"job {job} finished"
        if verdict.outcome == c.Outcome.CANCELLED:
            return c.Status.CANCELLED, f"job {job} was cancelled"
        text = verdict.outcome.text
        return c.Status.FAILED, f"not resumed: {text} in job {job}, and a rerun would fail the same way"
    retries = chain.retries() + (1 if verdict.action == ch.Action.RETRY else 0)
    if retries > caps.max_retries:
        return c.Status.FAILED, (
            f"gave up: {retries} resumes without progress or after failures (max_retries {caps.max_retries}); "
            f"last: {verdict.why}"
        )
    spent = chain.seconds_used() + verdict.elapsed
    if caps.max_walltime_seconds > 0 and spent >= caps.max_walltime_seconds:
        return c.Status.TIMED_OUT, f"max_walltime {caps.max_walltime} reached: the chain's jobs ran {spent}s together"
    if len(chain.started) >= caps.chain_limit:
        return c.Status.FAILED, f"gave up: the chain reached {caps.chain_limit} jobs"
    return None


class Opening(NamedTuple):
    """What a starting job does before any work: stop (why, and whether that ends the chain),
    judge a job, or just start."""

    kind: str  # "stop" | "end" | "judge" | "start"
    why: str = ""
    judged: str = ""  # the job to judge
    outcome: c.Outcome | None = None  # its outcome when known already (a requeue)
    state_dir: str = ""  # its state directory, relative to the job directory


def opening(chain: ch.Chain, me: str, prev: str, requeued: int, cancelled: bool) -> Opening:
    """``me`` starts, queued to resume ``prev`` (empty for the first job), or requeued by Slurm
    for the ``requeued``-th time (0: not requeued)."""
    if chain.end is not None:
        return Opening("stop", "the chain has ended already; nothing to do")
    if cancelled:
        return Opening("end", "cancelled by the user (gym eval cancel)")
    if requeued > 0 and chain.latest != me:
        # Requeued after the chain moved on (an admin's requeue of a job already resumed): the
        # chain's current job owns the directory.
        return Opening(
            "stop", f"job {me} was requeued, but job {chain.latest} has resumed it already; not running twice"
        )
    if requeued > 0:
        return Opening(
            "judge",
            judged=me,
            outcome=c.Outcome.REQUEUED,
            state_dir=f"{c.state_dir(me)}{c.REQUEUED_RUN_SUFFIX}{requeued}",
        )
    if prev:
        if chain.successors.get(prev) != me:
            return Opening("stop", f"job {me} is not the recorded successor of job {prev}; not running twice")
        return Opening("judge", judged=prev, state_dir=c.state_dir(prev))
    return Opening("start")


# -- the job directory and the scheduler, as the judge sees them ------------------------------------


class JobDirectory:
    def __init__(self, path: str) -> None:
        self.path = path

    def file(self, rel: str) -> str:
        return os.path.join(self.path, rel)

    def read(self, rel: str) -> str | None:
        try:
            with open(self.file(rel)) as fh:
                return fh.read()
        except OSError:
            return None

    def exists(self, rel: str) -> bool:
        return os.path.exists(self.file(rel))

    def chain(self) -> ch.Chain:
        return ch.parse_chain(self.read(c.CHAIN_FILE) or "")

    def append(self, kind: str, *fields: object) -> None:
        os.makedirs(self.file(c.MARKERS_DIR), exist_ok=True)
        with open(self.file(c.CHAIN_FILE), "a") as fh:
            fh.write(ch.chain_record(kind, *fields))

    def rollouts(self) -> int:
        try:
            with open(self.file(c.ROLLOUTS_FILE), "rb") as fh:
                return sum(1 for _ in fh)
        except OSError:
            return 0

    def cancelled(self, job_id: str) -> bool:
        return self.exists(c.CHAIN_CANCELLED_FILE) or self.exists(f"{c.state_dir(job_id)}/{c.CANCELLED_FILE}")

    def phase(self, state_dir: str) -> c.Phase | None:
        return c.StateFile.parse(self.read(f"{state_dir}/{c.STATE_FILE}") or "").phase

    def cause(self, state_dir: str) -> c.Cause | None:
        """The cause the job recorded; None without one, or for a word this version does not know."""
        return c.Cause.from_word((self.read(f"{state_dir}/{c.CAUSE_FILE}") or "").strip())

    def last_sign_of_life(self, state_dir: str) -> int | None:
        stamps = []
        for name in (c.HEARTBEAT_FILE, c.STATE_FILE):
            try:
                stamps.append(int(os.path.getmtime(self.file(f"{state_dir}/{name}"))))
            except OSError:
                continue
        return max(stamps) if stamps else None


if TYPE_CHECKING:  # the judge may meet a node's python3 older than typing.Protocol (3.8)
    from typing import Protocol
else:
    Protocol = object


class Scheduler(Protocol):
    """What the judge asks of the scheduler that runs the chain (a backend's node module)."""

    submit_command: str  # its word for queueing a job, for messages

    def outcome(self, job_id: str) -> c.Outcome | None:
        """The ``contract.Outcome`` its word for the job gives; None when it does not know the
        job or its word says nothing conclusive."""

    def queue_successor(self, job_script: str, me: str) -> tuple[str | None, str]:
        """Queue ``job_script`` to run (with ``me`` as its argument) only if job ``me`` ends badly:
        the new job's id, or None when refused; and what the scheduler said, on one line."""

    def cancel(self, job_id: str) -> None: ...

    def queue_after(self, job_script: str, me: str) -> tuple[str | None, str]:
        """Queue ``job_script`` to start once job ``me`` has ended, however it ended (a lane's
        next job, ``lane_feed``): as ``queue_successor``."""


def load_scheduler(module: str) -> Scheduler:
    """The ``NodeScheduler`` of a backend's node module (``backends/<module>.py``, shipped with this one)."""
    found = import_module(f"nemo_gym.orchestration.backends.{module}")
    return found.NodeScheduler()


# -- the two commands --------------------------------------------------------------------------------


def announce(message: str) -> None:
    print(f"[gym {time.strftime('%H:%M:%S', time.gmtime())}] resume: {message}", flush=True)


class Judge:
    def __init__(self, job: JobDirectory, scheduler: Scheduler, me: str, caps: Caps, now: int | None = None) -> None:
        self.job = job
        self.scheduler = scheduler
        self.me = me
        self.caps = caps
        self.now = int(time.time()) if now is None else now

    def begin(self, prev: str, requeued: int) -> int:
        chain = self.job.chain()
        step = opening(chain, self.me, prev, requeued, self.job.exists(c.CHAIN_CANCELLED_FILE))
        if step.kind == "stop":
            announce(step.why)
            return EXIT_STOP
        if step.kind == "end":
            self._end(c.Status.CANCELLED, step.why)
            return EXIT_STOP
        if step.kind == "judge":
            outcome = step.outcome or self._outcome(step.judged, step.state_dir)
            ruling = judge(
                chain,
                step.judged,
                outcome,
                self._elapsed(chain, step.judged, step.state_dir),
                self.job.rollouts(),
                self.caps,
            )
            self.job.append(c.RECORD_VERDICT, *ruling.verdict)
            announce(f"job {step.judged}: {ruling.verdict.why} -> {ruling.verdict.action}")
            if ruling.end is not None:
                self._end(*ruling.end)
                return EXIT_STOP
        self.job.append(c.RECORD_START, self.me, self.now, self.job.rollouts())
        self._queue_successor()
        return EXIT_GO

    def finish(self, cause: c.Cause | None, detail: str) -> int:
        """This job failed in a way a rerun would repeat: end the chain now, so that the successor
        does not wait in the queue (and then take an allocation) only to stop."""
        if cause is None or not cause.repeats_on_rerun:
            return EXIT_GO
        chain = self.job.chain()
        started = chain.start_times.get(self.me, self.now)
        self.job.append(
            c.RECORD_VERDICT, self.me, cause, self.now - started, self.job.rollouts(), ch.Action.STOP, cause.text
        )
        self._end(c.Status.FAILED, f"{detail}; not resumed: a rerun would fail the same way")
        return EXIT_STOP

    def _outcome(self, job_id: str, state_dir: str) -> c.Outcome:
        return outcome_of(
            self.job.phase(state_dir),
            self.job.cancelled(job_id),
            self.scheduler.outcome(job_id),
            self.job.cause(state_dir),
        )

    def _elapsed(self, chain: ch.Chain, job_id: str, state_dir: str) -> int:
        """From the job's start record to the last sign of life it left (works without accounting)."""
        started = chain.start_times.get(job_id)
        last = self.job.last_sign_of_life(state_dir)
        if started is None or last is None or last < started:
            return 0
        return last - started

    def _end(self, state: c.Status, why: str) -> None:
        """Stop the chain: record why, and take back a successor queued already (a requeued job has one)."""
        self.job.append(c.RECORD_END, state, why)
        announce(f"the chain ends ({state}): {why}")
        pending = self.job.chain().successors.get(self.me)
        if pending:
            self.scheduler.cancel(pending)

    def _queue_successor(self) -> None:
        if self.job.chain().successors.get(self.me):
            return  # a requeued job keeps the successor it queued the first time
        found, output = self.scheduler.queue_successor(self.job.file(c.JOB_SCRIPT), self.me)
        if found:
            self.job.append(c.RECORD_SUCCESSOR, found, self.me)
            announce(f"job {found} is queued to resume this one if it is cut short")
        else:
            self.job.append(
                c.RECORD_NO_SUCCESSOR, self.me, f"{self.scheduler.submit_command} refused the resume job: {output}"
            )
            announce(f"WARNING: could not queue the resume job, this job will not be resumed: {output}")


class Arguments(NamedTuple):
    caps: Caps
    scheduler: str  # the backend's node module (``load_scheduler``)
    rest: list[str]


def _arguments(args: list[str]) -> Arguments:
    """``--max-retries N --max-walltime T --max-walltime-seconds S --chain-limit L --scheduler M``
    anywhere, and the rest in order."""
    values = {
        "--max-retries": "3",
        "--max-walltime": "",
        "--max-walltime-seconds": "0",
        "--chain-limit": str(c.CHAIN_LIMIT),
        "--scheduler": "",
    }
    rest = []
    i = 0
    while i < len(args):
        if args[i] in values and i + 1 < len(args):
            values[args[i]] = args[i + 1]
            i += 2
        else:
            rest.append(args[i])
            i += 1
    caps = Caps(
        int(values["--max-retries"]),
        values["--max-walltime"],
        int(values["--max-walltime-seconds"]),
        int(values["--chain-limit"]),
    )
    return Arguments(caps, values["--scheduler"], rest)


EXIT_MISSING = 3  # resume.py missing: some expected samples are not written (1 is Python's own crash)


def missing_samples(job_dir: str) -> tuple[int, int]:
    """(missing, expected) of a job directory's samples; (0, 0) when the expected list is unknown:
    then nothing can be said to be missing."""
    check, _ = f.job_completeness(job_dir)
    if not check.known:
        return 0, 0
    return len(check.missing), check.expected or 0


def main(argv: list[str] | None = None) -> int:
    """``resume.py begin [CAPS] PREV REQUEUED``, ``resume.py finish [CAPS] CAUSE DETAIL``, or
    ``resume.py missing`` (prints ``N of M`` and exits 3 when samples are missing); the job
    directory and this job's id come from GYM_JOB_DIR and GYM_JOB_ID."""
    args = list(sys.argv[1:] if argv is None else argv)
    command = args.pop(0) if args else ""
    if command == "missing":
        try:
            missing, expected = missing_samples(os.environ[c.ENV_JOB_DIR])
        except Exception as exc:  # noqa: BLE001 - any failure to count is "cannot tell", never "missing"
            print(f"cannot count the samples: {exc}", file=sys.stderr)
            return 2
        if missing:
            print(f"{missing} of {expected}")
            return EXIT_MISSING
        return 0
    caps, scheduler, rest = _arguments(args)
    if command not in ("begin", "finish") or len(rest) != 2 or not scheduler:
        print(f"usage: {sys.argv[0]} begin|finish --scheduler MODULE [caps] ARG ARG", file=sys.stderr)
        return 2
    judge_ = Judge(JobDirectory(os.environ[c.ENV_JOB_DIR]), load_scheduler(scheduler), os.environ[c.ENV_JOB_ID], caps)
    if command == "begin":
        return judge_.begin(rest[0], c.read_count(rest[1]))
    return judge_.finish(c.Cause.from_word(rest[0]), rest[1])


if __name__ == "__main__":
    sys.exit(main())
