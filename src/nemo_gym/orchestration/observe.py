"""What a run's jobs are doing, told truthfully: the job's own state file, combined with what the
scheduler says (``scontrol``/``squeue``, ``sacct`` where it exists), in one round trip.

The job scripts write ``<job dir>/.gym/<job id>/state`` (phase, detail) as they go, so the state
is known even where Slurm has no accounting or has forgotten the job. When neither source can
tell, the state is ``unknown`` with the reason.
"""

from __future__ import annotations

import base64
import json
import shlex
from dataclasses import asdict, dataclass, field

from nemo_gym.orchestration.chain import CHAIN_IDS_AWK, END_STATES, Chain, parse_chain
from nemo_gym.orchestration.connection import LocalConnection, SSHConnection, using
from nemo_gym.orchestration.errors import UserError
from nemo_gym.orchestration.record import SubmissionRecord, index_dir, load_record

PROBE_MARKER = "__GYM_PROBE:"
RUNNING_SLURM_STATES = {"RUNNING", "COMPLETING", "CONFIGURING", "SUSPENDED", "STOPPED", "RESIZING"}
ENDED_SLURM_STATES = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "PREEMPTED", "BOOT_FAIL", "DEADLINE",
                      "OUT_OF_MEMORY")  # fmt: skip


@dataclass
class JobStatus:
    benchmark: str
    job_id: str | None
    state: str  # queued | starting | running | succeeded | failed | cancelled | timed out | unknown
    detail: str
    rollouts: int
    job_dir: str
    # Every job of a resumable benchmark's chain, oldest first (just job_id otherwise).
    chain: list[str] = field(default_factory=list)

    def as_dict(self) -> dict:
        return asdict(self)


# -- finding runs ----------------------------------------------------------------------------------


def all_records() -> list[SubmissionRecord]:
    records = []
    for path in sorted(index_dir().glob("gym-job-*.json")):
        try:
            records.append(load_record(path.read_text()))
        except (OSError, ValueError):
            continue
    return sorted(records, key=lambda r: (r.submitted_at, r.gym_job_id))


def find_run(name: str | None, last: bool) -> SubmissionRecord:
    records = all_records()
    if not records:
        raise UserError(f"no runs in the local index ({index_dir()}); submit one with gym eval submit")
    if last or not name:
        return records[-1]
    exact = [r for r in records if r.gym_job_id == name]
    if exact:
        return exact[0]
    matches = [r for r in records if r.gym_job_id.startswith(name) or r.gym_job_id.endswith(name)]
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise UserError(f"no run matches {name!r}; see gym eval list")
    listed = ", ".join(r.gym_job_id for r in matches[:5])
    raise UserError(f"{name!r} matches {len(matches)} runs ({listed}); give more of the id")


# -- probing -----------------------------------------------------------------------------------------


# Shell: one benchmark's probe. The chain is read again after Slurm is asked, and the whole probe
# repeated if it names other jobs by then: a job that ended between the two reads has written its
# records before Slurm could call it ended, so status never sees an ending the chain does not explain.
_PROBE_FUNCTIONS = r"""
gym_chain_ids() { { echo "$1"; CHAIN_IDS_AWK; } | awk '!seen[$0]++' | tail -n 4; }
gym_probe() {
    local b=$1 d=$2 first=$3 ids now ch out id st sc sa n try
    for try in 1 2 3; do
        ids=$(cat "$d/.gym/chain" 2>/dev/null | gym_chain_ids "$first")
        out=""
        for id in $ids; do
            st=$(cat "$d/.gym/$id/state" 2>/dev/null | tr '\n' '\t')
            { [ -e "$d/.gym/$id/cancelled" ] || [ -e "$d/.gym/cancelled" ]; } && st="$st"$'\t'cancelled_by_user=1
            sc=''; sa=''
            if [ "$gym_slurm" = 1 ]; then
                sc=$(scontrol show job -o "$id" 2>/dev/null | tr '\n' ' ')
                [ "$have_sacct" = 1 ] && sa=$(sacct -X -n -P -j "$id" -o State,ExitCode 2>/dev/null | head -1)
            fi
            out+="$(printf 'MARKERJ\x1f%s\x1f%s\x1f%s\x1f%s\x1f%s' "$b" "$id" "$st" "$sc" "$sa")"$'\n'
        done
        ch=$(base64 -w0 "$d/.gym/chain" 2>/dev/null)
        now=$(printf '%s' "$ch" | base64 -d 2>/dev/null | gym_chain_ids "$first")
        [ "$ids" = "$now" ] && break
    done
    n=$(cat "$d/artifacts/rollouts.jsonl" 2>/dev/null | wc -l)
    printf '%s' "$out"
    printf 'MARKERB\x1f%s\x1f%s\x1f%s\n' "$b" "$n" "$ch"
}
"""


