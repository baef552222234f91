"""``gym eval export``: run or rerun a run's exports (or every run's of a sweep) from here (each
export once unless --force)."""

from __future__ import annotations

import argparse

from nemo_gym.orchestration.cli.common import add_run_selector, run_prefix, selected
from nemo_gym.orchestration.display import echo


def register(verbs: argparse._SubParsersAction) -> None:
    p = verbs.add_parser("export", help="run or rerun a run's exports (MLflow, W&B, table)")
    add_run_selector(p)
    p.add_argument(
        "--to",
        action="append",
        default=[],
        metavar="NAME",
        help="only this exporter: mlflow, wandb or table (repeatable); with a destination below, export there "
        "whatever the run was submitted with (a run submitted without job.export too)",
    )
    where = p.add_argument_group("a destination (export there, whatever the run was submitted with)")
    where.add_argument("--tracking-uri", metavar="URL", help="mlflow: the tracking server")
    where.add_argument("--experiment", metavar="NAME", help="mlflow: the experiment")
    where.add_argument("--project", metavar="NAME", help="wandb: the project")
    where.add_argument("--entity", metavar="NAME", help="wandb: the entity (team)")
    where.add_argument("--mode", choices=("online", "offline"), help="wandb: online or offline")
    where.add_argument("--dir", metavar="DIR", help="table: the directory of results.csv and results.json")
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


# Destination options -> (exporter, its setting).
DESTINATION_OPTIONS = {
    "tracking_uri": ("mlflow", "tracking_uri"),
    "experiment": ("mlflow", "experiment"),
    "project": ("wandb", "project"),
    "entity": ("wandb", "entity"),
    "mode": ("wandb", "mode"),
    "dir": ("table", "dir"),
}


def destination_settings(args: argparse.Namespace) -> dict[str, dict[str, str]]:
    """Exporter -> the settings the destination options give it; each option's exporter must be
    one --to names (said in one line otherwise)."""
    from nemo_gym.orchestration.errors import UserError

    settings: dict[str, dict[str, str]] = {}
    for option, (exporter, key) in DESTINATION_OPTIONS.items():
        value = getattr(args, option)
        if value is None:
            continue
        if exporter not in args.to:
            flag = "--" + option.replace("_", "-")
            raise UserError(f"{flag} is a setting of the {exporter} exporter; add --to {exporter}")
        settings.setdefault(exporter, {})[key] = value
    return settings


def run_export(args: argparse.Namespace) -> int:
    from nemo_gym.orchestration.library import export

    settings = destination_settings(args)
    selection = selected(args)
    runs = export(selection.records, args.to, args.force, trusted=args.trust_destination, settings=settings or None)
    for where, results in zip(run_prefix(selection), runs):
        for result in results:
            for line in result.lines:
                echo(f"  {where}{result.benchmark}: {line}", err=result.failed)
    return 1 if any(result.failed for results in runs for result in results) else 0
