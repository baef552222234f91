"""What status tells of a job: its state, its samples' check, its attempts (the types every reader builds)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from nemo_gym.orchestration.contract import Cause, Status
from nemo_gym.orchestration.feeding import Turn
from nemo_gym.orchestration.usage import NO_USAGE, Usage

# The probe's name for the exit status of a job's own job-end event, beside its state file's keys.
JOB_END_KEY = "job_end"
# Its name for a cancel marker of the job's (or its chain's), beside them.
CANCELLED_BY_USER_KEY = "cancelled_by_user"
# Its name for the cause the job recorded (``contract.CAUSE_FILE``), beside them.
CAUSE_KEY = "cause"
# How many missing (task, rollout) pairs status names; results names them all.
MISSING_NAMED = 5


@dataclass(frozen=True)
class SampleCheck:
    """The cluster-side count of a benchmark's samples against the ones gym meant to write, made
    once its latest job has ended (a scan of the two files with awk; ``results`` parses them)."""

    expected: int
    written: int  # distinct (task, rollout) pairs, each counted once
    duplicates: int  # rows repeating a pair already written
    extra: int  # written pairs not in the expected list
    missing: int
    first_missing: tuple[tuple[int, int], ...]  # up to MISSING_NAMED, in the expected list's order
    unreadable: int = 0  # non-blank written lines without a pair (oversized ones included)

    @property
    def done(self) -> int:
        return self.written - self.extra


@dataclass(frozen=True)
class Attempt:
    """One job of a benchmark (a resumable chain has several, a resubmitted benchmark too): its
    state as the probe found it, or as the chain's verdict on it says when it was not probed."""

    job_id: str
    state: Status
    cause: Cause | None  # what it recorded, else what the chain's verdict tells of it
    detail: str
    started: float | None = None  # epoch seconds, from its own records
    ended: float | None = None
    gpu_hours: float | None = None
    verdict: str = ""  # the chain's verdict on it (why, and what the chain did), once judged
    samples_added: int | None = None  # rollouts it added to those on disk; None when not told

    def as_dict(self) -> dict:
        """``attempt_history``'s entry of ``status --json``: fields only ever added."""
        return {"job_id": self.job_id, "state": self.state, "cause": self.cause, "samples_added": self.samples_added}


@dataclass
class JobStatus:
    benchmark: str
    job_id: str | None
    state: Status
    detail: str
    rollouts: int
    job_dir: str
    # Every job of a resumable benchmark's chain, oldest first (just job_id otherwise).
    chain: list[str] = field(default_factory=list)
    usage: Usage = NO_USAGE
    check: SampleCheck | None = None  # None until the latest job has ended (or without gym's list)
    # Exporter -> its receipt (state running|done|failed, detail, backend_run_id), as the job wrote it.
    exports: dict[str, dict] = field(default_factory=dict)
    # Its jobs, oldest first (``chain``'s, each with what is known of it).
    history: list[Attempt] = field(default_factory=list)
    resubmits: int = 0  # how many times gym eval resubmit queued it again
    shards: list[JobStatus] = field(default_factory=list)  # a sharded benchmark's, each as a job
    # Whether its scheduler still holds its current job (queued, running or being ended), whatever
    # the job's own word: until it lets go the job counts against the user's limits.
    held: bool = False
    # A lane's job not queued yet: where it stands (``feeding.turns``), and where its lane stalled.
    turn: Turn | None = None
    stalled_at: str = ""

    def as_dict(self) -> dict:
        out = asdict(self)
        for not_plain in ("usage", "check", "history", "shards"):
            out.pop(not_plain)
        if self.shards:
            out["shards"] = [shard.as_dict() for shard in self.shards]
        check = self.check
        out.update(
            # A sharded benchmark's: its most tried shard's (its history is every shard's).
            attempts=max((len(s.history) for s in self.shards), default=0) if self.shards else len(self.history),
            attempt_history=[attempt.as_dict() for attempt in self.history],
            complete=None if check is None else check.missing == 0,
            expected_samples=None if check is None else check.expected,
            samples=None if check is None else check.done,
            missing_samples=None if check is None else check.missing,
            duplicates=None if check is None else check.duplicates,
            gpus=self.usage.gpus,
            gpu_hours=rounded(self.usage.gpu_hours, 4),
            wall_seconds=rounded(self.usage.wall_seconds, 1),
            usage_source=self.usage.source,
            usage_approximate=self.usage.approximate,
        )
        return out


def rounded(value: float | None, digits: int) -> float | None:
    return None if value is None else round(value, digits)


def missing_text(check: SampleCheck) -> str:
    """``3 of 12 samples are missing (task 4 rollout 0, ...)``."""
    shown = check.first_missing[:MISSING_NAMED]  # a check made for info names more
    named = ", ".join(f"task {t} rollout {r}" for t, r in shown)
    more = ", ..." if check.missing > len(shown) else ""
    return f"{check.missing} of {check.expected} samples are missing ({named}{more})"
