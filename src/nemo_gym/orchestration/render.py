"""``RunPlan`` -> the staged run directory: job scripts, step scripts, helpers and the resolved config.

Pure: returns file contents; nothing is written or launched here, and nothing is decided: every
decision is in the plan, and what differs between backends is asked of the plan's backend.
Templates are Jinja2 with undefined variables as errors; every user string is shell-quoted here,
in Python, never by hand in a template. The names of the run-directory contract reach the
templates as ``c`` (``contract``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from nemo_gym.orchestration import contract, exporters, shipping
from nemo_gym.orchestration.backends import Backend, backend_named
from nemo_gym.orchestration.plan.model import (
    COLLECTOR_STEP,
    DRIVER_STEP,
    JobPlan,
    ResumePlan,
    RunPlan,
    Step,
    VllmGatewayStep,
    services_of,
)
from nemo_gym.orchestration.plan.sharding import MERGE_START_TIMEOUT
from nemo_gym.orchestration.ports import PORTS_FILE, VARIABLE_PREFIX
from nemo_gym.orchestration.resume import EXIT_MISSING, EXIT_STOP
from nemo_gym.orchestration.shared_queue import Do, Happened
from nemo_gym.orchestration.shipping import Program
from nemo_gym.orchestration.templating import render_template
from nemo_gym.orchestration.yamlio import dump_yaml

COMMAND_FILE = "command.sh"  # a command benchmark's own script, under steps/
EXECUTABLE = 0o755
READABLE = 0o644
PRIVATE = 0o600


@dataclass(frozen=True)
class StagedFile:
    content: str
    mode: int = READABLE


@dataclass(frozen=True)
class StagedRun:
    """Files relative to the run directory, exactly as they are uploaded."""

    plan: RunPlan
    files: dict[str, StagedFile]
    # What the submit path warns of (``preflight.staging_warnings``), one line each; set by
    # ``library.prepare``.
    warnings: tuple[str, ...] = ()

    def job_script(self, benchmark: str) -> str:
        return self.files[f"{benchmark}/{contract.JOB_SCRIPT}"].content

    def job_documents(self, benchmark: str) -> list[tuple[str, str]]:
        """(name, text) of what queues a job as its scheduler is given it: the job script, and the
        manifest where its backend writes one."""
        names = (contract.JOB_SCRIPT, contract.JOB_MANIFEST)
        return [
            (name, self.files[f"{benchmark}/{name}"].content) for name in names if f"{benchmark}/{name}" in self.files
        ]


def resume_files(run_id: str, resume: ResumePlan, backend: Backend) -> dict[str, StagedFile]:
    """A resumable job's judge: its shell wrapper, and ``resume.py`` shipped with what it imports
    and the backend's node module it talks to its scheduler through."""
    if backend.node_scheduler is None:
        raise ValueError(f"the {backend.name} backend runs no resumable jobs")
    wrapper = render_template(
        "resume.sh.j2",
        run_id=run_id,
        resume=resume,
        exit_stop=EXIT_STOP,
        missing_exit=EXIT_MISSING,
        scheduler=backend.node_scheduler,
        resume_run=shipping.launch_words(Program.RESUME_JUDGE),
    )
    files = {contract.step_script("resume"): StagedFile(wrapper)}
    return files | _shipped(Program.RESUME_JUDGE, f"backends.{backend.node_scheduler}")


def lane_feeder_files(backend: Backend) -> dict[str, StagedFile]:
    """What a submission in lanes stages once for its jobs to queue each lane's next job with
    (``lane_feed``, through the backend's node module)."""
    if backend.node_scheduler is None:
        raise ValueError(f"the {backend.name} backend feeds no lanes")
    return _shipped(Program.LANE_FEEDER, f"backends.{backend.node_scheduler}")


def _shipped(program: Program, *more: str) -> dict[str, StagedFile]:
    return {rel: StagedFile(text) for rel, text in shipping.staged(program, *more).items()}


