"""Submitting: a config file and its overrides composed and validated, every run of it prepared
(decided and rendered), then staged and queued over one connection, and recorded.

A lone config is a sweep of one: the same path queues it, recovers it after a lost connection and
records it; only a real sweep (``-m``) also gets a sweep record.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Sequence
from contextlib import ExitStack
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from nemo_gym.orchestration import contract
from nemo_gym.orchestration.api import BaseServiceConfig, DriverConfig, EnvSource, SubmitConfig, env_sources_of
from nemo_gym.orchestration.backends import backend_named
from nemo_gym.orchestration.connection import Connect, Connection, connect
from nemo_gym.orchestration.errors import ConnectionLost, UserError
from nemo_gym.orchestration.estimate import RunEstimate, estimate_run, over_budget
from nemo_gym.orchestration.exporters.record import credential_problem
from nemo_gym.orchestration.exporters.spec import destinations
from nemo_gym.orchestration.library.composing import Combination, Composition, each_combination
from nemo_gym.orchestration.plan.building import build_plan
from nemo_gym.orchestration.plan.lanes import reloading, warm_lanes, weights_key
from nemo_gym.orchestration.plan.model import JobPlan, RunPlan
from nemo_gym.orchestration.plan.sharing import deployment_key, share_deployments
from nemo_gym.orchestration.preflight import check_gym_keys, staging_warnings
from nemo_gym.orchestration.record import (
    BenchmarkJob,
    SubmissionRecord,
    SweepRecord,
    SweepRun,
    current_user,
    now_utc,
    spent_history,
    submission_origin,
    values_label,
    write_local_index,
    write_sweep_index,
)
from nemo_gym.orchestration.render import StagedRun, render_run
from nemo_gym.orchestration.runid import new_run_id

if TYPE_CHECKING:
    from nemo_gym.orchestration import journal
    from nemo_gym.orchestration.submission import QueuedJob

# Only a real submission stages, queues, journals and checks credentials (``submission``,
# ``journal``, ``verbs.export.script``): each is imported where it is used, so a dry run never loads them.

# -- prepare ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PreparedRun:
    """One run, decided and rendered: its config, its staged files, its swept values (none alone)."""

    config: SubmitConfig
    staged: StagedRun
    values: tuple[tuple[str, str], ...] = ()

    @property
    def plan(self) -> RunPlan:
        return self.staged.plan

    @property
    def warnings(self) -> tuple[str, ...]:
        return self.staged.warnings

    def label(self) -> str:
        return values_label(dict(self.values))


@dataclass(frozen=True)
class Prepared:
    """Every run of a submission, ready to be queued: one, or a sweep's (``sweep_id`` set)."""

    runs: list[PreparedRun]
    sweep_id: str | None = None
    config_path: str | None = None
    notes: tuple[str, ...] = ()  # what the sweep's runs share, or could (``share_deployments``)
    joining: SweepRecord | None = None  # the sweep its runs join (``submit``'s ``joining``)
    estimates: tuple[RunEstimate, ...] = ()  # each run's, from the index's earlier runs

    @property
    def swept(self) -> list[str]:
        return [key for key, _ in self.runs[0].values] if self.runs else []

    @property
    def hostname(self) -> str | None:
        return self.runs[0].plan.hostname

    @property
    def named(self) -> tuple[str, str]:
        """(``sweep``, its id), or (``run``, its id) of a lone run: how the messages name it."""
        return ("sweep", self.sweep_id) if self.sweep_id else ("run", self.runs[0].plan.run_id)

    @property
    def warnings(self) -> list[str]:
        """Each run's warnings, once each."""
        return list(dict.fromkeys(w for run in self.runs for w in run.warnings))


