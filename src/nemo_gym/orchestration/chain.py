"""A resumable benchmark's chain (``contract.CHAIN_FILE``) as Python writes and reads it: the
records' lines, and a chain read back (``Chain``: its jobs, verdicts and attempts), bounded and
checked, since a job wrote it. The records' words are the contract's (the job scripts write them
too); what only Python writes and reads, a verdict's action, is here.

Stdlib only, and Python 3.8 syntax: staged with the resume judge (``shipping.Program.RESUME_JUDGE``)
and imported there by the node's ``python3``.
"""

from __future__ import annotations

from typing import NamedTuple

from nemo_gym.orchestration.contract import (
    RECORD_END,
    RECORD_FED,
    RECORD_NO_SUCCESSOR,
    RECORD_RESUBMIT,
    RECORD_START,
    RECORD_SUCCESSOR,
    RECORD_UNFED,
    RECORD_VERDICT,
    Outcome,
    Status,
    Word,
    read_count,
)

UNFED_SHOWN = 300  # characters of why a lane could not queue its next job, as status shows them
# Records whose first field is a job id (a verdict's too): checked before it is believed.
ID_FIRST_RECORDS = (RECORD_START, RECORD_NO_SUCCESSOR, RECORD_VERDICT, RECORD_FED, RECORD_RESUBMIT)


class Action(Word):
    """What the chain does after a verdict."""

    FREE = "free"  # resume, free of charge
    RETRY = "retry"  # resume, spending one of max_retries
    STOP = "stop"

    @property
    def resumes(self) -> bool:
        return self in (Action.FREE, Action.RETRY)


# The states an ``end`` record may give; any other word read back is ``unknown``.
CHAIN_END_STATES = (Status.SUCCEEDED, Status.FAILED, Status.CANCELLED, Status.TIMED_OUT)


class Verdict(NamedTuple):
    job_id: str
    outcome: Outcome
    elapsed: int
    rollouts: int
    action: Action
    why: str


class Chain:
    """What a chain file says, in the order its records were written: of the latest attempt (the
    records since the last ``resubmit``, or all of them), and which jobs the attempts before it had."""

    def __init__(self) -> None:
        self.opened_by: str | None = None  # the job gym eval resubmit queued to begin this attempt
        self.earlier: list[str] = []  # the earlier attempts' jobs, oldest first (the first job as the chain knows it)
        self.earlier_verdicts: list[Verdict] = []
        self.attempt = 1  # which attempt the records are of: 1 + the resubmits before them
        self.rows_before: dict[
            str, int
        ] = {}  # job id -> rollouts on disk when it started (or was resubmitted), any attempt
        self.started: list[str] = []  # in order; a Slurm requeue repeats an id
        self.start_times: dict[str, int] = {}  # job id -> epoch of its last start
        self.start_rollouts: dict[str, int] = {}  # job id -> rollouts on disk at its last start
        self.successors: dict[str, str] = {}  # job id -> the job queued to resume it
        self.no_successor: dict[str, str] = {}  # job id -> why none was queued
        self.verdicts: list[Verdict] = []
        self.end: tuple[Status, str] | None = None  # (state, why)
        self.fed_as: str | None = None  # a lane's job: the id the job before it queued it as
        self.unfed: str | None = None  # a lane's job the job before it could not queue: why
        self.cancelled = False  # whether its job directory holds gym eval cancel's marker (the probe says)

    @property
    def latest(self) -> str | None:
        return self.started[-1] if self.started else None

    def job_ids(self, with_successor: bool = True) -> list[str]:
        """Every job of the chain once, in order, and the one queued to resume the latest."""
        ids: list[str] = []
        for job_id in self.started:
            if job_id not in ids:
                ids.append(job_id)
        pending = self.successors.get(self.latest or "")
        if with_successor and pending and pending not in ids and self.end is None:
            ids.append(pending)
        return ids

    def head(self, first: str) -> str:
        """The job this attempt began with: the one resubmit queued, else the run's first
        (``first``; for a lane's job, which the submission did not queue, the one it was fed as)."""
        return self.opened_by or first or self.fed_as or ""

    def first(self, recorded: str | None) -> str:
        """The run's first job of the benchmark: the recorded one, else the one its lane fed."""
        return recorded or self.fed_as or ""

    def attempt_ids(self, first: str, with_successor: bool = True) -> list[str]:
        """Every job of every attempt once, oldest first: the run's first job (``first``), the
        earlier attempts' and this attempt's (its head, though it has not started yet)."""
        head = self.head(first)
        current = self.job_ids(with_successor)
        ids: list[str] = []
        for job_id in [first, *self.earlier, head, *current]:
            if job_id and job_id not in ids:
                ids.append(job_id)
        return ids

    def samples_added(self, ids: list[str], rollouts_now: int) -> dict[str, int | None]:
        """Per job (``ids``, oldest first: ``attempt_ids``'s), the rollouts it added: those on disk
        when the next one began (now, for the latest) less those when it began (0 for the first
        job of a run); None where the chain does not tell."""
        added: dict[str, int | None] = {}
        for i, job_id in enumerate(ids):
            before = 0 if i == 0 else self.rows_before.get(job_id)
            after = rollouts_now if i == len(ids) - 1 else self.rows_before.get(ids[i + 1])
            added[job_id] = None if before is None or after is None else max(after - before, 0)
        return added

    def verdict_on(self, job_id: str) -> Verdict | None:
        """The last verdict on a job, of whichever attempt it belongs to."""
        return next((v for v in reversed(self.earlier_verdicts + self.verdicts) if v.job_id == job_id), None)

    def begin_attempt(self, job_id: str) -> None:
        """A ``resubmit`` record: what was read so far belongs to the earlier attempts."""
        for earlier in [
            *([self.fed_as] if self.fed_as else []),
            *([self.opened_by] if self.opened_by else []),
            *self.job_ids(with_successor=False),
        ]:
            if earlier not in self.earlier:
                self.earlier.append(earlier)
        self.earlier_verdicts += self.verdicts
        self.opened_by = job_id
        self.attempt += 1
        self.started, self.start_times, self.start_rollouts = [], {}, {}
        self.successors, self.no_successor, self.verdicts, self.end = {}, {}, [], None

    def retries(self) -> int:
        return sum(1 for v in self.verdicts if v.action == Action.RETRY)

    def seconds_used(self) -> int:
        return sum(v.elapsed for v in self.verdicts)

    def summary(self) -> str:
        """``resumed 2 time(s), 1 of them retries; 130s used by earlier jobs`` for status."""
        resumes = [v for v in self.verdicts if v.action.resumes]
        if not resumes:
            return ""
        retries = sum(1 for v in resumes if v.action == Action.RETRY)
        return f"resumed {len(resumes)} time(s), {retries} of them retries; {self.seconds_used()}s used by earlier jobs"


