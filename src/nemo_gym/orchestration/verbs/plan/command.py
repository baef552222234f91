"""``gym eval plan``: before spending, how many tasks and repeats each benchmark needs for a
comparison to detect a drop of a given size, and what that costs, from an earlier (pilot) run."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING

from nemo_gym.orchestration.cli.common import add_json_flag, add_metric_option, number_in, table
from nemo_gym.orchestration.display import echo

if TYPE_CHECKING:
    from nemo_gym.orchestration.library import DetectionTarget, SamplePlan

# sample_size's defaults, for --help: registering a verb imports nothing of the library.
DEFAULT_CORRELATION = 0.5
DEFAULT_MAX_REPEATS = 64


def register(verbs: argparse._SubParsersAction) -> None:
    p = verbs.add_parser(
        "plan",
        help="tasks x repeats each benchmark needs to detect a drop, and what it costs, from an earlier run",
        description="From an earlier run of the benchmarks (a pilot, with at least two repeats to plan repeats), "
        "or a base and a candidate run (their per-task differences), the tasks x repeats each benchmark needs "
        "for a paired comparison to detect a drop of --detect with --power at alpha over the benchmarks judged "
        "together (as compare and gate judge them), and the GPU-hours that costs (the run's, scaled by rollouts: "
        "at most, since start-up does not grow).",
    )
    p.add_argument("base", metavar="RUN", help="the pilot run (id or a unique part, or its directory)")
    p.add_argument("candidate", nargs="?", metavar="CANDIDATE", help="a second run: plan from the pair's differences")
    p.add_argument(
        "--detect",
        required=True,
        type=number_in(0, 1e9, open_low=True),
        metavar="DROP",
        help="the smallest drop to detect, in the metric's units (e.g. 0.02)",
    )
    p.add_argument("--power", type=number_in(0, 1, open_low=True, open_high=True), default=0.8, help="default 0.8")
    p.add_argument("--alpha", type=number_in(0, 1, open_low=True, open_high=True), default=0.05, help="default 0.05")
    p.add_argument(
        "--family",
        type=number_in(0, 100_000, integer=True),
        default=0,
        metavar="N",
        help="benchmarks judged at once (the level is alpha/N); default: as many as the run has",
    )
    p.add_argument(
        "--correlation",
        type=number_in(0, 1),
        default=DEFAULT_CORRELATION,
        help="with one run: how alike two checkpoints' per-task pass rates are (default 0.5)",
    )
    p.add_argument(
        "--max-repeats",
        type=number_in(1, 10_000, integer=True),
        default=DEFAULT_MAX_REPEATS,
        metavar="K",
        help="the most repeats to plan (default 64)",
    )
    add_metric_option(p)
    add_json_flag(p, "each benchmark's plan")
    p.set_defaults(handler=run_plan)


def run_plan(args: argparse.Namespace) -> int:
    from nemo_gym.orchestration.library import DetectionTarget, plan_samples, select_run

    records = [select_run(args.base)] + ([select_run(args.candidate)] if args.candidate else [])
    target = DetectionTarget(
        drop=args.detect,
        power=args.power,
        alpha=args.alpha,
        family=args.family,
        correlation=args.correlation,
        max_repeats=args.max_repeats,
    )
    plans = plan_samples(records, target, args.metric)
    family = args.family or len(plans)
    if args.json:
        echo(json.dumps({"target": {**target.__dict__, "family": family}, "benchmarks": [as_dict(p) for p in plans]}))
    else:
        echo(plan_text(plans, target, family, paired=len(records) == 2))
    return 0


def as_dict(p: SamplePlan) -> dict:
    return {
        "benchmark": p.benchmark,
        "tasks": p.tasks,
        "repeats": p.repeats,
        "rollouts": p.rollouts,
        "detectable_now": p.detectable_now,
        "detectable_then": p.detectable_then,
        "gpu_hours_at_most": p.gpu_hours,
        "wall_seconds_at_most": p.wall_seconds,
        "note": p.note,
    }


def plan_text(plans: list[SamplePlan], target: DetectionTarget, family: int, *, paired: bool) -> str:
    from nemo_gym.orchestration.library import SOURCE_NONE, Usage, hours_text, wall_text

    def number(value: float | None) -> str:
        return "-" if value is None else f"{value:.4f}"

    rows = [
        [
            p.benchmark,
            number(p.detectable_now),
            "-" if p.tasks is None else f"{p.tasks} x {p.repeats}",
            number(p.detectable_then),
            hours_text(Usage(None, p.gpu_hours, None, SOURCE_NONE)),
            wall_text(Usage(p.wall_seconds, None, None, SOURCE_NONE)),
        ]
        for p in plans
    ]
    basis = (
        "the pair's per-task differences" if paired else f"one run (task correlation {target.correlation:g} assumed)"
    )
    lines = [
        f"Plan: detect a drop of {target.drop:g} with {target.power:.0%} power at alpha {target.alpha:g}/{family} "
        f"({family} benchmark(s) judged together), from {basis}",
        table(["BENCHMARK", "DETECTABLE NOW", "TASKS x REPEATS", "DETECTABLE THEN", "GPU-HOURS <=", "WALL <="], rows),
    ]
    lines += [f"  {p.benchmark}: {p.note}" for p in plans if p.note]
    return "\n".join(lines)
