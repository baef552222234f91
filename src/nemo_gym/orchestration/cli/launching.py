"""From a validated config to a dry run or a submission (the stages after validation)."""

from __future__ import annotations

import argparse
import sys

from nemo_gym.orchestration.api import SubmitConfig
from nemo_gym.orchestration.plan import build_plan
from nemo_gym.orchestration.render import render_run
from nemo_gym.orchestration.runid import new_run_id
from nemo_gym.orchestration.stage import write_staged


def submit_or_dry_run(config: SubmitConfig, args: argparse.Namespace) -> int:
    if config.otel.enabled:
        from nemo_gym.orchestration.otel import validate_destination

        validate_destination(config)
    plan = build_plan(config, new_run_id())
    staged = render_run(config, plan)
    if args.dry_run:
        return _print_dry_run(staged, args.stage_dir)
    from nemo_gym.orchestration.cli.submitting import submit_staged

    return submit_staged(config, staged, args)


def _print_dry_run(staged, stage_dir: str | None) -> int:
    plan = staged.plan
    where = plan.hostname or "this machine"
    print(f"[dry-run] would submit {len(plan.submitted_jobs)} job(s) for {len(plan.jobs)} benchmark(s) on {where} into {plan.run_dir}")
    names = [f"{owner}.env.{key}" for owner, key in plan.secrets.values()]
    if staged.otel_token_env:
        names.append(f"the OTel token (${staged.otel_token_env})")
    if names:
        print(f"[dry-run] read at submit time, passed in the submission's environment: {', '.join(names)}")
    if stage_dir:
        root = write_staged(staged, stage_dir)
        print(f"[dry-run] staged run directory written to {root}")
        return 0
    for job in plan.submitted_jobs:
        print("=" * 72)
        print(f"[dry-run] {job.benchmark}: {job.job_dir}/job.sh")
        print("=" * 72)
        sys.stdout.write(staged.job_script(job.benchmark))
    return 0