def _probe_script(record: SubmissionRecord) -> str:
    """Per benchmark: its rollouts and resume chain, and per job of the chain (the last few): the
    job's own state file, and what Slurm says of it."""
    lines = [
        "have_sacct=0; command -v sacct >/dev/null 2>&1 && have_sacct=1",
        f"gym_slurm={1 if record.executor == 'slurm' else 0}",
        _PROBE_FUNCTIONS.replace("CHAIN_IDS_AWK", CHAIN_IDS_AWK).replace("MARKER", PROBE_MARKER),
    ]
    for job in record.benchmarks:
        if job.job_id:
            lines.append(f"gym_probe {shlex.quote(job.benchmark)} {shlex.quote(job.job_dir)} {shlex.quote(job.job_id)}")
    if record.executor == "local":
        runner = shlex.quote(record.run_dir + "/.gym-runner.pid")
        lines.append(
            f"if [ -f {runner} ] && kill -0 \"$(cat {runner})\" 2>/dev/null; then echo {PROBE_MARKER}__runner__alive; "
            f"else echo {PROBE_MARKER}__runner__gone; fi"
        )
    return "\n".join(lines) + "\n"


def _fields(text: str, sep: str) -> dict[str, str]:
    out = {}
    for item in text.split(sep):
        if "=" in item:
            key, value = item.split("=", 1)
            out[key.strip()] = value.strip()
    return out


def slurm_state_of(slurm: dict[str, str], sacct: str) -> str:
    state = slurm.get("JobState", "").split()[0] if slurm.get("JobState") else ""
    if not state and sacct:
        state = sacct.split("|")[0].split()[0]
    return state


def _combine(job_id: str, own: dict[str, str], rollouts: int, slurm: dict[str, str], sacct: str, executor: str,
             runner_alive: bool) -> tuple[str, str]:  # fmt: skip
    slurm_state = slurm_state_of(slurm, sacct)
    restarts = int(slurm["Restarts"]) if slurm.get("Restarts", "").isdigit() else 0
    attempt = int(own["attempt"]) if own.get("attempt", "").isdigit() else 0
    if restarts > attempt and "phase" in own:
        # Written by an earlier run of a job Slurm has requeued since: not this run's state.
        own = {k: v for k, v in own.items() if k == "cancelled_by_user"}
    phase, detail = own.get("phase"), own.get("detail", "")
    still_going = slurm_state in RUNNING_SLURM_STATES or (executor == "local" and runner_alive and phase in ("starting", "running"))
    if own.get("cancelled_by_user") and phase != "succeeded" and not still_going:
        return "cancelled", "cancelled by the user (gym eval cancel)"
    if restarts and (slurm_state in ("PENDING", "COMPLETING") and phase is None or slurm_state.startswith("REQUEUE")):
        return "queued", (
            f"requeued by Slurm after a node failure or preemption (attempt {restarts + 1}); "
            f"waiting in the queue ({slurm.get('Reason', 'no reason given')})"
        )
    if slurm_state == "PENDING":
        return "queued", f"waiting in the Slurm queue ({slurm.get('Reason', 'no reason given')})"
    if slurm_state.startswith("CANCELLED"):
        return "cancelled", "cancelled (scancel, by the user or an administrator)"
    if slurm_state == "TIMEOUT":
        return "timed out", f"walltime reached ({slurm.get('TimeLimit', 'its limit')})"
    if slurm_state in ("NODE_FAIL", "BOOT_FAIL"):
        return "failed", f"a node failed ({slurm_state})"
    if slurm_state == "OUT_OF_MEMORY":
        return "failed", "out of memory"
    if slurm_state == "PREEMPTED":
        return "failed", "preempted by Slurm (PREEMPTED)"
    if phase == "succeeded":
        return "succeeded", detail
    if phase == "failed":
        return "failed", detail
    if phase == "cancelled":
        return "cancelled", detail
    if slurm_state == "FAILED":
        return "failed", f"the job failed (exit code {slurm.get('ExitCode', '?')}) before it recorded a reason"
    if slurm_state == "COMPLETED":
        return "unknown", "Slurm says COMPLETED but the job recorded no outcome"
    if slurm_state in RUNNING_SLURM_STATES or (executor == "local" and runner_alive):
        if phase == "running":
            return "running", f"driver running, {rollouts} rollout(s) written"
        if phase == "queued":
            return "queued", detail or "waiting for the jobs before it"
        return "starting", detail or "starting"
    if executor == "local" and phase in ("starting", "running", "queued"):
        return "unknown", "the local runner is gone but the job recorded no outcome (machine restarted?)"
    if executor == "local" and phase is None:
        return "unknown", "the job has not started and the local runner is gone"
    return "unknown", f"Slurm no longer knows job {job_id} and the job recorded no outcome" + (
        f" (last phase: {phase})" if phase else ""
    )


@dataclass(frozen=True)
class _JobProbe:
    own: dict[str, str]
    slurm: dict[str, str]
    sacct: str


_NO_PROBE = _JobProbe({}, {}, "")  # a job the probe did not reach


