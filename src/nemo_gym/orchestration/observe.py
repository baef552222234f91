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
import shlex
from dataclasses import asdict, dataclass, field

from nemo_gym.orchestration import contract
from nemo_gym.orchestration.backends import Backend, backend_named
from nemo_gym.orchestration.backends.base import CANCELLED_BY_USER, JobProbe
from nemo_gym.orchestration.connection import Connect, Connection, connect
from nemo_gym.orchestration.contract import Chain, parse_chain
from nemo_gym.orchestration.record import SubmissionRecord

STATES = ("queued", "starting", "running", "succeeded", "failed", "cancelled", "timed out", "unknown")
FINAL = frozenset({"succeeded", "failed", "cancelled", "timed out", "unknown"})


@dataclass
class JobStatus:
    benchmark: str
    job_id: str | None
    state: str  # one of STATES
    detail: str
    rollouts: int
    job_dir: str
    # Every job of a resumable benchmark's chain, oldest first (just job_id otherwise).
    chain: list[str] = field(default_factory=list)

    def as_dict(self) -> dict:
        return asdict(self)


def all_final(statuses: list[JobStatus]) -> bool:
    return all(s.state in FINAL for s in statuses)


# -- the probe -----------------------------------------------------------------------------------

# Shell: one benchmark's probe. The chain is read again after the scheduler is asked, and the whole
# probe repeated if it names other jobs by then: a job that ended between the two reads has written
# its records before the scheduler could call it ended, so status never sees an ending the chain
# does not explain.
_PROBE_FUNCTIONS = r"""
gym_chain_ids() { { echo "$1"; CHAIN_IDS_AWK; } | awk '!seen[$0]++' | tail -n 4; }
gym_probe() {
    local b=$1 d=$2 first=$3 ids now ch out id st sc sa n try
    for try in 1 2 3; do
        ids=$(cat "$d/CHAIN_FILE" 2>/dev/null | gym_chain_ids "$first")
        out=""
        for id in $ids; do
            st=$(cat "$d/MARKERS_DIR/$id/STATE_FILE" 2>/dev/null | tr '\n' '\t')
            { [ -e "$d/MARKERS_DIR/$id/CANCELLED_FILE" ] || [ -e "$d/CHAIN_CANCELLED_FILE" ]; } && st="$st"$'\t'cancelled_by_user=1
            SCHEDULER_PROBE
            out+="$(printf 'MARKERJ\x1f%s\x1f%s\x1f%s\x1f%s\x1f%s' "$b" "$id" "$st" "$sc" "$sa")"$'\n'
        done
        ch=$(base64 -w0 "$d/CHAIN_FILE" 2>/dev/null)
        now=$(printf '%s' "$ch" | base64 -d 2>/dev/null | gym_chain_ids "$first")
        [ "$ids" = "$now" ] && break
    done
    n=$(cat "$d/ROLLOUTS_FILE" 2>/dev/null | wc -l)
    printf '%s' "$out"
    printf 'MARKERB\x1f%s\x1f%s\x1f%s\n' "$b" "$n" "$ch"
}
"""


def probe_script(record: SubmissionRecord, backend: Backend) -> str:
    """Per benchmark: its rollouts and resume chain, and per job of the chain (the last few): the
    job's own state file, and what the scheduler says of it."""
    functions = _PROBE_FUNCTIONS
    for name, value in (
        ("CHAIN_IDS_AWK", contract.chain_ids_awk()), ("SCHEDULER_PROBE", backend.probe_scheduler_shell()),
        ("CHAIN_CANCELLED_FILE", contract.CHAIN_CANCELLED_FILE), ("CHAIN_FILE", contract.CHAIN_FILE),
        ("MARKERS_DIR", contract.MARKERS_DIR), ("CANCELLED_FILE", contract.CANCELLED_FILE),
        ("STATE_FILE", contract.STATE_FILE), ("ROLLOUTS_FILE", contract.ROLLOUTS_FILE),
        ("MARKER", contract.PROBE_MARKER),
    ):  # fmt: skip
        functions = functions.replace(name, value)
    lines = [*backend.probe_prelude(record), functions]
    for job in record.benchmarks:
        if job.job_id:
            lines.append(f"gym_probe {shlex.quote(job.benchmark)} {shlex.quote(job.job_dir)} {shlex.quote(job.job_id)}")
    lines += backend.probe_tail(record)
    return "\n".join(lines) + "\n"


@dataclass
class ProbeAnswer:
    benchmarks: dict[str, tuple[int, Chain]] = field(default_factory=dict)  # name -> (rollouts, chain)
    jobs: dict[tuple[str, str], JobProbe] = field(default_factory=dict)  # (benchmark, job id) -> probe
    facts: dict[str, str] = field(default_factory=dict)  # run-wide, from the backend's probe tail


