"""``gym eval submit``: compose, validate, then print the resolved config, dry-run or submit."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from nemo_gym.orchestration.library import PreparedSweep, Submission, SweepSubmission
    from nemo_gym.orchestration.render import StagedRun


def register(verbs: argparse._SubParsersAction) -> None:
    p = verbs.add_parser(
        "submit",
        help="validate a config and submit one job per benchmark",
        description="Validate CONFIG (with Hydra-style overrides) and submit one job per benchmark.",
    )
    p.add_argument("-c", "--config", required=True, metavar="CONFIG.yaml", help="the submit config")
    p.add_argument("overrides", nargs="*", metavar="key=value", help="Hydra overrides: a.b=v, +a.b=v, ~a.b")
    p.add_argument("-m", "--multirun", action="store_true",
                   help="a sweep: one run per combination of key=a,b,c / range(...) / glob(...) values")  # fmt: skip
    p.add_argument("--resolve-only", action="store_true", help="print the validated config and stop")
    p.add_argument("--dry-run", action="store_true", help="render everything, connect to nothing")
    p.add_argument("--stage-dir", metavar="DIR", help="with --dry-run: write the staged run directory here")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from nemo_gym.orchestration.compose import compose_config
    from nemo_gym.orchestration.validate import validate_config

    if args.stage_dir and not args.dry_run:
        from nemo_gym.orchestration.errors import UserError

        raise UserError("--stage-dir writes what --dry-run renders; add --dry-run")
    if args.multirun:
        return run_sweep(args)
    config, notes = validate_config(compose_config(args.config, args.overrides))
    for note in notes:
        print(f"warning: {note}", file=sys.stderr)
    if args.resolve_only:
        from nemo_gym.orchestration.resolved import resolved_config_dict

        print_resolved(resolved_config_dict(config), args.json)
        return 0
    from nemo_gym.orchestration.library import prepare, submit

    staged = prepare(config)
    for note in staged.warnings:
        print(f"warning: {note}", file=sys.stderr)
    if args.dry_run:
        return print_dry_run(staged, args.stage_dir)
    return report(submit(config, staged), args.json)


def print_resolved(resolved: dict, as_json: bool) -> None:
    from nemo_gym.orchestration.yamlio import dump_yaml

    if as_json:
        print(json.dumps(resolved, indent=2))
    else:
        print(dump_yaml(resolved), end="")


def run_sweep(args: argparse.Namespace) -> int:
    """``-m``: every combination composed, validated and rendered first (a bad value in one stops
    everything), then printed, dry-run or submitted as one sweep."""
    from nemo_gym.orchestration.library import prepare_sweep, submit_sweep

    sweep = prepare_sweep(args.config, args.overrides)
    for note in sweep.warnings:
        print(f"warning: {note}", file=sys.stderr)
    if args.resolve_only:
        print_resolved_sweep(sweep, args.json)
        return 0
    if args.dry_run:
        return print_sweep_dry_run(sweep, args.stage_dir)
    return report_sweep(submit_sweep(sweep), args.json)


def print_resolved_sweep(sweep: PreparedSweep, as_json: bool) -> None:
    """Each combination's validated config: YAML documents headed by its values, or a JSON list."""
    from nemo_gym.orchestration.resolved import resolved_config_dict
    from nemo_gym.orchestration.yamlio import dump_yaml

    if as_json:
        runs = [{"values": m.values, "config": resolved_config_dict(m.config)} for m in sweep.members]
        print(json.dumps({"sweep_id": sweep.sweep_id, "runs": runs}, indent=2))
        return
    for i, member in enumerate(sweep.members, start=1):
        print(f"--- # run {i} of {len(sweep.members)}: {member.point.label()}")
        print(dump_yaml(resolved_config_dict(member.config)), end="")


