"""What a run's jobs are doing, told truthfully: the job's own state file, combined with what the
scheduler says, in one round trip.

The job scripts write ``<job dir>/.gym/<job id>/state`` (phase, detail) as they go, so the state
is known even where the scheduler has no accounting or has forgotten the job. When neither source
can tell, the state is ``unknown`` with the reason. What the scheduler says, and how it combines
with the job's own word, is the backend's; following a resumable benchmark's chain is shared.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace

from nemo_gym.orchestration import contract, facts, usage
from nemo_gym.orchestration.backends import Backend, backend_named
from nemo_gym.orchestration.backends.base import CANCELLED_BY_USER, JobProbe, JobState
from nemo_gym.orchestration.connection import Connection
from nemo_gym.orchestration.contract import Cause, Chain, Outcome, ProbeRecord, StateFile, Status, parse_chain
from nemo_gym.orchestration.facts import ROLLOUT_INDEX_KEY, TASK_INDEX_KEY, ReceiptState
from nemo_gym.orchestration.record import BenchmarkJob, SubmissionRecord
from nemo_gym.orchestration.render import backend_context, render_template
from nemo_gym.orchestration.usage import NO_USAGE, AccountingRow, OwnRecord, Usage

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
            gpu_hours=_rounded(self.usage.gpu_hours, 4),
            wall_seconds=_rounded(self.usage.wall_seconds, 1),
            usage_source=self.usage.source,
            usage_approximate=self.usage.approximate,
        )
        return out


def _rounded(value: float | None, digits: int) -> float | None:
    return None if value is None else round(value, digits)


# -- the probe -----------------------------------------------------------------------------------

# Bytes at each end of a line where the sample scan looks for the indices.
SCAN_WINDOW = 4096


def _scan_constants(missing_named: int = MISSING_NAMED) -> dict[str, object]:
    """What the sample scan (templates/probe-samples.sh.j2) is given besides the contract."""
    return {
        "missing_named": missing_named,
        "max_row": facts.MAX_ROW_BYTES,
        "window": SCAN_WINDOW,
        "task_key": TASK_INDEX_KEY,
        "rollout_key": ROLLOUT_INDEX_KEY,
    }


def check_samples_shell() -> str:
    """The probe's ``gym_check_samples B DIR`` function."""
    return render_template("probe-samples.sh.j2", **_scan_constants())


def missing_inputs_shell() -> str:
    """``gym_check_samples`` and ``gym_missing_inputs DIR OUT`` (templates/probe-samples.sh.j2),
    which reads a row as the scan does: it writes to the file OUT the lines of DIR's materialized
    inputs whose (task, rollout) pair is expected but not written (each verbatim, in the file's
    order, each pair's first line only; all of them when there is no rollouts file) and prints
    their number. It returns 1, printing nothing and leaving OUT untouched, when the expected list
    is missing or untrusted (a bad line, as ``facts.expected_pairs`` says). The probe does not
    carry it."""
    return render_template("probe-samples.sh.j2", **_scan_constants(), missing_inputs=True)


def probe_script(record: SubmissionRecord, backend: Backend, checked: frozenset[str] = frozenset()) -> str:
    """Per benchmark: its rollouts and resume chain, per job of the chain (the last few) the job's
    own state file and what the scheduler says of it, the times its jobs ran, and once its latest
    job has ended, its samples against the expected ones (unless ``checked`` names it: the count
    of an ended job does not change, so ``--watch`` makes it once). It calls ``probe_functions``'
    functions, which ``runs_probe_script`` puts before it."""
    probed = [
        {
            "benchmark": job.benchmark,
            "job_dir": job.job_dir,
            "job_id": job.job_id or "",  # a lane's job: its chain file names the job it was fed as
            "check": 0 if job.benchmark in checked else 1,
        }
        for job in record.units
        if job.queued
    ]
    merged = [
        {"benchmark": bench.benchmark, "job_dir": bench.job_dir, "check": 0 if bench.benchmark in checked else 1}
        for bench in record.benchmarks
        if bench.shards and bench.queued
    ]
    return render_template(
        "probe.sh.j2",
        accounting=backend.accounting_shell(),
        tail=backend.probe_tail(record),
        probed=probed,
        merged=merged,
        shared_dir=record.shared_deployment_dir,
    )