def parse_probe(out: str, backend: Backend) -> ProbeAnswer:
    answer = ProbeAnswer()
    sep = contract.FIELD_SEPARATOR
    for line in out.splitlines():
        if not line.startswith(contract.PROBE_MARKER) or sep not in line:
            continue
        kind, *cols = line[len(contract.PROBE_MARKER) :].split(sep)
        if kind == "B":
            bench, n, chain = (cols + ["", "", ""])[:3]
            try:
                text = base64.b64decode(chain).decode(errors="replace")
            except ValueError:
                text = ""
            answer.benchmarks[bench] = (int(n.strip() or 0), parse_chain(text))
        elif kind == "J":
            bench, job_id, st, sc, sa = (cols + [""] * 5)[:5]
            own = contract.parse_state(st.replace("\t", "\n"))
            by_user = own.pop("cancelled_by_user", "") == "1"
            answer.jobs[(bench, job_id)] = JobProbe(own, backend.read_scheduler(sc, sa), by_user)
        elif kind == "R" and len(cols) >= 2:
            answer.facts[cols[0]] = cols[1]
    return answer


# -- from what the probe found to a state ----------------------------------------------------------

_NO_PROBE = JobProbe()  # a job the probe did not reach


def chain_status(
    first_id: str, chain: Chain, probe: dict[str, JobProbe], rollouts: int, backend: Backend, facts: dict[str, str]
) -> tuple[str, str, str]:
    """(state, detail, current job id) of a benchmark, following its resume chain."""

    def state_of(job_id: str) -> tuple[str, str]:
        return backend.job_state(job_id, probe.get(job_id, _NO_PROBE), rollouts, facts)

    latest = chain.latest
    if latest is None:  # not resumable, or its first job has not started yet
        return (*state_of(first_id), first_id)
    history = chain.summary()
    if chain.end is not None:
        end_state, why = chain.end
        state = end_state if end_state in contract.END_STATES else "unknown"
        return state, why + (f" ({history})" if history else ""), latest
    state, detail = state_of(latest)
    by_user = probe.get(latest, _NO_PROBE).cancelled_by_user
    if state not in ("failed", "timed out", "unknown", "cancelled") or state == "cancelled" and by_user:
        return state, detail + (f" ({history})" if history and state != "queued" else ""), latest
    successor = chain.successors.get(latest)
    if successor is None:
        refused = chain.no_successor.get(latest)
        return state, detail + (f"; not resumed: {refused}" if refused else ""), latest
    after = f"job {latest} {state} ({detail})"
    next_probe = probe.get(successor, _NO_PROBE)
    scheduler = next_probe.scheduler
    if scheduler.waiting:
        return "queued", f"resuming: {after}; job {successor} waits in the queue ({scheduler.reason or 'no reason given'})", successor
    if scheduler.running:
        return "starting", f"resuming in job {successor}: {after}", successor
    if scheduler.cancelled and next_probe.cancelled_by_user:
        return (*CANCELLED_BY_USER, successor)
    said = scheduler.state or "Slurm forgot it"
    return state, f"{detail}; its resume job {successor} ended without starting ({said})", latest


def statuses_from(record: SubmissionRecord, answer: ProbeAnswer | None, backend: Backend) -> list[JobStatus]:
    statuses = []
    for job in record.benchmarks:
        if not job.job_id:
            statuses.append(JobStatus(job.benchmark, None, "failed", f"sbatch refused: {job.error}", 0, job.job_dir))
            continue
        if answer is None or job.benchmark not in answer.benchmarks:
            statuses.append(JobStatus(job.benchmark, job.job_id, "unknown", "no answer from the cluster", 0,
                                      job.job_dir, [job.job_id]))  # fmt: skip
            continue
        rollouts, chain = answer.benchmarks[job.benchmark]
        probe = {job_id: p for (bench, job_id), p in answer.jobs.items() if bench == job.benchmark}
        state, detail, current = chain_status(job.job_id, chain, probe, rollouts, backend, answer.facts)
        # Once the latest job succeeded, the job queued to resume it is void (Slurm drops it).
        ids = chain.job_ids(with_successor=state != "succeeded") or [job.job_id]
        statuses.append(JobStatus(job.benchmark, current, state, detail, rollouts, job.job_dir, ids))
    return statuses


def probe_run(record: SubmissionRecord, conn: Connection | None = None, connect: Connect = connect) -> list[JobStatus]:
    """The status of every job of a run, over ``conn`` (or a connection opened for it, only when
    some job was queued: a run nobody could queue needs no cluster to be told)."""
    backend = backend_named(record.executor)
    if not any(b.job_id for b in record.benchmarks):
        return statuses_from(record, None, backend)
    script = probe_script(record, backend)
    if conn is None:
        with connect(record.hostname) as opened:
            out = opened.run_script(script).stdout
    else:
        out = conn.run_script(script).stdout
    return statuses_from(record, parse_probe(out, backend), backend)


def statuses_json(record: SubmissionRecord, statuses: list[JobStatus]) -> str:
    return json.dumps(
        {"run": record.gym_job_id, "run_dir": record.run_dir, "jobs": [s.as_dict() for s in statuses]}, indent=2
    )
