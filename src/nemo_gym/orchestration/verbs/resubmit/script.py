"""The resubmit script (``templates/resubmit.sh.j2``: a template, like every submit-side script) and
its answer: every run's benchmarks that the recovery plan queues again, in one script over one
connection, each run's secrets exported only in its own subshell.

What each benchmark is queued as is decided before (``recovery.plan``); this module only prints it
and reads back, per benchmark, the id its new job got (or the refusal) and, for a generate-missing
attempt, how many rows its inputs file holds."""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from nemo_gym.orchestration import contract, shipping
from nemo_gym.orchestration.backends import backend_named
from nemo_gym.orchestration.backends.base import RequeuedJob
from nemo_gym.orchestration.observe import missing_inputs_shell
from nemo_gym.orchestration.render import backend_context, render_template
from nemo_gym.orchestration.submission import QueuedJob, parse_submission_output, split_by_run


@dataclass(frozen=True)
class RequeuedRun:
    run_id: str
    run_dir: str
    backend: str
    jobs: list[RequeuedJob]
    secrets: dict[str, str]  # carrier variable -> value, exported for its jobs only


@dataclass(frozen=True)
class Requeued:
    """What the script said of one benchmark."""

    queued: QueuedJob
    inputs: int | None  # rows of a generate-missing attempt's inputs file
    held: bool = False  # queued, but it could not be released: it waits held


def resubmit_script(runs: list[RequeuedRun]) -> str:
    """One script for every run (they share a backend: a sweep's runs do)."""
    backend = backend_named(runs[0].backend)
    return render_template(
        "resubmit.sh.j2",
        **backend_context(backend),
        missing_inputs_shell=missing_inputs_shell(),
        # A lane's stalled job is recorded fed by the lane feeder itself, run by the host's python3.
        lane_feeder=shipping.inline(shipping.Program.LANE_FEEDER) if _feeds_any(runs) else "",
        runs=[_run_context(run) for run in runs],
    )


def _feeds_any(runs: list[RequeuedRun]) -> bool:
    return any(job.feeds for run in runs for job in run.jobs)


def _run_context(run: RequeuedRun) -> dict:
    backend = backend_named(run.backend)
    return {
        "run_id": run.run_id,
        "exports": [f"export {name}={shlex.quote(value)}" for name, value in run.secrets.items()],
        "jobs": run.jobs,
        **backend.requeue_context(run.run_id, run.run_dir, run.jobs),
    }


def parse_resubmit_output(stdout: str, runs: list[RequeuedRun]) -> list[list[Requeued]]:
    """Each run's benchmarks, in order: the job queued (or why not), its inputs' rows."""
    parts = split_by_run(stdout, [run.run_id for run in runs])
    answers = []
    for run in runs:
        part = parts[run.run_id]
        backend = backend_named(run.backend)
        queued = parse_submission_output(part, [job.benchmark for job in run.jobs], backend)
        inputs = _inputs_counts(part)
        held = _marked(part, contract.NOT_RELEASED_MARKER)
        answers.append([Requeued(q, inputs.get(q.benchmark), q.benchmark in held) for q in queued])
    return answers


def _inputs_counts(part: str) -> dict[str, int | None]:
    counts: dict[str, int | None] = {}
    for line in part.splitlines():
        if line.startswith(contract.INPUTS_MARKER):
            bench, _, count = line[len(contract.INPUTS_MARKER) :].rpartition(":")
            counts[bench] = contract.read_count(count) if contract.is_count(count.strip()) else None
    return counts


def _marked(part: str, marker: str) -> set[str]:
    return {line[len(marker) :] for line in part.splitlines() if line.startswith(marker)}