def probe_functions(backend: Backend, missing_named: int = MISSING_NAMED) -> str:
    """The functions a run's probe calls (``templates/probe-functions.sh.j2``), with its backend's
    ``describe_job``; a check names the first ``missing_named`` missing pairs."""
    return render_template(
        "probe-functions.sh.j2",
        **backend_context(backend),
        job_end_key=JOB_END_KEY,
        cancelled_key=CANCELLED_BY_USER_KEY,
        cause_key=CAUSE_KEY,
        **_scan_constants(missing_named),
    )


@dataclass
class ProbeAnswer:
    benchmarks: dict[str, tuple[int, Chain]] = field(default_factory=dict)  # name -> (rollouts, chain)
    jobs: dict[tuple[str, str], JobProbe] = field(default_factory=dict)  # (benchmark, job id) -> probe
    facts: dict[str, str] = field(default_factory=dict)  # run-wide, from the backend's probe tail
    checks: dict[str, SampleCheck] = field(default_factory=dict)  # benchmark -> its samples, once ended
    own_records: dict[str, list[OwnRecord]] = field(default_factory=dict)  # benchmark ('' shared) -> runs
    accounting: dict[str, list[AccountingRow]] = field(default_factory=dict)  # job id -> its runs
    now: float | None = None  # the cluster's clock when it was probed
    exports: dict[str, dict[str, dict]] = field(default_factory=dict)  # benchmark -> exporter -> receipt
    # Sharded benchmark -> the rollouts its shards were merged into (None: never merged).
    merged: dict[str, int | None] = field(default_factory=dict)


def parse_probe(out: str, backend: Backend) -> ProbeAnswer:
    """What the status probe printed, record by record (``contract.ProbeRecord``): untrusted text
    from the cluster, so a record that does not parse is skipped, never fatal."""
    reading = _ProbeReading(backend)
    sep = contract.FIELD_SEPARATOR
    for line in out.splitlines():
        if not line.startswith(contract.PROBE_MARKER) or sep not in line:
            continue
        word, *cols = line[len(contract.PROBE_MARKER) :].split(sep)
        kind = ProbeRecord.from_word(word)
        if kind is not None:
            _RECORD_READERS[kind](reading, cols)
    return reading.finished()


@dataclass
class _ProbeReading:
    """A probe's answer as its records arrive; the events and mtimes are joined at the end."""

    backend: Backend
    answer: ProbeAnswer = field(default_factory=ProbeAnswer)
    events: list[list[str]] = field(default_factory=list)
    mtimes: dict[tuple[str, str], list[float]] = field(default_factory=dict)  # (benchmark, state dir) -> times

    def finished(self) -> ProbeAnswer:
        for bench, state_dir, start, end, last in self.events:
            times = self.mtimes.get((bench, state_dir), [])
            record = usage.own_record(state_dir, start, end, last, times, contract.ATTEMPT_SUFFIX)
            self.answer.own_records.setdefault(bench, []).append(record)
        return self.answer


def _read_benchmark(reading: _ProbeReading, cols: list[str]) -> None:
    bench, n, chain, cancelled = (cols + ["", "", "", ""])[:4]
    try:
        text = base64.b64decode(chain).decode(errors="replace")
    except ValueError:
        text = ""
    parsed = parse_chain(text)
    parsed.cancelled = cancelled == "1"
    reading.answer.benchmarks[bench] = (contract.read_count(n), parsed)


