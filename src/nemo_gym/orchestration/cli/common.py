"""What the verbs share: choosing a run (or a sweep), plain tables."""

from __future__ import annotations

import argparse

RUN_HELP = "run id or sweep id (or a unique part of one), or a run's directory (default: your last submission, as --last)"


def add_run_selector(p: argparse.ArgumentParser) -> None:
    p.add_argument("run", nargs="?", help=RUN_HELP)
    p.add_argument("--last", action="store_true", help="your most recent submission: this shell session's, else yours on this machine (a sweep when it was one)")


def table(headers: list[str], rows: list[list[str]]) -> str:
    """Columns of labels, each shown on one line with its control characters escaped."""
    from nemo_gym.orchestration.display import terminal

    headers = [terminal(h) for h in headers]
    rows = [[terminal(cell) for cell in row] for row in rows]
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths)).rstrip()]
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in rows]
    return "\n".join(lines)


def run_and_benchmarks(args: argparse.Namespace, names: list[str]) -> tuple[str | None, list[str]]:
    """With --last there is no RUN argument: the first positional is a benchmark."""
    if args.last and args.run is not None:
        return None, [args.run, *names]
    return (None if args.last else args.run), names
