"""``gym eval submit``: compose, validate, then print the resolved config, dry-run or submit. A
config without ``-m`` is a sweep of one: the same path, without the sweep's own lines."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING

from nemo_gym.orchestration.cli.common import add_json_flag
from nemo_gym.orchestration.display import some_of

if TYPE_CHECKING:
    from nemo_gym.orchestration.library import Composition, Prepared, PreparedRun, Submission


def register(verbs: argparse._SubParsersAction) -> None:
    p = verbs.add_parser(
        "submit",
        help="validate a config and submit one job per benchmark",
        description="Validate CONFIG (with Hydra-style overrides) and submit one job per benchmark.",
    )
    p.add_argument("-c", "--config", required=True, metavar="CONFIG.yaml", help="the submit config")
    p.add_argument("overrides", nargs="*", metavar="key=value", help="Hydra overrides: a.b=v, +a.b=v, ~a.b")
    p.add_argument(
        "-m",
        "--multirun",
        action="store_true",
        help="a sweep: one run per combination of key=a,b,c / range(...) / glob(...) values",
    )
    p.add_argument("--resolve-only", action="store_true", help="print the validated config and stop")
    p.add_argument("--dry-run", action="store_true", help="render everything, connect to nothing")
    p.add_argument("--stage-dir", metavar="DIR", help="with --dry-run: write the staged run directory here")
    add_json_flag(p, "the submission's records (with --resolve-only: the resolved config)")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Every combination composed and validated first (a bad value in one stops everything), then
    printed (a sweep's once prepared), or prepared (decided and rendered) and dry-run or submitted."""
    from nemo_gym.orchestration.errors import UserError
    from nemo_gym.orchestration.library import compose, estimate_text, prepare, submit

    if args.stage_dir and not args.dry_run:
        raise UserError("--stage-dir writes what --dry-run renders; add --dry-run")
    composition = compose(args.config, args.overrides, multirun=args.multirun)
    warn(composition.warnings)
    if args.resolve_only and not args.multirun:
        print_resolved(composition, args.json)
        return 0
    # A sweep is prepared even for --resolve-only: what it prints must be a sweep that can be
    # submitted (one host, one backend, every combination rendered), with the staging warnings.
    prepared = prepare(composition)
    warn(prepared.warnings)
    for note in prepared.notes:
        print(f"note: {note}", file=sys.stderr)
    if not args.resolve_only:
        for line in estimate_text(prepared.estimates):
            print(f"estimate: {line}", file=sys.stderr)
    if args.resolve_only:
        print_resolved(composition, args.json)
        return 0
    if args.dry_run:
        return print_dry_run(prepared, args.stage_dir)
    return report(submit(prepared), args.json)


def warn(notes: list[str]) -> None:
    for note in notes:
        print(f"warning: {note}", file=sys.stderr)


def print_resolved(composition: Composition, as_json: bool) -> None:
    """The validated config; a sweep's, each combination's: YAML documents headed by its values, or a JSON list."""
    from nemo_gym.orchestration.library import resolved_config, resolved_yaml

    combinations = composition.combinations
    if composition.sweep_id is None:
        [only] = combinations
        if as_json:
            print(json.dumps(resolved_config(only.config), indent=2))
        else:
            print(resolved_yaml(only.config), end="")
    elif as_json:
        runs = [{"values": dict(c.values), "config": resolved_config(c.config)} for c in combinations]
        print(json.dumps({"sweep_id": composition.sweep_id, "runs": runs}, indent=2))
    else:
        for i, combination in enumerate(combinations, start=1):
            print(f"--- # run {i} of {len(combinations)}: {combination.label()}")
            print(resolved_yaml(combination.config), end="")


def print_dry_run(prepared: Prepared, stage_dir: str | None) -> int:
    """Every run as --dry-run shows one; with ``stage_dir``, a sweep's runs each in a directory in it."""
    from pathlib import Path

    if prepared.sweep_id is None:
        [only] = prepared.runs
        return print_run_dry_run(only, stage_dir)
    jobs = sum(len(run.plan.submitted_jobs) for run in prepared.runs)
    where = prepared.hostname or "this machine"
    print(f"[dry-run] sweep {prepared.sweep_id}: would submit {jobs} job(s) for {len(prepared.runs)} run(s) on {where}")
    for run in prepared.runs:
        print(f"[dry-run] run {run.plan.run_id}: {run.label()}")
        print_run_dry_run(run, str(Path(stage_dir) / run.plan.run_id) if stage_dir else None)
    return 0


