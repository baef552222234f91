"""``gym eval compare``: did a candidate run score better than a base run, benchmark by benchmark,
beyond chance? Paired over the tasks both runs have."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from nemo_gym.orchestration.cli.common import CORRECTIONS, add_json_flag, add_metric_option, p_text, table
from nemo_gym.orchestration.display import echo

if TYPE_CHECKING:
    from nemo_gym.orchestration.library import BenchmarkComparison, RunComparison

# Improved/regressed tasks named in the text; --json lists them all.
TASKS_NAMED = 20
# --fail-on-regression: a significant regression; a benchmark that cannot be compared (the gate
# fails closed). A regression wins when there are both: it is a finding, the other an absence.
EXIT_REGRESSED = 1
EXIT_UNCOMPARABLE = 3


def register(verbs: argparse._SubParsersAction) -> None:
    p = verbs.add_parser(
        "compare",
        help="compare a candidate run with a base run, per benchmark",
        description="Per benchmark in both runs: the metric in each, the delta, the tasks that improved "
        "and regressed, a 95% CI of the delta from the per-task differences, the raw p-value and the p-value "
        "adjusted over the benchmarks compared (the family), the smallest drop the pair can detect, and a "
        "verdict read off the adjusted p.",
    )
    p.add_argument("base", metavar="BASE", help="run id (or a unique part), or a run directory")
    p.add_argument("candidate", nargs="?", metavar="CANDIDATE", help="the same; omit it with --last")
    p.add_argument("--last", action="store_true", help="the candidate is the most recent run")
    add_metric_option(p)
    add_json_flag(p, "the comparison (every flipped task, each benchmark's statistics)")
    p.add_argument(
        "--fail-on-regression",
        action="store_true",
        help=f"exit {EXIT_REGRESSED} when any benchmark regressed significantly; else exit "
        f"{EXIT_UNCOMPARABLE} when any cannot be compared (missing from either run, not started, "
        f"not complete in either, no task scored in both, inputs that differ)",
    )
    p.add_argument(
        "--correction",
        choices=CORRECTIONS,
        default="holm",
        help="how the benchmarks' p-values are adjusted together: holm (default: the chance of any false "
        "alarm over the suite at most 5%%, for CI decisions), bh (Benjamini-Hochberg: the expected share of "
        "false alarms at most 5%%, for exploring), none (each benchmark alone)",
    )
    p.add_argument(
        "--group-key",
        metavar="FIELD",
        help="a field of gym's rows naming a group of related tasks (e.g. a passage several questions share): "
        "each group is one unit of evidence, so the standard error, CI and test are clustered by group",
    )
    p.add_argument(
        "--allow-different-inputs",
        action="store_true",
        help="let a benchmark whose runs were asked different tasks (their materialized inputs' digests "
        "differ) decide the gate; it is flagged either way",
    )
    p.set_defaults(handler=run_compare)


def run_compare(args: argparse.Namespace) -> int:
    from nemo_gym.orchestration.errors import UserError
    from nemo_gym.orchestration.library import Correction, compare, select_run

    if (args.candidate is None) != args.last:
        raise UserError("compare needs two runs: gym eval compare BASE CANDIDATE, or gym eval compare BASE --last")
    outcome = compare(
        select_run(args.base),
        select_run(args.candidate, last=args.last),
        args.metric,
        allow_different_inputs=args.allow_different_inputs,
        correction=Correction(args.correction),
        group_key=args.group_key,
    )
    echo(outcome.to_json() if args.json else comparison_text(outcome))
    if not args.fail_on_regression:
        return 0
    code, verdict = gate(outcome)
    if not args.json:
        echo(f"regression gate: {verdict}")
    return code


def gate(outcome: RunComparison) -> tuple[int, str]:
    """The regression gate's exit code and its one-line verdict; it fails closed."""
    if outcome.regressed:
        return EXIT_REGRESSED, f"failed ({', '.join(outcome.regressed)} regressed)"
    blocked = sorted({u.benchmark for u in outcome.uncomparable})
    if blocked:
        return EXIT_UNCOMPARABLE, f"cannot decide ({', '.join(blocked)} cannot be compared; see above)"
    return 0, "passed"