def _read_job(reading: _ProbeReading, cols: list[str]) -> None:
    bench, job_id, st = (cols + ["", "", ""])[:3]
    described = cols[3:]  # the scheduler's answer, as its backend's gym_describe_job set it
    # The job's state file, and what the probe adds to it as keys of its own.
    fields = contract.parse_state(st.replace("\t", "\n"))
    by_user = fields.get(CANCELLED_BY_USER_KEY) == "1"
    job_end = fields.get(JOB_END_KEY)
    scheduler = reading.backend.describe(described)
    cause = Cause.from_word(fields.get(CAUSE_KEY))
    reading.answer.jobs[(bench, job_id)] = JobProbe(StateFile.from_fields(fields), scheduler, by_user, job_end, cause)


def _read_fact(reading: _ProbeReading, cols: list[str]) -> None:
    if len(cols) >= 2:
        reading.answer.facts[cols[0]] = cols[1]


def _read_check(reading: _ProbeReading, cols: list[str]) -> None:
    check = _sample_check(cols[1:]) if len(cols) >= 7 else None
    if check is not None:
        reading.answer.checks[cols[0]] = check


def _read_event(reading: _ProbeReading, cols: list[str]) -> None:
    if len(cols) >= 5:
        reading.events.append(cols[:5])


def _read_mtime(reading: _ProbeReading, cols: list[str]) -> None:
    if len(cols) >= 4:
        _add_mtime(reading.mtimes, *cols[:4])


def _read_accounting(reading: _ProbeReading, cols: list[str]) -> None:
    row = usage.parse_accounting_row(cols)
    if row is not None:
        reading.answer.accounting.setdefault(row.job_id, []).append(row)


def _read_export(reading: _ProbeReading, cols: list[str]) -> None:
    receipt = _receipt(cols[2]) if len(cols) >= 3 else None
    if receipt is not None:
        reading.answer.exports.setdefault(cols[0], {})[cols[1]] = receipt


def _read_merged(reading: _ProbeReading, cols: list[str]) -> None:
    if len(cols) >= 2:
        n = cols[1].strip()
        reading.answer.merged[cols[0]] = int(n) if contract.is_count(n) else None


def _read_clock(reading: _ProbeReading, cols: list[str]) -> None:
    if cols and contract.is_count(cols[0].strip()):
        reading.answer.now = float(cols[0])


_RECORD_READERS: dict[ProbeRecord, Callable[[_ProbeReading, list[str]], None]] = {
    ProbeRecord.JOB: _read_job,
    ProbeRecord.BENCHMARK: _read_benchmark,
    ProbeRecord.EXPORT: _read_export,
    ProbeRecord.EVENT: _read_event,
    ProbeRecord.MTIME: _read_mtime,
    ProbeRecord.CHECK: _read_check,
    ProbeRecord.CLOCK: _read_clock,
    ProbeRecord.ACCOUNTING: _read_accounting,
    ProbeRecord.FACT: _read_fact,
    ProbeRecord.MERGED: _read_merged,
}


def _add_mtime(mtimes: dict[tuple[str, str], list[float]], bench: str, parent: str, name: str, mtime: str) -> None:
    """A file's mtime, for the state directory it speaks of: ``.gym/<dir>/state`` or ``slurm-<id>.out``."""
    if not contract.is_count(mtime.strip()):
        return
    log_prefix, log_suffix = contract.job_log("\0").split("\0")
    if name.startswith(log_prefix) and name.endswith(log_suffix):
        parent = name[len(log_prefix) : len(name) - len(log_suffix)]
    mtimes.setdefault((bench, parent), []).append(float(mtime))


def _sample_check(cols: list[str]) -> SampleCheck | None:
    numbers = [c.strip() for c in cols[:5]]
    if not all(contract.is_count(n) for n in numbers):
        return None
    expected, written, duplicates, extra, missing = (int(n) for n in numbers)
    named = []
    for item in cols[5].split():
        task, _, rollout = item.partition(":")
        try:
            named.append((int(task), int(rollout)))
        except ValueError:
            continue
    unreadable = cols[6].strip() if len(cols) > 6 else ""
    return SampleCheck(expected, written, duplicates, extra, missing, tuple(named), contract.read_count(unreadable))