def print_sweep_dry_run(sweep: PreparedSweep, stage_dir: str | None) -> int:
    """Every run of the sweep as --dry-run shows one; with ``stage_dir``, one directory per run in it."""
    from pathlib import Path

    jobs = sum(len(m.plan.submitted_jobs) for m in sweep.members)
    where = sweep.members[0].plan.hostname or "this machine"
    print(f"[dry-run] sweep {sweep.sweep_id}: would submit {jobs} job(s) for {len(sweep.members)} run(s) on {where}")
    for member in sweep.members:
        print(f"[dry-run] run {member.plan.run_id}: {member.point.label()}")
        print_dry_run(member.staged, str(Path(stage_dir) / member.plan.run_id) if stage_dir else None)
    return 0


def report_sweep(submission: SweepSubmission, as_json: bool) -> int:
    from nemo_gym.orchestration.library import backend_job_kind
    from nemo_gym.orchestration.record import values_label

    sweep = submission.sweep
    if as_json and not submission.interrupted:
        runs = [json.loads(run.record.dumps()) for run in submission.runs]
        print(json.dumps({**json.loads(sweep.dumps()), "records": runs}, indent=2))
    else:
        print(f"Sweep {sweep.sweep_id}: {len(submission.runs)} runs over {', '.join(sweep.swept)}")
        for run in submission.runs:
            record = run.record
            print(f"Run {record.gym_job_id} ({values_label(record.sweep_values)}): {record.run_dir}")
            kind = backend_job_kind(record)
            for job in record.benchmarks:
                print(f"  submitted {job.benchmark} -> {kind} {job.job_id}" if job.job_id else f"  failed {job.benchmark}: {job.error}")
    if submission.interrupted:
        print(f"error: {submission.interrupted}", file=sys.stderr)
        return 1
    if submission.failed:
        names = ", ".join(f"{job.benchmark} of {record.gym_job_id}" for record, job in submission.failed)
        print(f"error: {len(submission.failed)} job(s) failed to submit: {names}", file=sys.stderr)
        return 1
    return 0


def print_dry_run(staged: StagedRun, stage_dir: str | None) -> int:
    from nemo_gym.orchestration.library import staged_directory

    plan = staged.plan
    where = plan.hostname or "this machine"
    print(f"[dry-run] would submit {len(plan.submitted_jobs)} job(s) for {len(plan.jobs)} benchmark(s) on {where} into {plan.run_dir}")
    names = [f"{owner}.env.{key}" for owner, key in plan.secrets.values()]
    if plan.otel_token_env:
        names.append(f"the OTel token (${plan.otel_token_env})")
    if names:
        print(f"[dry-run] read at submit time, passed in the submission's environment: {', '.join(names)}")
    if stage_dir:
        root = staged_directory(staged, stage_dir)
        print(f"[dry-run] staged run directory written to {root}")
        return 0
    for job in plan.submitted_jobs:
        print("=" * 72)
        print(f"[dry-run] {job.benchmark}: {job.job_dir}/job.sh")
        print("=" * 72)
        sys.stdout.write(staged.job_script(job.benchmark))
    return 0


def report(submission: Submission, as_json: bool) -> int:
    from nemo_gym.orchestration.library import backend_job_kind

    record = submission.record
    if as_json and not submission.interrupted:
        sys.stdout.write(record.dumps())
    else:
        print(f"Run {record.gym_job_id}: {record.run_dir}")
        kind = backend_job_kind(record)
        for job in record.benchmarks:
            if job.job_id:
                print(f"  submitted {job.benchmark} -> {kind} {job.job_id}")
            else:
                print(f"  failed {job.benchmark}: {job.error}")
    if submission.interrupted:
        print(f"error: {submission.interrupted}", file=sys.stderr)
        return 1
    if submission.failed:
        names = ", ".join(b.benchmark for b in submission.failed)
        print(f"error: {len(submission.failed)} benchmark(s) failed to submit: {names}", file=sys.stderr)
        return 1
    return 0