def prepare(what: SubmitConfig | Composition, run_ids: Sequence[str] = ()) -> Prepared:
    """Everything a submission stages, decided and rendered, once gym's run/prepare keys are
    checked, with the submit path's warnings; nothing is connected to. ``--dry-run`` stops here;
    ``submit`` goes on from here. A config is one run; a composition, each of its combinations (a
    problem in any is reported naming its combination, and nothing is prepared). ``run_ids``: the
    runs' ids (an interrupted submission's, made again), new ones when not given."""
    composition = what if isinstance(what, Composition) else Composition([Combination(what)])
    combinations = composition.combinations
    plans = each_combination(
        [c.values for c in combinations],
        lambda i: _planned(combinations[i], composition.sweep_id, run_ids[i] if run_ids else new_run_id()),
    )
    plans, lane_notes = warm_lanes(share_deployments(plans))
    runs = [
        PreparedRun(c.config, replace(render_run(plan), warnings=tuple(staging_warnings(c.config))), c.values)
        for c, plan in zip(combinations, plans)
    ]
    _refuse_mixed(runs)
    estimates = _estimates(runs)
    return Prepared(
        runs,
        composition.sweep_id,
        composition.config_path,
        tuple([*_sharing_notes(plans), *lane_notes]),
        None,
        estimates,
    )


def footprints(plan: RunPlan) -> dict[str, int]:
    """Benchmark -> the GPUs its jobs will hold: a sharded benchmark's, its shards' together (what
    status records of it is the benchmark's, as one)."""
    found: dict[str, int] = {}
    for unit, gpus in backend_named(plan.backend).allocated_gpus(plan).items():
        benchmark = contract.split_unit(unit)[0]
        found[benchmark] = found.get(benchmark, 0) + gpus
    return found


def _estimates(runs: list[PreparedRun]) -> tuple[RunEstimate, ...]:
    """Each run's cost estimated from what earlier runs in the index cost on the same footprint;
    a run over its ``job.max_gpu_hours`` is refused (naming the run of a sweep) before anything."""
    history = spent_history()
    estimates = tuple(estimate_run(footprints(r.plan), history) for r in runs)
    problems = []
    for run, estimate in zip(runs, estimates):
        problem = over_budget(estimate, run.config.job.max_gpu_hours)
        if problem:
            problems.append(f"{run.label()}: {problem}" if len(runs) > 1 else problem)
    if problems:
        raise UserError(problems)
    return estimates


def _planned(combination: Combination, sweep_id: str | None, run_id: str) -> RunPlan:
    check_gym_keys(combination.config)
    return build_plan(combination.config, run_id, sweep_id)


def _sharing_notes(plans: list[RunPlan]) -> list[str]:
    """What the sweep's runs share, or could: one line each (warm lanes say their own)."""
    hosts = [plan for plan in plans if plan.guests and plan.reload is None]
    if hosts:
        served = sum(1 for plan in plans if plan.host is not None and not reloading(plan)) + len(hosts)
        return [
            f"{served} runs of the sweep serve the same model with the same services: they share "
            f"{len(hosts)} deployment(s) (one job each, that runs every one of their benchmarks in turn)"
        ]
    own = [plan for plan in plans if plan.shared is None]
    if len(own) < 2:
        return []
    alike = Counter(deployment_key(plan) for plan in own)
    if max(alike.values()) > 1:
        return [
            f"{max(alike.values())} runs of the sweep start the same services: job.deployment=shared would start "
            f"them once for all of those runs (one job that runs each run's benchmarks in turn)"
        ]
    checkpoints = Counter(weights_key(plan) for plan in own)
    if max(checkpoints.values()) > 1:
        return [
            f"{max(checkpoints.values())} runs of the sweep differ only in the policy's checkpoint: job.deployment=reload "
            f"would serve them in lanes, one job each (the weights reloaded in place where the policy allows it)"
        ]
    return []


def _refuse_mixed(runs: list[PreparedRun]) -> None:
    """A submission goes over one connection and is queued by one backend."""
    hosts = sorted({run.plan.hostname or "this machine" for run in runs})
    if len(hosts) > 1:
        raise UserError(
            f"-m: the combinations are submitted from different hosts ({', '.join(hosts)}); a sweep is submitted "
            f"over one connection: sweep one host at a time"
        )
    backends = sorted({run.plan.backend for run in runs})
    if len(backends) > 1:
        raise UserError(
            f"-m: the combinations run on different kinds of compute ({', '.join(backends)}); a sweep's jobs are "
            f"queued by one backend: sweep one compute type at a time"
        )


