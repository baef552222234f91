"""Render configs the way `gym eval submit --dry-run --stage-dir` does, for tests."""

from __future__ import annotations

import re
import shlex
import warnings
from pathlib import Path
from unittest import mock

from nemo_gym.orchestration import contract, shipping
from nemo_gym.orchestration.backends import backend_named, slurm_arrays
from nemo_gym.orchestration.backends.base import RequeuedJob
from nemo_gym.orchestration.compose import compose_config
from nemo_gym.orchestration.observe import probe_script, runs_probe_script
from nemo_gym.orchestration.plan.building import build_plan
from nemo_gym.orchestration.plan.lanes import warm_lanes
from nemo_gym.orchestration.plan.sharing import share_deployments
from nemo_gym.orchestration.record import SubmissionRecord
from nemo_gym.orchestration.render import StagedRun, render_run
from nemo_gym.orchestration.results import DEFAULT_METRIC, projection_source, runs_results_script
from nemo_gym.orchestration.shellquote import bash_quote
from nemo_gym.orchestration.shipping import Program
from nemo_gym.orchestration.submission import (
    Packing,
    QueuedJob,
    RunToSubmit,
    per_benchmark,
    queue_demands,
    site_limits_script,
    submission_script,
)
from nemo_gym.orchestration.validate import validate_config
from nemo_gym.orchestration.verbs.cancel.script import cancel_script, runs_cancel_script
from nemo_gym.orchestration.verbs.export.script import bootstrap_source, export_script
from nemo_gym.orchestration.verbs.logs.script import log_patterns, logs_script
from nemo_gym.orchestration.verbs.resubmit.recovery import Remedy
from nemo_gym.orchestration.verbs.resubmit.script import RequeuedRun, resubmit_script
from nemo_gym.orchestration.verbs.submit.use_case import _record

GOLDEN_RUN_ID = "gym-job-20260101T000000Z-000000"
GOLDEN_DIR = Path(__file__).resolve().parent / "golden"


def stage(config_path: Path, run_id: str = GOLDEN_RUN_ID, overrides: list[str] | None = None) -> StagedRun:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        config, _ = validate_config(compose_config(config_path, overrides or []))
    plans, _ = warm_lanes(share_deployments([build_plan(config, run_id)]))  # a run is a sweep of one
    return render_run(plans[0])


def golden_configs() -> list[Path]:
    return sorted((GOLDEN_DIR / "configs").glob("*.yaml"))


# -- the submit-side scripts of a golden scenario -------------------------------------------------

GOLDEN_SECRETS = {"GYM_GOLDEN_SECRET": "golden-secret-value"}
# Embedded payloads a golden names instead of holding: the tarball's gzip header carries the time of
# packing, and the two Python sources are the package's own modules (their own tests cover them).
TARBALL_STAND_IN = "<the staged files, tar.gz, base64>"
EXPORTERS_STAND_IN = "<shipping.inline(Program.EXPORTERS)>\n"
PROJECTION_STAND_IN = "<shipping.inline(Program.PROJECTION)>"
SCHEDULER_HOST_STAND_IN = "<shipping.inline(Program.SCHEDULER_HOST)>"


def golden_record(staged: StagedRun) -> SubmissionRecord:
    """The record of the run as submitted, the way the library makes it: a fake job id per job."""
    plan = staged.plan
    queued = [QueuedJob(job.unit, str(4000 + i), None) for i, job in enumerate(plan.submitted_jobs)]
    return _record(plan, per_benchmark(plan, queued))


def submit_side_scripts(staged: StagedRun) -> dict[str, str]:
    """Name -> every script the submitting machine runs for this run, as it is sent."""
    record = golden_record(staged)
    backend = backend_named(record.executor)
    first = record.units[0]
    limits = site_limits_script(backend, queue_demands([staged.plan]))
    return {
        **({"site-limits.sh": limits} if limits is not None else {}),
        "submission.sh": submission_script([RunToSubmit(staged, GOLDEN_SECRETS)]),
        **_arrayed_submission(staged),
        "probe.sh": runs_probe_script([record], [(0, probe_script(record, backend))]),
        "cancel.sh": runs_cancel_script([cancel_script(record, record.benchmarks)], [backend]),
        "logs.sh": logs_script(first, log_patterns(first, None, False, record.shared_deployment_dir), None, False),
        "logs-driver-follow.sh": logs_script(
            first, log_patterns(first, None, True, record.shared_deployment_dir), 50, True
        ),
        "results.sh": runs_results_script([record], DEFAULT_METRIC),
        "export.sh": export_script(record, [], False, {}),
        "resubmit.sh": resubmit_script([golden_requeue(record)]),
    }


def _arrayed_submission(staged: StagedRun) -> dict[str, str]:
    """The submission where the site lets jobs of one shape go together (a Slurm job array), when
    that differs from the one above."""
    alone = submission_script([RunToSubmit(staged, GOLDEN_SECRETS)])
    # A golden run has a few jobs, not the many that make arrays worth it: arrays of two here.
    with mock.patch.object(slurm_arrays, "ARRAYS_FROM", 2):
        together = submission_script([RunToSubmit(staged, GOLDEN_SECRETS)], Packing(together=1001))
    return {"submission-arrays.sh": together} if together != alone else {}


def golden_requeue(record: SubmissionRecord) -> RequeuedRun:
    """Every benchmark of the run queued again as its second attempt: the first generating its
    missing samples, the others re-queued."""
    backend = backend_named(record.executor)
    jobs = [
        RequeuedJob(
            job.benchmark,
            job.job_dir,
            f"{job.job_dir}/{contract.JOB_SCRIPT}",
            2,
            Remedy.GENERATE_MISSING if i == 0 else Remedy.REQUEUE,
            job.job_id or "",
            backend.requeued_id(job.job_id or "", 2),
            queued_as=dict(job.queued_as),
        )
        for i, job in enumerate(record.benchmarks)
    ]
    return RequeuedRun(record.gym_job_id, record.run_dir, record.executor, jobs, GOLDEN_SECRETS)


def golden_form(script: str) -> str:
    """A submit-side script with its embedded payloads named (see the stand-ins above)."""
    script = re.sub(r"(<<'GYM_TAR_EOF'[^\n]*\n)[^\n]*\n", lambda m: f"{m.group(1)}{TARBALL_STAND_IN}\n", script)
    script = script.replace(bootstrap_source(), EXPORTERS_STAND_IN)
    script = script.replace(bash_quote(shipping.inline(Program.SCHEDULER_HOST)), bash_quote(SCHEDULER_HOST_STAND_IN))
    return script.replace(shlex.quote(projection_source()), shlex.quote(PROJECTION_STAND_IN))
