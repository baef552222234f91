"""``gym eval export``: run or rerun a run's exports from here (each export once unless --force)."""

from __future__ import annotations

import argparse

from nemo_gym.orchestration.cli.common import add_run_selector
from nemo_gym.orchestration.display import echo


def register(verbs: argparse._SubParsersAction) -> None:
    p = verbs.add_parser("export", help="run or rerun a run's exports (MLflow, W&B, table)")
    add_run_selector(p)
    p.add_argument("--to", action="append", default=[], metavar="NAME", help="only this exporter (repeatable)")
    p.add_argument("--force", action="store_true", help="export again even where an export is done")
    p.add_argument("--trust-destination", action="append", default=[], metavar="DEST",
                   help="send credentials to this destination (a tracking URI, a W&B entity/project) though the "
                        "local index does not record it for the run, e.g. a colleague's run directory (repeatable)")  # fmt: skip
    p.set_defaults(handler=run_export)


def run_export(args: argparse.Namespace) -> int:
    from nemo_gym.orchestration.library import export
    from nemo_gym.orchestration.record import find_run

    results = export(find_run(args.run, args.last), args.to, args.force, trusted=args.trust_destination)
    for result in results:
        for line in result.lines:
            echo(f"  {result.benchmark}: {line}", err=result.failed)
    return 1 if any(result.failed for result in results) else 0