# -- from what the probe found to a state ----------------------------------------------------------

_NO_PROBE = JobProbe()  # a job the probe did not reach


# A job that ended so is one a resumable chain may have resumed.
_RESUMABLE_ENDS = (Status.FAILED, Status.TIMED_OUT, Status.UNKNOWN, Status.CANCELLED)


def chain_status(
    first_id: str, chain: Chain, probe: dict[str, JobProbe], rollouts: int, backend: Backend, facts: dict[str, str]
) -> tuple[JobState, str]:
    """The state of a benchmark and its current job's id, following its resume chain."""

    def state_of(job_id: str) -> JobState:
        return backend.job_state(job_id, probe.get(job_id, _NO_PROBE), rollouts, facts)

    latest = chain.latest
    if latest is None:  # not resumable, or its first job has not started yet
        return state_of(first_id), first_id
    history = chain.summary()
    if chain.end is not None:
        end_state, why = chain.end
        return JobState(end_state, why + (f" ({history})" if history else "")), latest
    latest_state = state_of(latest)
    state, detail = latest_state.status, latest_state.detail
    by_user = probe.get(latest, _NO_PROBE).cancelled_by_user
    if state not in _RESUMABLE_ENDS or state == Status.CANCELLED and by_user:
        return JobState(state, detail + (f" ({history})" if history and state != Status.QUEUED else "")), latest
    successor = chain.successors.get(latest)
    if successor is None:
        refused = chain.no_successor.get(latest)
        return JobState(state, detail + (f"; not resumed: {refused}" if refused else "")), latest
    after = f"job {latest} {state} ({detail})"
    next_probe = probe.get(successor, _NO_PROBE)
    scheduler = next_probe.scheduler
    if scheduler.waiting:
        waits = f"job {successor} waits in the queue ({scheduler.reason or 'no reason given'})"
        return JobState(Status.QUEUED, f"resuming: {after}; {waits}"), successor
    if scheduler.running:
        return JobState(Status.STARTING, f"resuming in job {successor}: {after}"), successor
    if scheduler.cancelled and next_probe.cancelled_by_user:
        return CANCELLED_BY_USER, successor
    said = scheduler.word or f"{backend.scheduler_name} forgot it"
    return JobState(state, f"{detail}; its resume job {successor} ended without starting ({said})"), latest


def _receipt(encoded: str) -> dict | None:
    """An export's receipt as the job wrote it (``facts.parse_receipt``); None for one that is not
    a receipt."""
    try:
        receipt = facts.parse_receipt(base64.b64decode(encoded))
    except ValueError:  # bad base64
        return None
    if receipt is None:
        return None
    return {key: getattr(receipt, key) for key in ("state", "detail", "backend_run_id", "time")}


def exports_text(exports: dict[str, dict]) -> str:
    """What status adds to a benchmark's detail about its exports: only what needs attention (a failed
    export, one under way); the benchmark's own state never changes for an export."""
    notes = []
    for name, receipt in exports.items():
        if receipt.get("state") == ReceiptState.FAILED:
            notes.append(f"export {name} failed: {receipt.get('detail') or 'no detail'} (gym eval export retries)")
        elif receipt.get("state") == ReceiptState.RUNNING:
            notes.append(f"exporting to {name}")
    return "".join(f"; {note}" for note in notes)


def _waiting_in_lane(job: BenchmarkJob, chain: Chain, backend: Backend) -> JobStatus:
    """A lane's job its lane has not queued yet: waiting its turn, cancelled before it, or refused."""
    if chain.unfed is not None:
        state, detail = Status.FAILED, f"its lane could not queue it ({backend.submit_command}: {chain.unfed})"
    elif chain.cancelled:
        state, detail = Status.CANCELLED, "cancelled before its lane queued it"
    else:
        state, detail = Status.QUEUED, f"waiting its turn in its lane: {job.fed_by} queues it as that one starts"
    return JobStatus(job.benchmark, None, state, detail, 0, job.job_dir)