def signed(value: float | None) -> str:
    return "-" if value is None else f"{value:+.4f}"


def plain(value: float | None) -> str:
    return "-" if value is None else f"{value:.4f}"


def row(b: BenchmarkComparison) -> list[str]:
    p = b.paired
    ci = f"[{signed(p.ci[0])}, {signed(p.ci[1])}]" if p.ci is not None else "-"
    return [
        b.benchmark,
        str(p.n),
        plain(p.base_mean),
        plain(p.candidate_mean),
        signed(p.delta),
        ci,
        p_text(p.p_value),
        p_text(b.p_for_verdict),
        plain(b.detectable_drop()),
        TEST_WORDS.get(p.test.value if p.test else "", "-"),
        f"{p.improved}/{p.regressed}",
        b.verdict,
    ]


TEST_WORDS = {
    "mcnemar-exact": "McNemar",
    "paired-t": "t",
    "clustered-t": "t (grouped)",
    "sign-flip permutation": "perm",
}


def family_line(outcome: RunComparison) -> str:
    """What the adjusted p and the detectable drop mean for this comparison, in one line."""
    family = max((b.family for b in outcome.benchmarks), default=0)
    how = {
        "holm": f"Holm over {family} benchmark(s): any false alarm in the suite at most 5%",
        "bh": f"Benjamini-Hochberg over {family} benchmark(s): expected share of false alarms at most 5%",
        "none": "none: each benchmark tested alone at 5%",
    }[outcome.correction.value]
    level = min((b.level for b in outcome.benchmarks), default=0.05)
    return (
        f"Adjusted P: {how}. DETECTABLE: the smallest change this pair finds 80% of the time "
        f"(two-sided, alpha {level:.3g})."
    )


def task_list(tasks: tuple[int, ...]) -> str:
    shown = ", ".join(map(str, tasks[:TASKS_NAMED]))
    return shown + (f", and {len(tasks) - TASKS_NAMED} more (--json lists all)" if len(tasks) > TASKS_NAMED else "")


def comparison_text(outcome: RunComparison) -> str:
    lines = [
        f"Base:      {outcome.base.record.gym_job_id} ({outcome.base.record.run_dir})",
        f"Candidate: {outcome.candidate.record.gym_job_id} ({outcome.candidate.record.run_dir})",
        f"Metric:    {outcome.metric} (mean over tasks; a task's rollouts averaged first; paired by task index)",
    ]
    headers = ["BENCHMARK", "TASKS", "BASE", "CANDIDATE", "DELTA", "95% CI", "P", "ADJ P", "DETECTABLE"]
    headers += ["TEST", "UP/DOWN", "VERDICT"]
    lines.append(table(headers, [row(b) for b in outcome.benchmarks]))
    if outcome.benchmarks:
        lines.append(family_line(outcome))
    for b in outcome.benchmarks:
        if b.paired.improved_tasks:
            lines.append(f"  {b.benchmark}: improved tasks {task_list(b.paired.improved_tasks)}")
        if b.paired.regressed_tasks:
            lines.append(f"  {b.benchmark}: regressed tasks {task_list(b.paired.regressed_tasks)}")
        lines += [f"  {b.benchmark}: {flag}" for flag in b.flags]
    if outcome.only_in_base:
        lines.append(f"Only in base (not compared): {', '.join(outcome.only_in_base)}")
    if outcome.only_in_candidate:
        lines.append(f"Only in candidate (not compared): {', '.join(outcome.only_in_candidate)}")
    lines += [f"Cannot be compared: {u.text()}" for u in outcome.uncomparable]
    return "\n".join(lines)
