"""``gym eval history``: every result in one store, read across runs, sweeps and users: the
leaderboard of checkpoints (in step order, or by time where none has a step) x benchmarks with the
suite mean, the best checkpoint per benchmark and over the suite; ``gym eval history import DIR...`` writes run directories' results into it."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

import nemo_gym.orchestration.verbs.history.words as words
from nemo_gym.orchestration.cli.common import add_json_flag, table, without_long_words
from nemo_gym.orchestration.display import echo

if TYPE_CHECKING:
    from nemo_gym.orchestration.library import History, HistoryImport

URL_HELP = (
    "the results store's database URL (default: $GYM_RESULTS_URL, else results.sqlite beside the local index); "
    "a team's: postgresql+psycopg://USER@HOST/DB"
)
# A model's path shown: a run of more non-blank characters by its two ends (--json has it whole).
MODEL_SHOWN = 80


def register(verbs: argparse._SubParsersAction) -> None:
    p = verbs.add_parser(
        "history",
        help="every run's results in one store: checkpoints x benchmarks, the best of each",
        description="The leaderboard of the results store: a row per checkpoint (in step order; by the time first "
        "submitted where none has a step), a column per benchmark (each cell the newest run's mean reward over tasks), the suite mean, and the best checkpoint "
        "per benchmark and over the suite. `gym eval history import DIR...` writes run directories into the store.",
    )
    p.add_argument("--results-url", metavar="URL", help=URL_HELP)
    p.add_argument("--model-prefix", metavar="PATH", help="only checkpoints whose model path starts with PATH")
    p.add_argument("--sweep", metavar="SWEEP_ID", help="only the runs of this sweep")
    p.add_argument("--benchmark", action="append", metavar="NAME", help="only this benchmark (repeatable)")
    p.add_argument(
        "--tag", action="append", metavar="TAG", help="only runs tagged TAG (job.tags; repeatable: all of them)"
    )
    shown = p.add_mutually_exclusive_group()
    add_json_flag(shown, "the matrix, the suite means and the best checkpoints")
    shown.add_argument("--csv", action="store_true", help="print the matrix as CSV (a row per checkpoint)")
    p.set_defaults(handler=show_history)
    actions = p.add_subparsers(dest="history_action", metavar="import")
    imported = actions.add_parser(
        "import",
        help="write run directories' results into the store",
        description="Each run directory's finished benchmarks read (as gym eval results DIR reads them) and "
        "written into the store, replacing what an earlier import of the same run, benchmark and attempt wrote. "
        "A directory that cannot be read is refused on one line, and the others are imported. Exits 1 when any is refused.",
    )
    imported.add_argument("directories", nargs="+", metavar="DIR", help="a run's directory (<output_path>/<run id>)")
    # Given before or after `import` alike: unset here, it leaves the value given before it.
    imported.add_argument("--results-url", metavar="URL", default=argparse.SUPPRESS, help=URL_HELP)
    imported.set_defaults(handler=import_directories)


def import_directories(args: argparse.Namespace) -> int:
    from nemo_gym.orchestration.library import import_runs

    report = import_runs(args.directories, args.results_url)
    echo(import_text(report))
    for line in report.refused:  # a directory named by 100,000 characters is named by its two ends
        echo(f"refused {without_long_words(line)}", err=True)
    return 1 if report.refused else 0


def import_text(report: HistoryImport) -> str:
    lines = [f"imported {without_long_words(line)}" for line in report.written]
    lines.append(f"{report.entries} entr{'y' if report.entries == 1 else 'ies'} written to {report.store}")
    return "\n".join(lines)


def show_history(args: argparse.Namespace) -> int:
    from nemo_gym.orchestration.library import history

    found = history(
        args.results_url, model_prefix=args.model_prefix, sweep=args.sweep, benchmarks=args.benchmark, tags=args.tag
    )
    if args.json:
        print(found.to_json())
    elif args.csv:
        echo(found.board.to_csv().rstrip("\n"))
    else:
        echo(history_text(found))
    return 0


def history_text(found: History) -> str:
    """The matrix, each benchmark's best cell starred, the best checkpoints named, the regressions
    (worded by ``verbs/history/words.py``, as the view's history page words them)."""
    board = found.board
    if not board.checkpoints:
        return words.EMPTY
    best = {b: board.best(b) for b in board.benchmarks}
    rows = [
        [
            _model(c.model),
            board.position_text(c),
            *(words.cell_text(c, b, best[b] is c) for b in board.benchmarks),
            words.value_text(c.suite_mean(board.benchmarks)),
        ]
        for c in board.checkpoints
    ]
    lines = [words.LEGEND, table(["MODEL", words.axis_header(board), *board.benchmarks, "SUITE"], rows)]
    if board.by_time or board.unnumbered:  # the step axis needs no word; the others say what orders them
        lines.insert(1, words.axis_text(board))
    if words.any_partial(board):
        lines.insert(1, words.PARTIAL_LEGEND)
    return "\n".join(lines + words.best_lines(board, _model) + regressions_lines(found))


def regressions_lines(found: History) -> list[str]:
    if not found.regressions:
        return [
            words.none_flagged(found.correction, found.alpha),
            f"  {words.detectable_text(found.detectable, _model)}",
        ]
    lines = [words.flagged_heading(found.correction, found.alpha)]
    return lines + [f"  {words.regression_text(r, _model)}" for r in found.regressions]


def _model(label: str) -> str:
    return without_long_words(label, MODEL_SHOWN)