def statuses_from(
    record: SubmissionRecord,
    answer: ProbeAnswer | None,
    backend: Backend,
    known: Mapping[str, SampleCheck] | None = None,
) -> list[JobStatus]:
    """Each benchmark's status, in the record's order; a sharded benchmark's from its shards'."""
    statuses = []
    for job in record.benchmarks:
        if job.shards:
            shards = [_unit_status(shard, answer, backend, known) for shard in job.shards]
            statuses.append(sharded_status(job, shards, answer, known))
        else:
            statuses.append(_unit_status(job, answer, backend, known))
    if record.is_guest:
        # Another run's shared job ran these benchmarks: that run counts its GPU-hours, once.
        statuses = [replace(s, usage=NO_USAGE) for s in statuses]
    return statuses


def _unit_status(
    job: BenchmarkJob, answer: ProbeAnswer | None, backend: Backend, known: Mapping[str, SampleCheck] | None
) -> JobStatus:
    """One job's status (a benchmark's, or a shard's): its chain followed, its samples counted."""
    if not job.queued:
        return JobStatus(
            job.benchmark, None, Status.FAILED, f"{backend.submit_command} refused: {job.error}", 0, job.job_dir
        )
    if answer is None or job.benchmark not in answer.benchmarks:
        recorded = [job.job_id] if job.job_id else []
        unanswered = [Attempt(i, Status.UNKNOWN, None, "no answer from the cluster") for i in recorded]
        return JobStatus(
            job.benchmark,
            job.job_id,
            Status.UNKNOWN,
            "no answer from the cluster",
            0,
            job.job_dir,
            recorded,
            history=unanswered,
        )
    rollouts, chain = answer.benchmarks[job.benchmark]
    first = chain.first(job.job_id)
    if not first:
        return _waiting_in_lane(job, chain, backend)
    probe = {job_id: p for (bench, job_id), p in answer.jobs.items() if bench == job.benchmark}
    shown, current = chain_status(chain.head(first), chain, probe, rollouts, backend, answer.facts)
    state, detail = shown.status, shown.detail
    # Once the latest job succeeded, the job queued to resume it is void (Slurm drops it).
    ids = chain.attempt_ids(first, with_successor=state != Status.SUCCEEDED)
    check = answer.checks.get(job.benchmark) or (known or {}).get(job.benchmark)
    if not state.final:
        check = None  # counted while a job of the chain still runs: not the final count
    if state == Status.SUCCEEDED and check is not None and check.missing:
        state, detail = Status.INCOMPLETE, f"{detail}, but {missing_text(check)}"
    elif check is not None and check.duplicates and state == Status.SUCCEEDED:
        detail += f" ({check.duplicates} duplicate row(s) counted once)"
    running = current if not state.final else None
    job_usage = _usage(job.benchmark, job.gpus, ids, running, answer)
    exports = answer.exports.get(job.benchmark, {})
    seen = _Seen(chain, probe, rollouts, backend, answer, _own_by_job(job.benchmark, ids, answer), job.gpus, running)
    added = chain.samples_added(ids, rollouts)
    scheduler = probe.get(current, _NO_PROBE).scheduler
    return JobStatus(
        job.benchmark,
        current,
        state,
        detail + exports_text(exports),
        rollouts,
        job.job_dir,
        ids,
        job_usage,
        check,
        exports,
        [replace(seen.attempt(i), samples_added=added[i]) for i in ids],
        chain.attempt - 1,
        held=scheduler.waiting or scheduler.running,
    )