def print_run_dry_run(run: PreparedRun, stage_dir: str | None) -> int:
    from nemo_gym.orchestration.library import staged_directory

    plan = run.plan
    where = plan.hostname or "this machine"
    print(
        f"[dry-run] would submit {len(plan.submitted_jobs)} job(s) for {len({job.benchmark for job in plan.jobs})} benchmark(s) on {where} into {plan.run_dir}"
        + (f" (run by the shared job of run {plan.host[0]})" if plan.host is not None else "")
    )
    names = [f"{owner}.env.{key}" for owner, key in plan.secrets.values()]
    if plan.otel_token_env:
        names.append(f"the OTel token (${plan.otel_token_env})")
    if names:
        print(f"[dry-run] read at submit time, passed in the submission's environment: {', '.join(names)}")
    alike: dict[str, list[str]] = {}
    for job in plan.submitted_jobs:
        if job.node_sharing:
            alike.setdefault(job.node_sharing, []).append(job.unit)
    for sharing, units in alike.items():
        print(f"[dry-run] {some_of(units)}: {sharing}")
    if stage_dir:
        root = staged_directory(run.staged, stage_dir)
        print(f"[dry-run] staged run directory written to {root}")
        return 0
    for job in plan.submitted_jobs:
        for name, text in run.staged.job_documents(job.benchmark):
            print("=" * 72)
            print(f"[dry-run] {job.benchmark}: {job.job_dir}/{name}")
            print("=" * 72)
            sys.stdout.write(text)
    return 0


def report(submission: Submission, as_json: bool) -> int:
    """Each run and its jobs (a sweep's runs under the sweep's line, each named by its values);
    then what failed. 1 when the connection broke or a job could not be queued."""
    from nemo_gym.orchestration.display import terminal
    from nemo_gym.orchestration.library import job_kind, values_label

    sweep = submission.sweep
    if as_json and not submission.interrupted:
        if sweep is None:
            sys.stdout.write(submission.records[0].dumps())
        else:
            runs = [json.loads(record.dumps()) for record in submission.records]
            print(json.dumps({**json.loads(sweep.dumps()), "records": runs}, indent=2))
    else:
        if sweep is not None:
            print(f"Sweep {sweep.sweep_id}: {len(submission.records)} runs over {', '.join(sweep.swept)}")
        for record in submission.records:
            values = f" ({values_label(record.sweep_values)})" if sweep is not None else ""
            print(f"Run {record.gym_job_id}{values}: {record.run_dir}")
            kind = job_kind(record)
            for job in record.units:
                if job.job_id:
                    print(f"  submitted {job.benchmark} -> {kind} {job.job_id}")
                elif job.fed_by:
                    print(f"  submitted {job.benchmark} -> queued by {terminal(job.fed_by)} as that one starts")
                else:
                    print(f"  failed {job.benchmark}: {job.error}")
        fed = [job for record in submission.records for job in record.units if job.fed_by]
        if fed:
            lanes = sum(1 for record in submission.records for job in record.units if job.job_id)
            print(
                f"The site's limits let {lanes} of these jobs be queued at once: they run in {lanes} lanes, "
                f"each job queuing the next of its lane as it starts ({len(fed)} wait their turn)"
            )
    if submission.adopted:
        print(f"note: {submission.adopted}", file=sys.stderr)
    if submission.interrupted:
        print(f"error: {submission.interrupted}", file=sys.stderr)
        return 1
    if submission.failed:
        print(f"error: {failed_line(submission)}", file=sys.stderr)
        return 1
    return 0


def failed_line(submission: Submission) -> str:
    failed = submission.failed
    if submission.sweep is None:
        return f"{len(failed)} benchmark(s) failed to submit: {', '.join(job.benchmark for _, job in failed)}"
    return (
        f"{len(failed)} job(s) failed to submit: {', '.join(f'{job.benchmark} of {r.gym_job_id}' for r, job in failed)}"
    )