def chain_record(kind: str, *fields: object) -> str:
    """One line of the chain file; tabs and line breaks in a field would break it: spaces."""
    cells = [kind] + [" ".join(str(f).split()) for f in fields]
    return "\t".join(cells) + "\n"


# A job id in a chain file is a scheduler's word (Slurm's 1234_5, a Kubernetes Job's name): a
# longer or stranger one is not ours, and is passed over rather than shown or handed to a command.
CHAIN_ID_MAX = 128


def chain_job_id(word: str) -> bool:
    return 0 < len(word) <= CHAIN_ID_MAX and word.isprintable() and not any(c.isspace() for c in word)


def parse_chain(text: str) -> Chain:
    chain = Chain()
    for line in text.splitlines():
        cols = line.split("\t")
        kind, rest = cols[0], cols[1:]
        if kind in ID_FIRST_RECORDS and rest and not chain_job_id(rest[0]):
            continue
        if kind == RECORD_SUCCESSOR and len(rest) >= 2 and not (chain_job_id(rest[0]) and chain_job_id(rest[1])):
            continue
        if kind == RECORD_START and rest:
            chain.started.append(rest[0])
            if len(rest) >= 3:
                chain.start_times[rest[0]] = read_count(rest[1])
                chain.start_rollouts[rest[0]] = read_count(rest[2])
                chain.rows_before.setdefault(rest[0], read_count(rest[2]))
        elif kind == RECORD_SUCCESSOR and len(rest) >= 2:
            chain.successors[rest[1]] = rest[0]
        elif kind == RECORD_NO_SUCCESSOR and len(rest) >= 2:
            chain.no_successor[rest[0]] = rest[1]
        elif kind == RECORD_VERDICT and len(rest) >= 6:
            chain.verdicts.append(_verdict(*rest[:6]))
        elif kind == RECORD_END and len(rest) >= 2:
            chain.end = (_end_state(rest[0]), rest[1])
        elif kind == RECORD_FED and rest and rest[0] and chain.fed_as is None:
            chain.fed_as = rest[0]
        elif kind == RECORD_UNFED and len(rest) >= 2 and chain.fed_as is None:
            chain.unfed = rest[1][:UNFED_SHOWN]  # the scheduler's words, from a file the job wrote: bounded
        elif kind == RECORD_RESUBMIT and rest and rest[0]:
            chain.begin_attempt(rest[0])
            if len(rest) >= 5:
                chain.rows_before[rest[0]] = read_count(rest[4])
    return chain


def _verdict(job_id: str, outcome: str, elapsed: str, rollouts: str, action: str, why: str) -> Verdict:
    """A verdict read back: a word this version does not know is no outcome it can tell (unknown)
    and no resume (stop), so that it spends nothing and counts as nothing."""
    return Verdict(
        job_id,
        Outcome.from_word(outcome) or Outcome.UNKNOWN,
        read_count(elapsed),
        read_count(rollouts),
        Action.from_word(action) or Action.STOP,
        why,
    )


def _end_state(word: str) -> Status:
    state = Status.from_word(word)
    return state if state in CHAIN_END_STATES else Status.UNKNOWN