def sharded_status(
    job: BenchmarkJob, shards: list[JobStatus], answer: ProbeAnswer | None, known: Mapping[str, SampleCheck] | None
) -> JobStatus:
    """A sharded benchmark as one: its shards' states folded (``fold_shard_states``), their jobs and
    usage together, and its samples those its shards were merged into (before a merge, the
    shards' own counts summed)."""
    merged = (answer.merged if answer is not None else {}).get(job.benchmark)
    state, detail = fold_shard_states([(s.state, s.detail) for s in shards], merged is not None)
    check = None
    if state.final:
        check = (answer.checks if answer is not None else {}).get(job.benchmark) or (known or {}).get(job.benchmark)
        if check is None and merged is None and all(s.check is not None for s in shards):
            check = sum_checks([s.check for s in shards if s.check is not None])
    if state == Status.SUCCEEDED and check is not None and check.missing:
        state, detail = Status.INCOMPLETE, f"{detail}, but {missing_text(check)}"
    exports = (answer.exports if answer is not None else {}).get(job.benchmark, {})
    return JobStatus(
        job.benchmark,
        shard_ids_label([s.job_id for s in shards]),
        state,
        detail + exports_text(exports),
        merged if merged is not None else sum(s.rollouts for s in shards),
        job.job_dir,
        [i for s in shards for i in s.chain],
        usage.total([s.usage for s in shards]),
        check,
        exports,
        [attempt for s in shards for attempt in s.history],
        sum(s.resubmits for s in shards),
        shards=shards,
        held=any(s.held for s in shards),
    )


def fold_shard_states(states: list[tuple[Status, str]], merged: bool) -> tuple[Status, str]:
    """A sharded benchmark's state from its shards' (state, detail), in order: running while any
    shard is, queued while any waits; once every shard has ended, succeeded only if each did and
    their rollouts were merged, else what went wrong first (a failure before a cancel)."""
    count = len(states)
    done = sum(1 for state, _ in states if state == Status.SUCCEEDED)
    ended = [(k, state, detail) for k, (state, detail) in enumerate(states, 1) if state.final]
    bad = [(k, state, detail) for k, state, detail in ended if state != Status.SUCCEEDED]
    worst = next((b for b in bad if b[1] != Status.CANCELLED), bad[0] if bad else None)
    trouble = f"; shard {worst[0]} {worst[1]}: {worst[2]}" if worst else ""
    if len(ended) < count:
        live = [state for state, _ in states if not state.final]
        state = next((s for s in (Status.RUNNING, Status.STARTING) if s in live), live[0])
        return state, f"{done} of {count} shards done, {len(live)} {state}{trouble}"
    if worst is None:
        if not merged:
            return Status.FAILED, f"all {count} shards finished, but none merged them (see the last one's driver log)"
        return Status.SUCCEEDED, f"{count} shards finished and merged"
    return worst[1], f"{done} of {count} shards succeeded{trouble}"


def sum_checks(checks: list[SampleCheck]) -> SampleCheck:
    """Shards' sample counts as one benchmark's (their pairs are disjoint)."""
    return SampleCheck(
        sum(c.expected for c in checks),
        sum(c.written for c in checks),
        sum(c.duplicates for c in checks),
        sum(c.extra for c in checks),
        sum(c.missing for c in checks),
        tuple(p for c in checks for p in c.first_missing)[:MISSING_NAMED],
        sum(c.unreadable for c in checks),
    )


def shard_ids_label(ids: list[str | None]) -> str | None:
    """The shards' current jobs in one word: ``1200_[0-2]`` for an array's consecutive tasks,
    else the ids joined by commas."""
    known = [i for i in ids if i]
    if not known:
        return None
    arrays = {i.rpartition("_")[0] for i in known}
    tasks = [i.rpartition("_")[2] for i in known]
    if len(arrays) == 1 and "" not in arrays and all(t.isdigit() for t in tasks):
        numbers = [int(t) for t in tasks]
        if numbers == list(range(numbers[0], numbers[0] + len(numbers))) and len(numbers) > 1:
            return f"{next(iter(arrays))}_[{numbers[0]}-{numbers[-1]}]"
    return ",".join(known)


