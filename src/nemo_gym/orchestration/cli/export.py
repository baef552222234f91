"""``gym eval export``: run or rerun a run's exports (or every run's of a sweep) from here (each
export once unless --force)."""

from __future__ import annotations

import argparse

from nemo_gym.orchestration.cli.common import add_run_selector, run_prefix, selected
from nemo_gym.orchestration.display import echo


def register(verbs: argparse._SubParsersAction) -> None:
    p = verbs.add_parser("export", help="run or rerun a run's exports (MLflow, W&B, table)")
    add_run_selector(p)
    p.add_argument("--to", action="append", default=[], metavar="NAME", help="only this exporter (repeatable)")
    p.add_argument("--force", action="store_true", help="export again even where an export is done")
    p.add_argument(
        "--trust-destination",
        action="append",
        default=[],
        metavar="DEST",
        help="send credentials to this destination (a tracking URI, a W&B entity/project) though the "
        "local index does not record it for the run, e.g. a colleague's run directory (repeatable)",
    )
    p.set_defaults(handler=run_export)


def run_export(args: argparse.Namespace) -> int:
    from nemo_gym.orchestration.library import export

    selection = selected(args)
    runs = export(selection.records, args.to, args.force, trusted=args.trust_destination)
    for where, results in zip(run_prefix(selection), runs):
        for result in results:
            for line in result.lines:
                echo(f"  {where}{result.benchmark}: {line}", err=result.failed)
    return 1 if any(result.failed for results in runs for result in results) else 0
