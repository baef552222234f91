"""The script that prints (or follows) a job's logs on its submit host, and the words for the files."""

from __future__ import annotations

import shlex

from nemo_gym.orchestration import contract
from nemo_gym.orchestration.errors import UserError
from nemo_gym.orchestration.plan.model import DRIVER_STEP
from nemo_gym.orchestration.record import BenchmarkJob
from nemo_gym.orchestration.templating import render_template


def log_patterns(job: BenchmarkJob, service: str | None, driver: bool, shared_dir: str) -> str:
    """Shell words for the wanted log files (quoted parts, glob characters left active), of the
    job in ``$jid`` (set by ``templates/logs.sh.j2``).

    With a shared deployment the services and the job's own log live in the shared job's
    directory (``shared_dir``: the record's ``shared_deployment_dir``); each benchmark's driver log
    stays in its own.
    """
    if job.job_id is None:
        raise UserError(f"{job.benchmark} was never queued ({job.error}); there are no logs")
    jid = '"$jid"'
    own = shlex.quote(job.job_dir)
    if driver:
        return f"{own}/{contract.step_log(DRIVER_STEP, jid)}"
    dirs = [own, shlex.quote(shared_dir)]
    if service:
        # A service's steps: <service>, <service>_<pool>_workers; per node for multi-node steps.
        s = shlex.quote(service)
        return " ".join(
            f"{d}/{contract.step_log(s, jid)} {d}/{contract.step_log(s, jid, '*')} "
            f"{d}/{contract.LOGS_DIR}/{s}_*_workers-{jid}*.log"
            for d in dirs
        )
    return " ".join(f"{d}/{contract.job_log(jid)}" for d in dirs)


def logs_script(job: BenchmarkJob, patterns: str, lines: int | None, follow: bool) -> str:
    """Prints (or follows) the files ``patterns`` names, of the benchmark's latest job in ``$jid``."""
    return render_template(
        "logs.sh.j2",
        chain=f"{job.job_dir}/{contract.CHAIN_FILE}",
        job_id=job.job_id or "",
        patterns=patterns,
        lines="+1" if lines is None else str(lines),
        follow=follow,
    )