@dataclass(frozen=True)
class _Seen:
    """What one probe saw of a benchmark, for telling each of its jobs."""

    chain: Chain
    probe: dict[str, JobProbe]
    rollouts: int
    backend: Backend
    answer: ProbeAnswer
    own: dict[str, list[OwnRecord]]
    gpus: int | None
    running: str | None  # the job still running, if any (its usage counts to now)

    def attempt(self, job_id: str) -> Attempt:
        verdict = self.chain.verdict_on(job_id)
        probed = self.probe.get(job_id)
        if probed is not None:
            shown = self.backend.job_state(job_id, probed, self.rollouts, self.answer.facts)
            state, detail, cause = shown.status, shown.detail, probed.cause
        elif verdict is not None:  # older than the probe looks: the chain's verdict tells it
            state, detail, cause = _VERDICT_STATES.get(verdict.outcome, Status.FAILED), verdict.why, None
        else:
            state, detail, cause = Status.UNKNOWN, "not probed, and the chain has no verdict on it", None
        if cause is None and verdict is not None:
            cause = verdict.outcome.cause
        records = [r for r in self.own.get(job_id, []) if r.current] or self.own.get(job_id, [])
        spent = usage.job_usage(
            job_id, self.answer.accounting, self.own, self.gpus, self.answer.now, job_id == self.running
        )
        return Attempt(
            job_id,
            state,
            cause,
            detail,
            started=records[-1].start if records else None,
            ended=records[-1].end if records else None,
            gpu_hours=_rounded(spent.gpu_hours, 4),
            verdict=f"{verdict.why} -> {verdict.action}" if verdict is not None else "",
        )


# How a job the probe did not reach is shown, from the outcome the chain's verdict found.
_VERDICT_STATES = {
    Outcome.SUCCEEDED: Status.SUCCEEDED,
    Outcome.CANCELLED: Status.CANCELLED,
    Outcome.UNKNOWN: Status.UNKNOWN,
    Outcome.TIMEOUT: Status.TIMED_OUT,
    Outcome.WALLTIME: Status.TIMED_OUT,
}


def missing_text(check: SampleCheck) -> str:
    """``3 of 12 samples are missing (task 4 rollout 0, ...)``."""
    shown = check.first_missing[:MISSING_NAMED]  # a check made for info names more
    named = ", ".join(f"task {t} rollout {r}" for t, r in shown)
    more = ", ..." if check.missing > len(shown) else ""
    return f"{check.missing} of {check.expected} samples are missing ({named}{more})"


def _usage(benchmark: str, gpus: int | None, ids: list[str], running: str | None, answer: ProbeAnswer) -> Usage:
    """The benchmark's jobs' usage."""
    return usage.chain_usage(ids, answer.accounting, _own_by_job(benchmark, ids, answer), gpus, answer.now, running)


def _own_by_job(benchmark: str, ids: list[str], answer: ProbeAnswer) -> dict[str, list[OwnRecord]]:
    """The benchmark's jobs' own records by job id; a job with no record in the benchmark's
    directory is a shared deployment's, whose record is in the shared job's directory."""
    own = answer.own_records.get(benchmark, [])
    here = {r.job_id for r in own}
    shared = [r for r in answer.own_records.get("", []) if r.job_id in ids and r.job_id not in here]
    by_job: dict[str, list[OwnRecord]] = {}
    for record in [*own, *shared]:
        by_job.setdefault(record.job_id, []).append(record)
    return by_job


def run_usage(statuses: list[JobStatus]) -> Usage:
    """A run's total: every job once (benchmarks of a shared deployment share theirs)."""
    seen: dict[tuple[str, ...], Usage] = {}
    for s in statuses:
        seen.setdefault(tuple(s.chain), s.usage)
    return usage.total(seen.values())