def staged_directory(staged: StagedRun, directory: str | Path) -> Path:
    """Write a staged run to a local directory, with the modes it is uploaded with (``--stage-dir``)."""
    from nemo_gym.orchestration.stage import write_staged

    return write_staged(staged, directory)


# -- submit ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Submission:
    records: list[SubmissionRecord]  # each run's, in order
    sweep: SweepRecord | None = None  # a real sweep's own record
    # Set when the connection broke during the submission: the records were recovered from the
    # cluster's own log of what was queued, and this says what happened.
    interrupted: str | None = None
    # Set when an earlier submit of this config was killed after queueing every job: its runs are
    # recorded now instead, and this says so (nothing was queued again).
    adopted: str | None = None

    @property
    def failed(self) -> list[tuple[SubmissionRecord, BenchmarkJob]]:
        return [(record, job) for record in self.records for job in record.failed]


def submission_secrets(config: SubmitConfig, plan: RunPlan) -> dict[str, str]:
    """Carrier variable -> value, for every ``host:`` env value and the collector's token."""
    from nemo_gym.orchestration.verbs.export.script import export_environment_problems, host_credential_problems

    owners: dict[str, DriverConfig | BaseServiceConfig] = {"driver": config.driver, **config.deployed_services}
    values = {carrier: owners[owner].env[key] for carrier, (owner, key) in plan.secrets.items()}
    problems = host_credential_problems(owners, plan.secrets, values)
    if plan.otel_token_env:
        token = os.environ.get(plan.otel_token_env, "")
        if not token:
            raise UserError(
                f"otel: the collector's token is read from ${plan.otel_token_env} when you submit, but it is "
                f"not set in this shell; export it, or set otel.enabled: false"
            )
        problems += [f"otel.token_env: {p}" for p in [credential_problem(plan.otel_token_env, token)] if p]
        values[plan.otel_token_env] = token
    # The exporters' credentials, when this shell has them: they reach the jobs the same way.
    carried = {name: os.environ[name] for name in plan.carried_env if os.environ.get(name)}
    problems += export_environment_problems(config, plan.carried_env, carried)
    if problems:
        raise UserError(problems)
    values.update(carried)
    return values


def shell_variable(key: str, source: EnvSource) -> str:
    """The submitting shell's variable a secret is read from again (a resubmit): ``host:VAR``'s VAR;
    a literal credential's own name (never its value)."""
    return source.ref if source.kind == "host" else key


def carried_from(config: SubmitConfig, plan: RunPlan) -> dict[str, str]:
    """Each variable the submission exports for the run's jobs -> the submitting shell's variable
    it is read from (``submission_secrets``'s sources, by name)."""
    owners: dict[str, DriverConfig | BaseServiceConfig] = {"driver": config.driver, **config.deployed_services}
    sources = {
        carrier: shell_variable(key, env_sources_of(owners[owner])[key])
        for carrier, (owner, key) in plan.secrets.items()
    }
    if plan.otel_token_env:
        sources[plan.otel_token_env] = plan.otel_token_env
    # The exporters' credentials travel when this shell has them (submission_secrets): those that did.
    return {**sources, **{name: name for name in plan.carried_env if os.environ.get(name)}}


def submit(prepared: Prepared, *, connect: Connect = connect, joining: SweepRecord | None = None) -> Submission:
    """Stage every run on the submit host and queue all their jobs over one connection, in one
    script; then record each run (a sweep's with its sweep id and values, and the sweep), in the
    local index first (it cannot fail the submit, and it survives a lost connection) and then in
    every run directory, in one more script. A connection lost mid-way is reopened once and the
    records rebuilt from the cluster's own log of what was queued. A submission of the same config
    that was killed before it recorded its runs (its journal left in the index) is recorded instead,
    never queued twice. ``joining``: the sweep these runs join (gym eval watch's, as it stands),
    whose record gets them after its own."""
    from nemo_gym.orchestration import journal
    from nemo_gym.orchestration.submission import RunToSubmit, stage_and_submit

    if joining is not None:
        prepared = replace(prepared, joining=joining)
    digest = journal.fingerprint(
        prepared.hostname, [(run.config.model_dump(mode="json"), run.values) for run in prepared.runs]
    )
    adopted = _adopt_interrupted(prepared, digest, connect)
    if adopted is not None:
        return adopted
    run_ids = [run.plan.run_id for run in prepared.runs]
    begun = journal.begin(prepared.named[1], digest, prepared.hostname, run_ids, prepared.sweep_id)
    runs = [RunToSubmit(run.staged, submission_secrets(run.config, run.plan)) for run in prepared.runs]
    try:
        with connect(prepared.hostname) as conn:
            queued = stage_and_submit(conn, runs)
            records = _records(prepared, queued)
            sweep = _write_records(conn, prepared, records)
    except ConnectionLost as lost:
        recovered = _recover(prepared, lost, connect)
        journal.end(begun)
        return recovered
    journal.end(begun)
    return Submission(records, sweep)


