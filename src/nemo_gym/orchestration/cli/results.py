"""``gym eval results``: every benchmark's aggregate metrics of a run in one table."""

from __future__ import annotations

import argparse

from nemo_gym.orchestration.cli.common import add_run_selector, table


def register(verbs: argparse._SubParsersAction) -> None:
    p = verbs.add_parser("results", help="every benchmark's aggregate metrics of a run")
    add_run_selector(p)
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=run_results)


def run_results(args: argparse.Namespace) -> int:
    from nemo_gym.orchestration.library import results
    from nemo_gym.orchestration.record import find_run
    from nemo_gym.orchestration.results import headline, results_json

    run = results(find_run(args.run, args.last))
    if args.json:
        print(results_json(run.record, run.benchmarks))
        return 0
    rows = []
    for r in run.benchmarks:
        metrics = ", ".join(f"{k}={v:.4g}" for k, v in headline(r.metrics)) if not r.missing else r.missing
        rows.append([r.benchmark, run.states.get(r.benchmark, "?"), str(r.samples), metrics])
    print(f"Run {run.record.gym_job_id}: {run.record.run_dir}")
    print(table(["BENCHMARK", "STATE", "SAMPLES", "METRICS"], rows))
    for r in run.benchmarks:
        for path in r.files:
            print(f"  {r.benchmark}: {path}")
    return 0 if run.complete else 1
