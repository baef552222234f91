"""Stage a run on the cluster and queue one Slurm job per benchmark, in one round trip.

One bash script, sent on standard input: it checks the mount sources, unpacks the staged run
directory, then runs ``sbatch`` for every benchmark, printing one marker line per benchmark. Each
benchmark's line is parsed on its own, so a failure never shifts another benchmark's job id and
a warning never becomes a job id. Secrets are exported at the top of the script, so they reach the
jobs through sbatch's environment and never touch a file.
"""

from __future__ import annotations

import base64
import io
import re
import shlex
import tarfile
from dataclasses import dataclass

from nemo_gym.orchestration.api import SubmitConfig
from nemo_gym.orchestration.connection import LocalConnection, SSHConnection
from nemo_gym.orchestration.errors import UserError
from nemo_gym.orchestration.render import StagedRun

JOB_MARKER = "__GYM_JOB:"
# Each sbatch result is also appended here, so a lost connection can be recovered from.
SUBMITTED_LOG = ".gym-submitted"
MISSING_MARKER = "__GYM_MISSING:"
_JOB_ID_RE = re.compile(r"^(\d+|local-[0-9a-f]+-\d+)(;\S+)?$")


@dataclass(frozen=True)
class SbatchResult:
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


def mount_sources(config: SubmitConfig) -> list[tuple[str, str]]:
    """(label, source path) of every mount, checked on the submit host before anything is staged."""
    entries = [("driver", m) for m in config.driver.mounts]
    entries += [(f"services.{name}", m) for name, s in config.services.items() for m in s.mounts]
    return [(label, mount.split(":", 1)[0]) for label, mount in entries]


def submission_script(config: SubmitConfig, staged: StagedRun, secrets: dict[str, str]) -> str:
    plan = staged.plan
    lines = ["set -u", "umask 022"]
    lines += [f"export {name}={shlex.quote(value)}" for name, value in secrets.items()]
    sources = mount_sources(config)
    if sources:
        lines.append("gym_missing=0")
        for label, src in sources:
            lines.append(
                f"test -e {shlex.quote(src)} || {{ echo {shlex.quote(MISSING_MARKER + label + ':' + src)}; gym_missing=1; }}"
            )
        lines.append('[ "$gym_missing" -eq 0 ] || exit 3')
    run_dir = shlex.quote(plan.run_dir)
    lines += [
        f"if [ -e {run_dir} ]; then echo 'run directory exists already' >&2; exit 4; fi",
        f"mkdir -p {run_dir} || exit 5",
        f"base64 -d <<'GYM_TAR_EOF' | tar -xzf - -C {run_dir} || exit 5",
        _tarball(staged),
        "GYM_TAR_EOF",
    ]
    if plan.launcher == "local":
        # Detached from this command: the run goes on after `gym eval submit` returns.
        runner = shlex.quote(plan.run_dir + "/run-local.sh")
        lines.append(f"setsid nohup bash {runner} >/dev/null 2>&1 </dev/null &")
        for job in plan.submitted_jobs:
            lines.append(f"printf '%s%s:0:%s\\n' {shlex.quote(JOB_MARKER)} {shlex.quote(job.benchmark)} {job.local_job_id}")
        return "\n".join(lines) + "\n"
    for job in plan.submitted_jobs:
        bench = job.benchmark
        lines += [
            f"mkdir -p {shlex.quote(job.job_dir + '/logs')}",
            f"out=$(sbatch --parsable {shlex.quote(job.job_dir + '/job.sh')} 2>&1); rc=$?",
            f"line=$(printf '%s%s:%s:%s' {shlex.quote(JOB_MARKER)} {shlex.quote(bench)} \"$rc\" \"$(printf '%s' \"$out\" | tr '\\n' ' ')\")",
            f"printf '%s\\n' \"$line\" >>{shlex.quote(plan.run_dir + '/' + SUBMITTED_LOG)}",
            "printf '%s\\n' \"$line\"",
        ]
    return "\n".join(lines) + "\n"


def parse_sbatch_results(stdout: str, benchmarks: list[str]) -> list[SbatchResult]:
    seen: dict[str, SbatchResult] = {}
    for line in stdout.splitlines():
        if not line.startswith(JOB_MARKER):
            continue
        bench, status, payload = (line[len(JOB_MARKER) :].split(":", 2) + ["", ""])[:3]
        payload = payload.strip()
        tokens = payload.split()
        match = _JOB_ID_RE.match(tokens[-1]) if tokens else None
        if status == "0" and match:
            seen[bench] = SbatchResult(bench, match.group(1), None)
        elif status == "0":
            seen[bench] = SbatchResult(bench, None, payload or "sbatch exited 0 with no job id")
        else:
            seen[bench] = SbatchResult(bench, None, payload or f"sbatch exited {status}")
    return [
        seen.get(b, SbatchResult(b, None, "sbatch produced no result for this benchmark")) for b in benchmarks
    ]


def stage_and_submit(
    conn: LocalConnection | SSHConnection, config: SubmitConfig, staged: StagedRun, secrets: dict[str, str]
) -> list[SbatchResult]:
    result = conn.run_script(submission_script(config, staged, secrets))
    missing = [line[len(MISSING_MARKER) :] for line in result.stdout.splitlines() if line.startswith(MISSING_MARKER)]
    if missing:
        raise UserError([f"{m.split(':', 1)[0]}.mounts: source {m.split(':', 1)[1]!r} does not exist on the submit host; create it or fix the mount" for m in missing])
    if result.returncode == 4:
        raise UserError(f"{staged.plan.run_dir} exists already; nothing was submitted, retry to get a new run id")
    if result.returncode == 5:
        detail = " ".join(result.stderr.split())[-300:]
        raise UserError(f"could not write the run directory {staged.plan.run_dir} ({detail}); nothing was submitted")
    return per_benchmark(staged, parse_sbatch_results(result.stdout, [j.benchmark for j in staged.plan.submitted_jobs]))


def per_benchmark(staged: StagedRun, results: list[SbatchResult]) -> list[SbatchResult]:
    """A shared deployment is one job: every benchmark gets its id (or its refusal)."""
    if staged.plan.shared is None:
        return results
    [shared] = results
    return [SbatchResult(job.benchmark, shared.job_id, shared.error) for job in staged.plan.jobs]


def recover_results(conn: LocalConnection | SSHConnection, staged: StagedRun) -> list[SbatchResult]:
    """After a lost connection: what the run directory says was queued (the sbatch log)."""
    log = shlex.quote(f"{staged.plan.run_dir}/{SUBMITTED_LOG}")
    result = conn.run_script(f"cat {log} 2>/dev/null; true\n")
    names = [job.benchmark for job in staged.plan.submitted_jobs]
    recovered = per_benchmark(staged, parse_sbatch_results(result.stdout, names))
    return [
        r if r.job_id or r.error != "sbatch produced no result for this benchmark"
        else SbatchResult(r.benchmark, None, "not submitted: the connection was lost before its sbatch ran")
        for r in recovered
    ]


def write_remote_file(conn: LocalConnection | SSHConnection, path: str, content: str, mode: int = 0o644) -> None:
    script = (
        f"umask 077\ncat > {shlex.quote(path)} <<'GYM_FILE_EOF'\n{content.rstrip(chr(10))}\nGYM_FILE_EOF\n"
        f"chmod {mode:o} {shlex.quote(path)}\n"
    )
    result = conn.run_script(script)
    if result.returncode != 0:
        raise OSError(" ".join(result.stderr.split()) or f"exit status {result.returncode}")