def _records(prepared: Prepared, queued: list[list[QueuedJob]], interrupted: bool = False) -> list[SubmissionRecord]:
    sharing = _sharing(prepared)
    return [
        _record(
            run.plan,
            q,
            interrupted=interrupted,
            values=run.values,
            carried=carried_from(run.config, run.plan),
            shared_with=sharing.get(run.plan.run_id),
        )
        for run, q in zip(prepared.runs, queued)
    ]


def _adopt_interrupted(prepared: Prepared, digest: str, connect: Connect) -> Submission | None:
    """The last submission of this config that never recorded its runs (killed), recorded now from
    what its run directories say was queued; None when there is none, or it queued nothing."""
    from nemo_gym.orchestration import journal
    from nemo_gym.orchestration.submission import recover_results

    earlier = [j for j in journal.pending() if j.digest == digest and len(j.run_ids) == len(prepared.runs)]
    if not earlier:
        return None
    live = next((j for j in earlier if j.alive()), None)
    if live is not None:
        raise UserError(
            f"another gym eval submit of this config is under way (pid {live.pid}, since {live.started}); "
            f"wait for it to end, or remove {live.path} if it is gone; nothing was submitted"
        )
    last = earlier[0]
    composition = Composition(
        [Combination(run.config, run.values) for run in prepared.runs], last.sweep_id, prepared.config_path
    )
    before = replace(prepare(composition, last.run_ids), joining=prepared.joining)
    with connect(prepared.hostname) as conn:
        queued = recover_results(conn, [run.staged for run in before.runs])
        if any(q.job_id or q.fed_by for jobs in queued for q in jobs):
            records = _records(before, queued, interrupted=True)
            sweep = _write_records(conn, before, records)
        else:
            records, sweep = [], None
    for stale in earlier:
        journal.end(stale)
    if not records:
        return None
    text = _adopted_text(last, before, records)
    if any(not b.queued for r in records for b in r.units):
        return Submission(records, sweep, interrupted=text)
    return Submission(records, sweep, adopted=text)


def _adopted_text(last: journal.Journal, before: Prepared, records: list[SubmissionRecord]) -> str:
    kind, name = before.named
    jobs = [b for r in records for b in r.units]
    missing = [f"{r.gym_job_id}/{b.benchmark}" for r in records for b in r.units if not b.queued]
    text = (
        f"an earlier gym eval submit of this config (pid {last.pid}, {last.started}) was stopped before it "
        f"recorded its runs, after queueing {len(jobs) - len(missing)} of {len(jobs)} job(s): they are recorded "
        f"now as {kind} {name}, and nothing was queued again"
    )
    if missing:
        text += f"; not queued: {', '.join(missing[:QUEUED_SHOWN])} (cancel it with gym eval cancel {name} and submit again)"
    return text


def _sharing(prepared: Prepared) -> dict[str, list[str]]:
    """Run id -> the other runs of the sweep whose benchmarks the same shared job runs."""
    groups: dict[str, list[str]] = {}
    for run in prepared.runs:
        host = run.plan.host[0] if run.plan.host is not None else run.plan.run_id
        groups.setdefault(host, []).append(run.plan.run_id)
    return {rid: [other for other in members if other != rid] for members in groups.values() for rid in members}


