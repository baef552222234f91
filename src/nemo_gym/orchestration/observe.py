"""What a run's jobs are doing, told truthfully: the job's own state file, combined with what the
scheduler says (``scontrol``/``squeue``, ``sacct`` where it exists), in one round trip.

The job scripts write ``<job dir>/.gym/<job id>/state`` (phase, detail) as they go, so the state
is known even where Slurm has no accounting or has forgotten the job. When neither source can
tell, the state is ``unknown`` with the reason.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import asdict, dataclass

from nemo_gym.orchestration.connection import LocalConnection, SSHConnection, using
from nemo_gym.orchestration.errors import UserError
from nemo_gym.orchestration.record import SubmissionRecord, index_dir, load_record

PROBE_MARKER = "__GYM_PROBE:"
RUNNING_SLURM_STATES = {"RUNNING", "COMPLETING", "CONFIGURING", "SUSPENDED", "STOPPED", "RESIZING"}


@dataclass
class JobStatus:
    benchmark: str
    job_id: str | None
    state: str  # queued | starting | running | succeeded | failed | cancelled | timed out | unknown
    detail: str
    rollouts: int
    job_dir: str

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


def _probe_script(record: SubmissionRecord) -> str:
    lines = ["have_sacct=0; command -v sacct >/dev/null 2>&1 && have_sacct=1"]
    for job in record.benchmarks:
        if not job.job_id:
            continue
        d = shlex.quote(job.job_dir)
        jid = shlex.quote(job.job_id)
        lines.append(
            f"st=$(cat {d}/.gym/{jid}/state 2>/dev/null | tr '\\n' '\\t'); "
            f"[ -e {d}/.gym/{jid}/cancelled ] && st=\"$st\"$'\\t'cancelled_by_user=1; "
            f"n=$(cat {d}/artifacts/rollouts.jsonl 2>/dev/null | wc -l); "
            + (
                f"sc=$(scontrol show job -o {jid} 2>/dev/null | tr '\\n' ' '); "
                f"sa=''; [ \"$have_sacct\" = 1 ] && sa=$(sacct -X -n -P -j {jid} -o State,ExitCode 2>/dev/null | head -1); "
                if record.executor == "slurm"
                else "sc=''; sa=''; "
            )
            + f"printf '%s%s\\x1f%s\\x1f%s\\x1f%s\\x1f%s\\n' {shlex.quote(PROBE_MARKER)} {shlex.quote(job.benchmark)} \"$st\" \"$n\" \"$sc\" \"$sa\""
        )
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
    phase, detail = own.get("phase"), own.get("detail", "")
    slurm_state = slurm_state_of(slurm, sacct)
    still_going = slurm_state in RUNNING_SLURM_STATES or (executor == "local" and runner_alive and phase in ("starting", "running"))
    if own.get("cancelled_by_user") and phase != "succeeded" and not still_going:
        return "cancelled", "cancelled by the user (gym eval cancel)"
    restarts = int(slurm["Restarts"]) if slurm.get("Restarts", "").isdigit() else 0
    if slurm_state == "PENDING" and restarts:
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


def probe_run(record: SubmissionRecord, conn: LocalConnection | SSHConnection | None = None) -> list[JobStatus]:
    queued = [b for b in record.benchmarks if b.job_id]
    results: dict[str, tuple[str, str, int]] = {}
    runner_alive = False
    if queued:
        with using(conn, record.hostname) as c:
            out = c.run_script(_probe_script(record)).stdout
        runner_alive = f"{PROBE_MARKER}__runner__alive" in out
        for line in out.splitlines():
            if not line.startswith(PROBE_MARKER) or "\x1f" not in line:
                continue
            bench, st, n, sc, sa = (line[len(PROBE_MARKER) :].split("\x1f") + [""] * 5)[:5]
            job = next(b for b in record.benchmarks if b.benchmark == bench)
            rollouts = int(n.strip() or 0)
            state, detail = _combine(
                job.job_id or "", _fields(st, "\t"), rollouts, _fields(sc, " "), sa.strip(), record.executor,
                runner_alive,
            )  # fmt: skip
            results[bench] = (state, detail, rollouts)
    statuses = []
    for job in record.benchmarks:
        if not job.job_id:
            statuses.append(JobStatus(job.benchmark, None, "failed", f"sbatch refused: {job.error}", 0, job.job_dir))
            continue
        state, detail, rollouts = results.get(job.benchmark, ("unknown", "no answer from the cluster", 0))
        statuses.append(JobStatus(job.benchmark, job.job_id, state, detail, rollouts, job.job_dir))
    return statuses


FINAL = {"succeeded", "failed", "cancelled", "timed out", "unknown"}


def all_final(statuses: list[JobStatus]) -> bool:
    return all(s.state in FINAL for s in statuses)


def statuses_json(record: SubmissionRecord, statuses: list[JobStatus]) -> str:
    return json.dumps(
        {"run": record.gym_job_id, "run_dir": record.run_dir, "jobs": [s.as_dict() for s in statuses]}, indent=2
    )

