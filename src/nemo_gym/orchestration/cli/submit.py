"""``gym eval submit``: compose, validate, then resolve-only, dry-run or submit."""

from __future__ import annotations

import argparse
import json
import sys


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

    data = compose_config(args.config, args.overrides)
    config, notes = validate_config(data)
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
    from nemo_gym.orchestration.cli.launching import submit_or_dry_run

    return submit_or_dry_run(config, args)