def _record(
    plan: RunPlan,
    queued: list[QueuedJob],
    interrupted: bool = False,
    values: tuple[tuple[str, str], ...] = (),
    carried: dict[str, str] | None = None,
    shared_with: list[str] | None = None,
) -> SubmissionRecord:
    benchmarks = _benchmark_jobs(plan, queued)
    return SubmissionRecord(
        gym_job_id=plan.run_id,
        submitted_at=now_utc(),
        run_dir=plan.run_dir,
        cluster=plan.compute,
        executor=plan.backend,
        submitted_by=current_user(),
        submitted_from=submission_origin(),
        model=plan.model,
        hostname=plan.hostname,
        benchmarks=benchmarks,
        carried_from=carried or {},
        deployment_host=plan.host[0] if plan.host is not None else plan.run_id if plan.shared is not None else None,
        deployment_shared_with=shared_with or [],
        deployment_skips_cancelled=plan.shared is not None or plan.host is not None,
        executor_metadata={"submission": "interrupted"} if interrupted else {},
        sweep_id=plan.sweep_id,
        sweep_values=dict(values),
    )


def _benchmark_jobs(plan: RunPlan, queued: list[QueuedJob]) -> list[BenchmarkJob]:
    """Every benchmark's job as the scheduler answered for it; a sharded benchmark's shards under
    its own entry."""
    from nemo_gym.orchestration.submission import QueuedJob, no_result

    backend = backend_named(plan.backend)
    gpus = backend.allocated_gpus(plan)
    answers = {q.benchmark: q for q in queued}

    def entry(job: JobPlan) -> BenchmarkJob:
        q = answers.get(job.unit) or QueuedJob(job.unit, None, no_result(backend))
        return BenchmarkJob(
            benchmark=job.unit,
            job_dir=job.job_dir,
            job_id=q.job_id,
            error=q.error,
            fed_by=q.fed_by,
            gpus=gpus.get(job.unit),
            export_to=destinations(job.export.spec["exporters"]) if job.export else {},
            # A shared deployment's one job runs every driver: resubmitting one benchmark of it is not built.
            continues_from_disk=plan.shared is None and job.driver.continues_from_disk,
            queued_as=backend.queue_facts(plan.shared or job),
        )

    benchmarks: dict[str, BenchmarkJob] = {}
    for job in plan.jobs:
        if job.shard is None:
            benchmarks[job.benchmark] = entry(job)
            continue
        # A sharded benchmark: its shards as they were queued, under the benchmark's own entry.
        first = benchmarks.setdefault(
            job.benchmark,
            BenchmarkJob(
                benchmark=job.benchmark,
                job_dir=job.shard.bench_dir,
                job_id=None,
                export_to=destinations(job.export.spec["exporters"]) if job.export else {},
            ),
        )
        first.shards.append(entry(job))
    for bench in benchmarks.values():
        if bench.shards and not bench.queued:
            bench.error = bench.shards[0].error  # not one shard queued: the benchmark was refused
    return list(benchmarks.values())


def _sweep_record(prepared: Prepared, records: list[SubmissionRecord]) -> SweepRecord | None:
    if prepared.sweep_id is None:
        return None
    new = [SweepRun(run_id=r.gym_job_id, run_dir=r.run_dir, values=r.sweep_values) for r in records]
    if prepared.joining is not None:
        return prepared.joining.model_copy(update={"runs": [*prepared.joining.runs, *new]})
    first = prepared.runs[0].plan
    return SweepRecord(
        sweep_id=prepared.sweep_id,
        submitted_at=now_utc(),
        submitted_by=current_user(),
        submitted_from=submission_origin(),
        config=prepared.config_path or "",
        swept=prepared.swept,
        executor=first.backend,
        hostname=first.hostname,
        runs=new,
    )


def _write_records(conn: Connection, prepared: Prepared, records: list[SubmissionRecord]) -> SweepRecord | None:
    """The local index first (it cannot fail the submit, and it survives a lost connection), then
    every run directory: its run's record and a sweep's."""
    from nemo_gym.orchestration.submission import write_remote_files

    sweep = _sweep_record(prepared, records)
    for record in records:
        write_local_index(record)
    files = {f"{record.run_dir}/{contract.RECORD_FILE}": record.dumps() for record in records}
    if sweep is not None:
        write_sweep_index(sweep)
        files.update({f"{record.run_dir}/{contract.SWEEP_RECORD_FILE}": sweep.dumps() for record in records})
    try:
        write_remote_files(conn, files)
    except ConnectionLost:
        raise  # recovered by the caller, like a loss while queueing
    except (OSError, UserError) as exc:
        raise UserError(_unrecorded(records, sweep, exc)) from None
    return sweep


