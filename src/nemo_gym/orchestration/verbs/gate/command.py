"""``gym eval gate``: GO / NO-GO for a candidate against a base over a suite of benchmarks, from a
policy file (tiers, tolerated drops, a minimum of paired tasks)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from nemo_gym.orchestration.cli.common import CORRECTIONS, add_json_flag, p_text, print_problems, table
from nemo_gym.orchestration.display import echo

if TYPE_CHECKING:
    from nemo_gym.orchestration.library import GateOutcome

# gate.EXIT_CODES, for --help: registering a verb imports nothing of the library (a test holds
# them equal). 2: the gate could not run (a bad policy, a run not found).
EXIT_CODES_SHOWN = {"GO": 0, "NO-GO": 1, "INCONCLUSIVE": 3, "MISSING": 4}
EXIT_CANNOT_RUN = 2
# A policy file is a few dozen lines; anything far larger is not one.
POLICY_MAX_BYTES = 1 << 20

POLICY_HELP = (
    """\
policy file (YAML):
  metric: reward                 # the per-rollout metric (default reward)
  min_paired: 10                 # paired tasks a benchmark needs (default 10)
  supporting_breaches_allowed: 0 # supporting breaches tolerated before NO-GO (default 0)
  benchmarks:
    math:   {tier: critical, max_drop: 0.02}            # absolute drop tolerated
    code:   {tier: supporting, max_relative_drop: 0.05} # a fraction of the base value
    chat:   {tier: advisory}                            # reported, never decides
    errors: {tier: critical, direction: lower, metric: error_rate, min_paired: 30}

Per benchmark: pass (within its tolerated drop: the tighter of max_drop and max_relative_drop;
without either, no significant drop), breach (significant after adjusting over the critical and
supporting benchmarks, and the whole 95% CI of the delta past the tolerated drop), insufficient
evidence (fewer paired tasks than min_paired, a drop past the tolerance that the evidence does not
establish, or a tolerated drop smaller than the pair can detect), missing (not in both sides, not complete, or
asked different tasks). Verdict: NO-GO if a critical benchmark breaches (or
too many supporting ones), else MISSING if a critical or supporting one is missing, else
INCONCLUSIVE if one lacks evidence, else GO.

exit codes: """
    + ", ".join(f"{code} {verdict}" for verdict, code in EXIT_CODES_SHOWN.items())
    + (f", {EXIT_CANNOT_RUN} the gate could not run")
)


def register(verbs: argparse._SubParsersAction) -> None:
    p = verbs.add_parser(
        "gate",
        help="GO / NO-GO for a candidate against a base over a suite of benchmarks, from a policy file",
        description="Each benchmark the policy names is compared as gym eval compare does (tasks paired by "
        "index, a 95% CI from the per-task differences, McNemar's exact test or a paired t-test), the critical "
        "and supporting ones adjusted together, and judged by its tier, tolerated drop and the smallest drop "
        "the pair can detect.",
        epilog=POLICY_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("base", metavar="BASE", help="a run or a sweep (id or a unique part, or a run directory)")
    p.add_argument("candidate", metavar="CANDIDATE", help="the same, for the candidate")
    p.add_argument("--policy", required=True, metavar="FILE.yaml", help="the gate's policy (see below)")
    p.add_argument(
        "--correction",
        choices=CORRECTIONS,
        default="holm",
        help="how the critical and supporting benchmarks' p-values are adjusted together: holm (default: "
        "an unchanged model gets NO-GO by chance at most 5%% of the time), bh (Benjamini-Hochberg), none",
    )
    p.add_argument(
        "--group-key",
        metavar="FIELD",
        help="a field of gym's rows naming a group of related tasks (e.g. a passage several questions share): "
        "each group is one unit of evidence, so the standard error, CI and test are clustered by group",
    )
    add_json_flag(p, "the verdict and every benchmark's finding")
    p.set_defaults(handler=run_gate)


def run_gate(args: argparse.Namespace) -> int:
    from nemo_gym.orchestration.errors import UserError

    # Not 1 for what goes wrong: that is NO-GO, and a gate that could not run must not read as a decision.
    try:
        outcome = decide(args)
    except UserError as exc:
        print_problems(exc.problems)
        return EXIT_CANNOT_RUN
    except Exception as exc:  # noqa: BLE001 - whatever it is, it is no verdict
        print_problems([f"the gate could not run: {type(exc).__name__}: {' '.join(str(exc).split())[:300]}"])
        return EXIT_CANNOT_RUN
    echo(outcome.to_json() if args.json else gate_text(outcome, args))
    return outcome.exit_code


def decide(args: argparse.Namespace) -> GateOutcome:
    from nemo_gym.orchestration.library import Correction, gate, read_policy, select

    policy = read_policy(args.policy, POLICY_MAX_BYTES)
    base, candidate = select([args.base]).records, select([args.candidate]).records
    return gate(base, candidate, policy, correction=Correction(args.correction), group_key=args.group_key)


def number(value: float | None, signed: bool = False) -> str:
    if value is None:
        return "-"
    return f"{value:+.4f}" if signed else f"{value:.4f}"


def gate_text(outcome: GateOutcome, args: argparse.Namespace) -> str:
    rows = []
    for b in outcome.benchmarks:
        c = b.comparison
        p = c.paired if c else None
        ci = f"[{p.ci[0]:+.4f}, {p.ci[1]:+.4f}]" if p and p.ci else "-"
        gated = b.tier.value != "advisory"
        rows.append(
            [
                b.benchmark,
                b.tier.value,
                b.metric,
                str(p.n) if p else "0",
                number(p.base_mean if p else None),
                number(p.candidate_mean if p else None),
                number(p.delta if p else None, signed=True),
                ci,
                p_text(p.p_value if p else None),
                p_text(c.p_for_verdict if c and gated else None),
                number(c.detectable_drop() if c else None),
                number(b.tolerated_drop),
                b.finding.value,
            ]
        )
    headers = [
        "BENCHMARK",
        "TIER",
        "METRIC",
        "TASKS",
        "BASE",
        "CANDIDATE",
        "DELTA",
        "95% CI",
        "P",
        "ADJ P",
        "DETECTABLE",
        "TOLERATED",
        "FINDING",
    ]
    lines = [f"Gate: {args.candidate} against {args.base}, policy {args.policy}", table(headers, rows)]
    lines.append(
        f"ADJ P: {args.correction} over the critical and supporting benchmarks (advisory ones: raw p only). "
        "DETECTABLE: the smallest drop the pair finds 80% of the time at that level."
    )
    lines += [f"  {b.benchmark}: {b.why}" for b in outcome.benchmarks]
    if outcome.not_in_policy:
        lines.append(f"Not in the policy (not gated): {', '.join(outcome.not_in_policy)}")
    lines.append(f"Verdict: {outcome.verdict.value} ({outcome.why}); exit {outcome.exit_code}")
    return "\n".join(lines)
