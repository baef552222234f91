"""The probe's answer read: each record kind by its own reader (``_RECORD_READERS``), into ``ProbeAnswer``."""

from __future__ import annotations

import base64
from collections.abc import Callable
from dataclasses import dataclass, field

from nemo_gym.orchestration import contract, facts, usage
from nemo_gym.orchestration.backends import Backend
from nemo_gym.orchestration.backends.base import JobProbe
from nemo_gym.orchestration.chain import Chain, parse_chain
from nemo_gym.orchestration.contract import Cause, ProbeRecord, StateFile
from nemo_gym.orchestration.observe.status import CANCELLED_BY_USER_KEY, CAUSE_KEY, JOB_END_KEY, SampleCheck
from nemo_gym.orchestration.usage import AccountingRow, OwnRecord


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
            record = usage.own_record(state_dir, start, end, last, times, contract.REQUEUED_RUN_SUFFIX)
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