def render_run(plan: RunPlan) -> StagedRun:
    backend = backend_named(plan.backend)
    files: dict[str, StagedFile] = {}
    for job in plan.submitted_jobs:
        for rel, staged in _job_files(plan, job, backend).items():
            files[f"{_relative(plan, job.job_dir)}/{rel}"] = staged
        if job.shard is not None and job.shard.index == 1:
            # A sharded benchmark exports once, from its merged directory (the merging shard's job
            # runs them): its exporters and spec are there, not in each shard's.
            for rel, staged in _export_files(job).items():
                files[f"{_relative(plan, job.shard.bench_dir)}/{rel}"] = staged
    if plan.shared is not None:
        for job in plan.jobs:  # each benchmark's driver, run by the shared job
            for rel, staged in {**_driver_files(plan, job), **_export_files(job)}.items():
                files[f"{job.benchmark}/{rel}"] = staged
            files[f"{job.benchmark}/{contract.LIBRARY_SCRIPT}"] = _library(plan.run_id, backend)
    for rel, text in backend.run_files(plan).items():
        files[rel] = StagedFile(text, EXECUTABLE)
    files[contract.RESOLVED_CONFIG_FILE] = StagedFile(dump_yaml(plan.resolved_config), PRIVATE)
    return StagedRun(plan=plan, files=files)


def _relative(plan: RunPlan, path: str) -> str:
    """A directory of the run, relative to the run directory (where staged files are named)."""
    return path[len(plan.run_dir) + 1 :] if path.startswith(plan.run_dir + "/") else path


def _job_files(plan: RunPlan, job: JobPlan, backend: Backend) -> dict[str, StagedFile]:
    files = {
        contract.JOB_SCRIPT: StagedFile(_job_script(plan, job, backend), EXECUTABLE),
        contract.LIBRARY_SCRIPT: _library(plan.run_id, backend),
    }
    if job is not plan.shared:
        files.update(_driver_files(plan, job))
        if job.shard is None:
            files.update(_export_files(job))
    if job.resume is not None:
        files.update(resume_files(plan.run_id, job.resume, backend))
    if job.otel is not None:
        from nemo_gym.orchestration.otel import render_collector_config

        files[contract.COLLECTOR_CONFIG_FILE] = StagedFile(render_collector_config(plan.run_id, job))
        files[contract.step_script(COLLECTOR_STEP)] = StagedFile(
            render_template("collector.sh.j2", otel=job.otel), EXECUTABLE
        )
    if any(isinstance(step, VllmGatewayStep) for step in _every_step(plan, job)):
        files.update(_shipped(Program.GATEWAY))
    if job is plan.shared:
        files.update(_shipped(Program.SHARED_QUEUE))
    if job is plan.shared and plan.reload is not None:
        files.update(_shipped(Program.WEIGHTS))
    if job.ports or job.driver_ports:
        files.update(_shipped(Program.PORTS))
    gateway_run = shipping.launch_words(Program.GATEWAY, isolated=False)
    for step in _every_step(plan, job):
        files[contract.step_script(step.name)] = StagedFile(
            render_template("step.sh.j2", run_id=plan.run_id, job=job, step=step, gateway_run=gateway_run), EXECUTABLE
        )
    return files


def _job_script(plan: RunPlan, job: JobPlan, backend: Backend) -> str:
    shared: dict[str, Any] | None = None
    if job is plan.shared:
        # Its own run's benchmarks by name, another run's (a sweep's guests) as <run id>/<benchmark>.
        drivers = [
            {
                "benchmark": b.benchmark if b in plan.jobs else "/".join(b.job_dir.rsplit("/", 2)[-2:]),
                "dir": b.job_dir,
                "launch": b.driver.launch,
                "export": b.export is not None,
            }
            for b in (*plan.jobs, *plan.guests)
        ]
        shared = {
            "drivers": drivers,
            "at_once": plan.benchmarks_at_once,
            "decider": shipping.launch_words(Program.SHARED_QUEUE),
            "driver_ports": job.driver_ports,
            "do": Do,
            "happened": Happened,
        }
    otel = job.otel
    reload = _reload_context(plan, backend) if job is plan.shared else None
    return render_template(
        "job.sh.j2",
        run_id=plan.run_id,
        job=job,
        backend_name=backend.name,
        **backend_context(backend),
        runtime=plan.runtime,
        probe_hosts={
            step.name: [backend.node_host(n) for n in step.health.nodes]
            for step in _every_step(plan, job)
            if step.health
        },
        otel=otel,
        otel_host=backend.node_host(otel.launch.nodes.start) if otel else "",
        shared=shared,
        reload=reload,
        exports=job.export is not None or (job is plan.shared and any(b.export for b in (*plan.jobs, *plan.guests))),
        export_run=shipping.launch_words(Program.EXPORTERS, tree='"$2"'),
        missing_exit=EXIT_MISSING,
        ports_run=shipping.launch_words(Program.PORTS),
        ports_file=PORTS_FILE,
        ports_prefix=VARIABLE_PREFIX,
    )