def _unrecorded(records: list[SubmissionRecord], sweep: SweepRecord | None, exc: Exception) -> str:
    queued = sum(1 for r in records for b in r.units if b.job_id)
    where = records[0].run_dir if len(records) == 1 else "the run directories"
    return (
        f"{queued} job(s) of {_named(records, sweep)} were queued but the records could not be written into {where} "
        f"({exc}); already queued: {_queued_jobs(records, sweep)}; the local index has them "
        f"(gym eval status {sweep.sweep_id if sweep else records[0].gym_job_id})"
    )


QUEUED_SHOWN = 20  # job ids an error lists before "and N more"


def _queued_jobs(records: list[SubmissionRecord], sweep: SweepRecord | None, limit: int = QUEUED_SHOWN) -> str:
    """``benchmark=job id`` of every queued job (a sweep's by run: ``run R: a=1, b=2; run S: ...``),
    the first ``limit`` of them, then how many more."""
    parts, shown, total = [], 0, 0
    for record in records:
        pairs = [f"{b.benchmark}={b.job_id}" for b in record.units if b.job_id]
        total += len(pairs)
        take = pairs[: max(0, limit - shown)]
        shown += len(take)
        if take:
            parts.append((f"run {record.gym_job_id}: " if sweep else "") + ", ".join(take))
    text = "; ".join(parts) or "none"
    return f"{text} and {total - shown} more" if total > shown else text


def _named(records: list[SubmissionRecord], sweep: SweepRecord | None) -> str:
    return f"sweep {sweep.sweep_id}" if sweep else f"run {records[0].gym_job_id}"


def _recover(prepared: Prepared, lost: ConnectionLost, connect: Connect) -> Submission:
    """The connection broke mid-submission: reconnect once and record what really was queued, run by run."""
    from nemo_gym.orchestration.submission import recover_results

    host, (kind, name) = prepared.hostname, prepared.named
    with ExitStack() as stack:
        # Only a failure to reconnect or to read the submission logs back leaves what was queued
        # unknown: connect's refusal (a UserError, as ssh cannot connect) and a second loss.
        try:
            conn = stack.enter_context(connect(host))
            queued = recover_results(conn, [run.staged for run in prepared.runs])
        except UserError:
            logs = ", ".join(f"{run.plan.run_dir}/{contract.SUBMITTED_LOG}" for run in prepared.runs)
            raise UserError(
                f"the connection to {host} was lost during submission and could not be re-opened, so it is unknown "
                f"which jobs of {kind} {name} were queued; when it is back, {logs} on {host} list them ({lost.problems[0]})"
            ) from None
        records = _records(prepared, queued, interrupted=True)
        # What was queued is known now, and in the local index once _write_records starts: a record
        # that cannot be written (a full disk, the connection lost again) is said as such, job ids
        # and all.
        try:
            sweep = _write_records(conn, prepared, records)
        except ConnectionLost as again:
            raise UserError(_unrecorded(records, _sweep_record(prepared, records), again)) from None
    jobs = [b for r in records for b in r.units]
    done = [b for b in jobs if b.queued]
    counted = f"job(s) of the sweep's {len(records)} runs" if prepared.sweep_id else "benchmark(s)"
    cut = f"the connection to {host} was lost during submission; "
    if len(done) == len(jobs):
        text = f"{cut}all {len(jobs)} {counted} were queued and are recorded in {kind} {name} (read back from its logs)"
    else:
        text = (
            f"{cut}{len(done)} of {len(jobs)} {counted} had been queued and are recorded in {kind} {name}; "
            f"the others were not queued (gym eval status {name} says why each), or cancel the {kind} with "
            f"gym eval cancel {name}"
        )
    return Submission(records, sweep, interrupted=text)


def job_kind(record: SubmissionRecord) -> str:
    """What the run's backend calls a job (``Slurm job``)."""
    return backend_named(record.executor).job_kind
