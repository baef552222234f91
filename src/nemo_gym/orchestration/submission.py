"""Stage a run on the submit host and queue its jobs, in one round trip.

One bash script, sent on standard input: it checks the mount sources, unpacks the staged run
directory, then lets the backend queue every job, printing one marker line per job. Each job's line
is parsed on its own, so a failure never shifts another benchmark's job id and a warning never
becomes a job id. Secrets are exported at the top of the script, so they reach the jobs through
the scheduler's environment and never touch a file.
"""

from __future__ import annotations

import base64
import io
import re
import shlex
import tarfile
from dataclasses import dataclass

from nemo_gym.orchestration import contract
from nemo_gym.orchestration.backends import backend_named
from nemo_gym.orchestration.connection import Connection
from nemo_gym.orchestration.errors import UserError
from nemo_gym.orchestration.plan import RunPlan
from nemo_gym.orchestration.render import StagedRun

NO_RESULT = "sbatch produced no result for this benchmark"
EXIT_MISSING_MOUNTS = 3
EXIT_RUN_DIR_EXISTS = 4
EXIT_RUN_DIR_UNWRITABLE = 5


@dataclass(frozen=True)
class QueuedJob:
    """One benchmark's submission: its job id, or why it could not be queued."""

    benchmark: str
    job_id: str | None
    error: str | None


def _tarball(staged: StagedRun) -> str:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for rel, staged_file in sorted(staged.files.items()):
            data = staged_file.content.encode()
            info = tarfile.TarInfo(rel)
            info.size = len(data)
            info.mode = staged_file.mode
            tar.addfile(info, io.BytesIO(data))
    return base64.b64encode(buffer.getvalue()).decode()


def submission_script(staged: StagedRun, secrets: dict[str, str]) -> str:
    plan = staged.plan
    lines = ["set -u", "umask 022"]
    lines += [f"export {name}={shlex.quote(value)}" for name, value in secrets.items()]
    if plan.mount_sources:
        lines.append("gym_missing=0")
        for label, src in plan.mount_sources:
            marker = shlex.quote(f"{contract.MISSING_MARKER}{label}:{src}")
            lines.append(f"test -e {shlex.quote(src)} || {{ echo {marker}; gym_missing=1; }}")
        lines.append(f'[ "$gym_missing" -eq 0 ] || exit {EXIT_MISSING_MOUNTS}')
    run_dir = shlex.quote(plan.run_dir)
    lines += [
        f"if [ -e {run_dir} ]; then echo 'run directory exists already' >&2; exit {EXIT_RUN_DIR_EXISTS}; fi",
        f"mkdir -p {run_dir} || exit {EXIT_RUN_DIR_UNWRITABLE}",
        f"base64 -d <<'GYM_TAR_EOF' | tar -xzf - -C {run_dir} || exit {EXIT_RUN_DIR_UNWRITABLE}",
        _tarball(staged),
        "GYM_TAR_EOF",
    ]
    lines += backend_named(plan.backend).submit_lines(plan)
    return "\n".join(lines) + "\n"


def parse_submission_output(stdout: str, benchmarks: list[str], job_id_pattern: str = r"\d+") -> list[QueuedJob]:
    """Each benchmark's marker line: ``<benchmark>:<status>:<output>``, the id the last word of the output."""
    job_id = re.compile(rf"^({job_id_pattern})(;\S+)?$")
    seen: dict[str, QueuedJob] = {}
    for line in stdout.splitlines():
        if not line.startswith(contract.JOB_MARKER):
            continue
        bench, status, payload = (line[len(contract.JOB_MARKER) :].split(":", 2) + ["", ""])[:3]
        payload = payload.strip()
        tokens = payload.split()
        match = job_id.match(tokens[-1]) if tokens else None
        if status == "0" and match:
            seen[bench] = QueuedJob(bench, match.group(1), None)
        elif status == "0":
            seen[bench] = QueuedJob(bench, None, payload or "sbatch exited 0 with no job id")
        else:
            seen[bench] = QueuedJob(bench, None, payload or f"sbatch exited {status}")
    return [seen.get(b, QueuedJob(b, None, NO_RESULT)) for b in benchmarks]


def _parse(plan: RunPlan, stdout: str) -> list[QueuedJob]:
    pattern = backend_named(plan.backend).job_id_pattern
    return per_benchmark(plan, parse_submission_output(stdout, [j.benchmark for j in plan.submitted_jobs], pattern))


def stage_and_submit(conn: Connection, staged: StagedRun, secrets: dict[str, str]) -> list[QueuedJob]:
    plan = staged.plan
    result = conn.run_script(submission_script(staged, secrets))
    missing = [line[len(contract.MISSING_MARKER) :] for line in result.stdout.splitlines()
               if line.startswith(contract.MISSING_MARKER)]  # fmt: skip
    if missing:
        raise UserError([
            f"{m.split(':', 1)[0]}.mounts: source {m.split(':', 1)[1]!r} does not exist on the submit host; "
            f"create it or fix the mount"
            for m in missing
        ])  # fmt: skip
    if result.returncode == EXIT_RUN_DIR_EXISTS:
        raise UserError(f"{plan.run_dir} exists already; nothing was submitted, retry to get a new run id")
    if result.returncode == EXIT_RUN_DIR_UNWRITABLE:
        detail = " ".join(result.stderr.split())[-300:]
        raise UserError(f"could not write the run directory {plan.run_dir} ({detail}); nothing was submitted")
    return _parse(plan, result.stdout)


def per_benchmark(plan: RunPlan, results: list[QueuedJob]) -> list[QueuedJob]:
    """A shared deployment is one job: every benchmark gets its id (or its refusal)."""
    if plan.shared is None:
        return results
    [shared] = results
    return [QueuedJob(job.benchmark, shared.job_id, shared.error) for job in plan.jobs]


def recover_results(conn: Connection, staged: StagedRun) -> list[QueuedJob]:
    """After a lost connection: what the run directory says was queued (the submission log)."""
    plan = staged.plan
    log = shlex.quote(f"{plan.run_dir}/{contract.SUBMITTED_LOG}")
    result = conn.run_script(f"cat {log} 2>/dev/null; true\n")
    return [
        r if r.job_id or r.error != NO_RESULT
        else QueuedJob(r.benchmark, None, "not submitted: the connection was lost before its sbatch ran")
        for r in _parse(plan, result.stdout)
    ]  # fmt: skip


def write_remote_file(conn: Connection, path: str, content: str, mode: int = 0o644) -> None:
    script = (
        f"umask 077\ncat > {shlex.quote(path)} <<'GYM_FILE_EOF'\n{content.rstrip(chr(10))}\nGYM_FILE_EOF\n"
        f"chmod {mode:o} {shlex.quote(path)}\n"
    )
    result = conn.run_script(script)
    if result.returncode != 0:
        raise OSError(" ".join(result.stderr.split()) or f"exit status {result.returncode}")