def _every_step(plan: RunPlan, job: JobPlan) -> tuple[Step, ...]:
    """The job's steps, and a restart lane's turns' after them (each a script of its own)."""
    turns = plan.reload.turns if job is plan.shared and plan.reload is not None else ()
    return job.steps + tuple(step for turn in turns for step in turn.steps)


def _reload_context(plan: RunPlan, backend: Backend) -> dict[str, Any] | None:
    """A lane's turns for its job script: each run's weights and its benchmarks' drivers; a warm
    lane's server, or a restart lane's deployment of each turn after the first."""
    if plan.reload is None:
        return None
    turn_of = {turn.run_id: i for i, turn in enumerate(plan.reload.turns)}
    by_driver = {
        b.job_dir: turn_of[plan.run_id if b in plan.jobs else b.job_dir.rsplit("/", 2)[-2]]
        for b in (*plan.jobs, *plan.guests)
    }
    in_place = plan.reload.in_place
    return {
        "in_place": in_place is not None,
        "host": backend.node_host(in_place.node) if in_place else "",
        "port": in_place.port if in_place else 0,
        "weights": [turn.weights for turn in plan.reload.turns],
        "turns": [{"steps": turn.steps, "services": services_of(turn.steps)} for turn in plan.reload.turns],
        "turn_of_dir": by_driver,
        "program": shipping.launch_words(Program.WEIGHTS),
        "restarts": backend.restarts_services,
    }


def _driver_files(plan: RunPlan, job: JobPlan) -> dict[str, StagedFile]:
    """The driver's script and, for a command benchmark, the command exactly as written."""
    text = render_template(
        "driver.sh.j2",
        run_id=plan.run_id,
        job=job,
        driver=job.driver,
        command_file=COMMAND_FILE,
        merge_start_timeout=MERGE_START_TIMEOUT,
        shards_run=shipping.launch_words(Program.SHARDS),
    )
    files = {contract.step_script(DRIVER_STEP): StagedFile(text, EXECUTABLE)}
    if job.driver.command is not None:
        files[f"{contract.STEPS_DIR}/{COMMAND_FILE}"] = StagedFile(job.driver.command)
    if job.shard is not None:
        # Its slice and the merge's decisions, run by the driver's python3 (stdlib).
        files.update(_shipped(Program.SHARDS))
    return files


def _export_files(job: JobPlan) -> dict[str, StagedFile]:
    """The stdlib exporters and this benchmark's spec (no credential: those come from the job's env)."""
    if job.export is None:
        return {}
    files = _shipped(Program.EXPORTERS)
    files[exporters.SPEC_FILE] = StagedFile(json.dumps(job.export.spec, indent=2) + "\n")
    return files


@lru_cache(maxsize=4)
def _library(run_id: str, backend: Backend) -> StagedFile:
    """The shell library is the same for every job of a run: render it once."""
    return StagedFile(render_template("lib.sh.j2", run_id=run_id, **backend_context(backend)))


def backend_context(backend: Backend) -> dict[str, Any]:
    """What a template that imports its backend's fragments (``{% import backend_template as
    backend with context %}``) is given for them."""
    return {"backend_template": backend.template(), "backend_vars": backend.template_vars()}
