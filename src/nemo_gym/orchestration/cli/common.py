"""What the verbs share: the arguments that name runs (RUN, RUN..., --last) and which runs they
select, plain tables."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from nemo_gym.orchestration.library import Selection

RUN_HELP = (
    "run id or sweep id (or a unique part of one), or a run's directory (default: your last submission, as --last)"
)
LAST_HELP = "your most recent submission: this shell session's, else yours on this machine (a sweep when it was one)"
RUNS_HELP = "run id or sweep id (or a unique part of one), or a run directory"
LAST_AFTER_RUNS_HELP = (
    "your most recent submission, after any RUN given (this shell session's, else yours on this machine)"
)


METRIC_NAME_LIMIT = 200  # characters: gym's metric names are short keys; a longer one is a mistake


def add_metric_option(p: argparse.ArgumentParser, what: str = "the per-rollout metric") -> None:
    """--metric NAME, one spelling for every verb that shows a metric: a name of printable
    characters, bounded, so that a wrong one is refused in one short line and never echoed whole."""
    p.add_argument("--metric", metavar="NAME", type=metric_name, help=f"{what} (default: reward)")


def metric_name(value: str) -> str:
    if not value or len(value) > METRIC_NAME_LIMIT or not value.isprintable():
        raise argparse.ArgumentTypeError(
            f"a metric is named by 1 to {METRIC_NAME_LIMIT} printable characters, such as reward; "
            f"gym eval results --json lists a run's"
        )
    return value


def add_json_flag(p: argparse.ArgumentParser, what: str) -> None:
    p.add_argument("--json", action="store_true", help=f"print {what} as one JSON document (for scripts)")


def add_run_selector(p: argparse.ArgumentParser, *, several: bool = False, run_help: str = RUN_HELP) -> None:
    """RUN (or, ``several``, RUN...) and --last: a verb that takes runs."""
    if several:
        p.add_argument("runs", nargs="*", metavar="RUN", help=RUNS_HELP)
        p.add_argument("--last", action="store_true", help=LAST_AFTER_RUNS_HELP)
    else:
        p.add_argument("run", nargs="?", help=run_help)
        p.add_argument("--last", action="store_true", help=LAST_HELP)


def run_names(args: argparse.Namespace) -> list[str]:
    """The runs the arguments name; with --last and one RUN place, none (its value is ``after_run``'s)."""
    if hasattr(args, "runs"):
        return list(args.runs)
    return [args.run] if args.run is not None and not args.last else []


def selected(args: argparse.Namespace) -> Selection:
    from nemo_gym.orchestration.library import select

    return select(run_names(args), args.last)


def after_run(args: argparse.Namespace, values: list[str]) -> list[str]:
    """The positionals after RUN: with --last there is no RUN argument, so a value in its place is the first of them."""
    if args.last and args.run is not None:
        return [args.run, *values]
    return values


def run_prefix(selection: Selection) -> list[str]:
    """What leads each run's lines: a sweep's run's label (``/ckpt/step-1000: ``); one run's lines
    stay as they always were."""
    if selection.sweep is None:
        return ["" for _ in selection.records]
    from nemo_gym.orchestration.library import run_labels

    return [f"{label}: " for label in run_labels(selection.records).labels]


def table(headers: list[str], rows: list[list[str]]) -> str:
    """Columns of labels, each shown on one line with its control characters escaped."""
    from nemo_gym.orchestration.display import terminal

    headers = [terminal(h) for h in headers]
    rows = [[terminal(cell) for cell in row] for row in rows]
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths)).rstrip()]
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in rows]
    return "\n".join(lines)


# The library's DEFAULT_MAX_ATTEMPTS, for --help: registering a verb imports nothing of the
# library, so that a broken import is still the one error line main promises (a test holds them equal).
MAX_ATTEMPTS_SHOWN = 3


def add_max_attempts(p: argparse.ArgumentParser) -> None:
    """--max-attempts N: the recovery budget (info shows the plan under it, resubmit acts on it)."""
    p.add_argument(
        "--max-attempts",
        type=number_in(1, 100, integer=True),
        metavar="N",
        help=f"attempts a benchmark may have, its first job included, before resubmit stops (default {MAX_ATTEMPTS_SHOWN})",
    )


def max_attempts(args: argparse.Namespace) -> int:
    from nemo_gym.orchestration.library import DEFAULT_MAX_ATTEMPTS

    return DEFAULT_MAX_ATTEMPTS if args.max_attempts is None else args.max_attempts


def number_in(low: float, high: float, *, integer: bool = False, open_low: bool = False, open_high: bool = False):  # noqa: ANN201
    """An argparse type: a finite number in [low, high] (or open at either end), else argparse's
    one-line usage error naming the option (never NaN, inf or a traceback)."""
    import math

    left, right = ("(" if open_low else "["), (")" if open_high else "]")
    wanted = f"{'an integer' if integer else 'a number'} in {left}{low:g}, {high:g}{right}"

    def parse(text: str) -> float | int:
        try:
            value: float | int = int(text) if integer else float(text)
        except (ValueError, OverflowError):
            raise argparse.ArgumentTypeError(f"{text[:40]!r} is not {wanted}") from None
        if (
            not math.isfinite(value)
            or value < low
            or value > high
            or (open_low and value == low)
            or (open_high and value == high)
        ):
            raise argparse.ArgumentTypeError(f"{text[:40]!r} is not {wanted}")
        return value

    parse.__name__ = "number"
    return parse


def print_problems(problems: list[str]) -> None:
    """Each problem as one ``error:`` line on stderr, escaped and with long words cut."""
    from nemo_gym.orchestration.display import terminal

    for line in problems:
        print(f"error: {without_long_words(terminal(line))}", file=sys.stderr)


def without_long_words(line: str, limit: int = 160) -> str:
    """A line with each run of more than ``limit`` non-blank characters cut in its middle: a name or
    path given 100,000 characters long is named by its two ends, and the line still says why."""
    import re

    return re.sub(
        rf"\S{{{limit + 1},}}",
        lambda m: f"{m.group()[: limit // 2]}...({len(m.group())} characters)...{m.group()[-limit // 4 :]}",
        line,
    )


# stats.Correction's words, for --help: registering a verb imports nothing of the library.
CORRECTIONS = ("holm", "bh", "none")


def p_text(value: float | None) -> str:
    return "-" if value is None else f"{value:.3g}"
