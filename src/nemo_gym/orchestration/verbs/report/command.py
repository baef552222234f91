"""``gym eval report``: runs (a sweep's, typically) as one self-contained HTML file."""

from __future__ import annotations

import argparse

from nemo_gym.orchestration.cli.common import add_metric_option, add_run_selector, selected


def register(verbs: argparse._SubParsersAction) -> None:
    p = verbs.add_parser(
        "report",
        help="an HTML report of runs or a sweep: the results table, a chart per benchmark, a comparison of two",
        description="One self-contained HTML file (no network fetches): the run x benchmark table with "
        "completeness (k/n) and GPU-hours, a chart per benchmark of its metric across the runs (a numeric swept "
        "value, such as a checkpoint's step, on the x axis), and the comparison of exactly two runs.",
    )
    add_run_selector(p, several=True)
    add_metric_option(p)
    p.add_argument("-o", "--output", required=True, metavar="FILE.html", help="where to write the report")
    p.set_defaults(handler=run_report)


def run_report(args: argparse.Namespace) -> int:
    from pathlib import Path

    from nemo_gym.orchestration.display import echo, terminal
    from nemo_gym.orchestration.errors import UserError
    from nemo_gym.orchestration.library import report

    out = Path(args.output).expanduser()
    if not out.parent.is_dir():
        raise UserError(f"-o {args.output}: no directory {out.parent}; create it or write the report elsewhere")
    records = selected(args).records
    html = report(records, args.metric)
    try:
        out.write_text(html, encoding="utf-8")
    except OSError as exc:
        raise UserError(f"-o {args.output}: cannot write the report ({exc.strerror or exc})") from None
    # The path is the user's own word, but shown as a label: a control character in it is escaped.
    echo(f"Report of {len(records)} run(s): {terminal(out.resolve())}")
    return 0
