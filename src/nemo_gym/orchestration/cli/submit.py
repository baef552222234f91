"""``gym eval submit``: compose, validate, then print the resolved config, dry-run or submit."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from nemo_gym.orchestration.library import Submission
    from nemo_gym.orchestration.render import StagedRun


def register(verbs: argparse._SubParsersAction) -> None:
    p = verbs.add_parser(
        "submit",
        help="validate a config and submit one job per benchmark",
        description="Validate CONFIG (with Hydra-style overrides) and submit one job per benchmark.",
    )
    p.add_argument("-c", "--config", required=True, metavar="CONFIG.yaml", help="the submit config")
    p.add_argument("overrides", nargs="*", metavar="key=value", help="Hydra overrides: a.b=v, +a.b=v, ~a.b")
    p.add_argument("--resolve-only", action="store_true", help="print the validated config and stop")
    p.add_argument("--dry-run", action="store_true", help="render everything, connect to nothing")
    p.add_argument("--stage-dir", metavar="DIR", help="with --dry-run: write the staged run directory here")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from nemo_gym.orchestration.compose import compose_config
    from nemo_gym.orchestration.validate import validate_config

    config, notes = validate_config(compose_config(args.config, args.overrides))
    for note in notes:
        print(f"warning: {note}", file=sys.stderr)
    if args.resolve_only:
        from nemo_gym.orchestration.resolved import resolved_config_dict
        from nemo_gym.orchestration.yamlio import dump_yaml

        resolved = resolved_config_dict(config)
        if args.json:
            print(json.dumps(resolved, indent=2))
        else:
            print(dump_yaml(resolved), end="")
        return 0
    from nemo_gym.orchestration.library import prepare, submit

    staged = prepare(config)
    if args.dry_run:
        return print_dry_run(staged, args.stage_dir)
    return report(submit(config, staged), args.json)


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