def _parse_probe(out: str) -> tuple[dict[str, tuple[int, Chain]], dict[tuple[str, str], _JobProbe]]:
    benches: dict[str, tuple[int, Chain]] = {}
    jobs: dict[tuple[str, str], _JobProbe] = {}
    for line in out.splitlines():
        if not line.startswith(PROBE_MARKER) or "\x1f" not in line:
            continue
        kind, *cols = line[len(PROBE_MARKER) :].split("\x1f")
        if kind == "B":
            bench, n, chain = (cols + ["", "", ""])[:3]
            try:
                text = base64.b64decode(chain).decode(errors="replace")
            except ValueError:
                text = ""
            benches[bench] = (int(n.strip() or 0), parse_chain(text))
        elif kind == "J":
            bench, job_id, st, sc, sa = (cols + [""] * 5)[:5]
            jobs[(bench, job_id)] = _JobProbe(_fields(st, "\t"), _fields(sc, " "), sa.strip())
    return benches, jobs


def _chain_status(
    first_id: str, chain: Chain, probe: dict[str, _JobProbe], rollouts: int, executor: str, runner_alive: bool
) -> tuple[str, str, str]:
    """(state, detail, current job id) of a benchmark, following its resume chain."""

    def combined(job_id: str) -> tuple[str, str]:
        p = probe.get(job_id, _NO_PROBE)
        return _combine(job_id, p.own, rollouts, p.slurm, p.sacct, executor, runner_alive)

    latest = chain.latest
    if latest is None:  # not resumable, or its first job has not started yet
        state, detail = combined(first_id)
        return state, detail, first_id
    history = chain.summary()
    if chain.end is not None:
        end_state, why = chain.end
        return end_state if end_state in END_STATES else "unknown", why + (f" ({history})" if history else ""), latest
    state, detail = combined(latest)
    if state not in ("failed", "timed out", "unknown", "cancelled") or state == "cancelled" and _by_user(probe, latest):
        return state, detail + (f" ({history})" if history and state != "queued" else ""), latest
    successor = chain.successors.get(latest)
    if successor is None:
        why = chain.no_successor.get(latest)
        return state, detail + (f"; not resumed: {why}" if why else ""), latest
    after = f"job {latest} {state} ({detail})"
    next_probe = probe.get(successor, _NO_PROBE)
    next_state = slurm_state_of(next_probe.slurm, next_probe.sacct)
    if next_state == "PENDING":
        reason = next_probe.slurm.get("Reason", "no reason given")
        return "queued", f"resuming: {after}; job {successor} waits in the queue ({reason})", successor
    if next_state in RUNNING_SLURM_STATES:
        return "starting", f"resuming in job {successor}: {after}", successor
    if next_state.startswith("CANCELLED") and _by_user(probe, successor):
        return "cancelled", "cancelled by the user (gym eval cancel)", successor
    return state, f"{detail}; its resume job {successor} ended without starting ({next_state or 'Slurm forgot it'})", latest


def _by_user(probe: dict[str, _JobProbe], job_id: str) -> bool:
    return bool(probe.get(job_id, _NO_PROBE).own.get("cancelled_by_user"))


def probe_run(record: SubmissionRecord, conn: LocalConnection | SSHConnection | None = None) -> list[JobStatus]:
    queued = [b for b in record.benchmarks if b.job_id]
    benches: dict[str, tuple[int, Chain]] = {}
    jobs: dict[tuple[str, str], _JobProbe] = {}
    runner_alive = False
    if queued:
        with using(conn, record.hostname) as c:
            out = c.run_script(_probe_script(record)).stdout
        runner_alive = f"{PROBE_MARKER}__runner__alive" in out
        benches, jobs = _parse_probe(out)
    statuses = []
    for job in record.benchmarks:
        if not job.job_id:
            statuses.append(JobStatus(job.benchmark, None, "failed", f"sbatch refused: {job.error}", 0, job.job_dir))
            continue
        if job.benchmark not in benches:
            statuses.append(JobStatus(job.benchmark, job.job_id, "unknown", "no answer from the cluster", 0,
                                      job.job_dir, [job.job_id]))  # fmt: skip
            continue
        rollouts, chain = benches[job.benchmark]
        probe = {job_id: p for (bench, job_id), p in jobs.items() if bench == job.benchmark}
        state, detail, current = _chain_status(job.job_id, chain, probe, rollouts, record.executor, runner_alive)
        # Once the latest job succeeded, the job queued to resume it is void (Slurm drops it).
        ids = chain.job_ids(with_successor=state != "succeeded") or [job.job_id]
        statuses.append(JobStatus(job.benchmark, current, state, detail, rollouts, job.job_dir, ids))
    return statuses


FINAL = {"succeeded", "failed", "cancelled", "timed out", "unknown"}


def all_final(statuses: list[JobStatus]) -> bool:
    return all(s.state in FINAL for s in statuses)


def statuses_json(record: SubmissionRecord, statuses: list[JobStatus]) -> str:
    return json.dumps(
        {"run": record.gym_job_id, "run_dir": record.run_dir, "jobs": [s.as_dict() for s in statuses]}, indent=2
    )