def probe_runs(
    records: list[SubmissionRecord],
    conn: Connection | None,
    known: Sequence[Mapping[str, SampleCheck]] | None = None,
    missing_named: int = MISSING_NAMED,
) -> list[list[JobStatus]]:
    """The statuses of every job of several runs on one host (a sweep's, or one run's) in one round
    trip over ``conn``: each run's probe in a subshell of its own, its output headed by the run's
    index. ``conn`` may be None when no run was queued: a run nobody could queue needs no cluster to
    be told. ``known``, per run: sample counts of benchmarks that had ended at an earlier probe, not
    made again. ``missing_named``: how many missing pairs each sample check names."""
    backends = [backend_named(r.executor) for r in records]
    checks = list(known) if known is not None else [{} for _ in records]
    queued = {i for i, r in enumerate(records) if was_queued(r)}
    outputs: dict[int, str] = {}
    if queued:
        if conn is None:
            raise ValueError("a queued run is probed over a connection")
        probed = [records[i] for i in sorted(queued)]
        scripts = [(i, probe_script(records[i], backends[i], frozenset(checks[i]))) for i in sorted(queued)]
        outputs = _outputs_by_run(conn.run_script(runs_probe_script(probed, scripts, missing_named)).stdout)
    return [
        statuses_from(r, parse_probe(outputs.get(i, ""), b), b, checks[i]) if i in queued else statuses_from(r, None, b)
        for i, (r, b) in enumerate(zip(records, backends))
    ]


def runs_probe_script(
    records: list[SubmissionRecord], scripts: list[tuple[int, str]], missing_named: int = MISSING_NAMED
) -> str:
    """Several runs' probes as one script (``templates/probe-runs.sh.j2``): the probe's functions
    once and the scheduler asked once for all of them where their backend can (one backend for all:
    a sweep's runs share one); runs of several backends each get their own functions."""
    backends = [backend_named(record.executor) for record in records]
    if len({backend.name for backend in backends}) == 1:
        functions = probe_functions(backends[0], missing_named)
        return render_template(
            "probe-runs.sh.j2", functions=functions, snapshot=snapshot_script(backends[0], records), runs=scripts
        )
    scripts = [
        (i, "\n".join([probe_functions(b, missing_named), snapshot_script(b, [record]), script]))
        for (i, script), b, record in zip(scripts, backends, records)
    ]
    return render_template("probe-runs.sh.j2", functions="", snapshot="", runs=scripts)


def snapshot_script(backend: Backend, records: list[SubmissionRecord]) -> str:
    """What the scheduler says of every job ``records`` name, asked once (``templates/probe-snapshot.sh.j2``):
    given what their jobs were queued under, each once, and their ids (resume chains whole)."""
    units = [job for record in records for job in record.units if job.queued]
    queued = list({json.dumps(job.queued_as, sort_keys=True): job.queued_as for job in units}.values())
    jobs = [(job.job_id or "", f"{job.job_dir}/{contract.CHAIN_FILE}") for job in units]
    return render_template("probe-snapshot.sh.j2", **backend_context(backend), queued=queued, jobs=jobs)


def was_queued(record: SubmissionRecord) -> bool:
    """Whether any job of the run was queued (else nothing about it is asked of its host)."""
    return any(b.queued for b in record.units)


def _outputs_by_run(out: str) -> dict[int, str]:
    outputs: dict[int, list[str]] = {}
    current: list[str] | None = None
    for line in out.splitlines():
        if line.startswith(contract.PROBE_RUN_MARKER) and contract.is_count(line[len(contract.PROBE_RUN_MARKER) :]):
            current = outputs.setdefault(int(line[len(contract.PROBE_RUN_MARKER) :]), [])
        elif current is not None:
            current.append(line)
    return {i: "\n".join(lines) for i, lines in outputs.items()}


def statuses_json(record: SubmissionRecord, statuses: list[JobStatus]) -> str:
    total = run_usage(statuses)
    return json.dumps(
        {
            "run": record.gym_job_id,
            "run_dir": record.run_dir,
            "jobs": [s.as_dict() for s in statuses],
            "gpu_hours": _rounded(total.gpu_hours, 4),
            "wall_seconds": _rounded(total.wall_seconds, 1),
        },
        indent=2,
    )
