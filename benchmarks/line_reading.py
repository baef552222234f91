"""The rollout reader's line splitter on one huge row: the old way (the growing line re-copied for
every block read) against ``rollout_projection.lines_of`` (each block split once, a line joined
once at its end, a line over ``facts.MAX_ROW_BYTES`` dropped as it grows), and the whole projection of a
file holding one row over the bound.

    .venv/bin/python benchmarks/line_reading.py [--row-mb 60] [--over-mb 200]

Prints seconds and peak traced memory of each way, and the ratio. A benchmark, not a test: its
figures vary with the machine's load.
"""

from __future__ import annotations

import argparse
import io
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable, Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from nemo_gym.orchestration import facts, rollout_projection  # noqa: E402


def old_lines(fh: io.BufferedIOBase) -> Iterator[bytes]:
    """The splitter before issue 21: ``rest + block`` copies the whole line so far, per block."""
    rest = b""
    for block in iter(lambda: fh.read(1 << 20), b""):
        pieces = (rest + block).split(b"\n")
        rest = pieces.pop()
        yield from pieces
    yield rest


def measured(split: Callable[[io.BufferedIOBase], Iterator[object]], path: Path) -> tuple[float, int, int]:
    """(seconds, peak traced bytes, lines) of splitting the file."""
    tracemalloc.start()
    started = time.perf_counter()
    with path.open("rb") as fh:
        count = sum(1 for _ in split(fh))
    seconds = time.perf_counter() - started
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return seconds, peak, count


def one_row_file(where: Path, megabytes: int) -> Path:
    path = where / f"row-{megabytes}mb.jsonl"
    body = b"x" * (megabytes * 1024 * 1024)
    path.write_bytes(b'{"_ng_task_index": 0, "_ng_rollout_index": 0, "reward": 1, "text": "' + body + b'"}\n')
    return path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--row-mb", type=int, default=60, help="a row under the bound, split both ways")
    parser.add_argument("--over-mb", type=int, default=200, help="a row over the bound, projected whole")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = one_row_file(Path(tmp), args.row_mb)
        old = measured(old_lines, path)
        new = measured(rollout_projection.lines_of, path)
        print(f"one {args.row_mb} MB row, split into lines:")
        for name, (seconds, peak, count) in (("old", old), ("new", new)):
            print(f"  {name}: {seconds:7.3f} s, peak {peak / 2**20:7.1f} MiB, {count} line(s)")
        print(f"  ratio old/new: {old[0] / new[0]:.1f}x time, {old[1] / max(new[1], 1):.1f}x memory")
        over = one_row_file(Path(tmp), args.over_mb)
        old_over = measured(old_lines, over)
        tracemalloc.start()
        started = time.perf_counter()
        _names, packed = rollout_projection.project_file(str(over), "reward")
        seconds, peak = time.perf_counter() - started, tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        print(f"one {args.over_mb} MB row (over the {facts.MAX_ROW_BYTES // 2**20} MiB bound):")
        print(f"  old split alone: {old_over[0]:7.3f} s, peak {old_over[1] / 2**20:7.1f} MiB")
        print(
            f"  new projection:  {seconds:7.3f} s, peak {peak / 2**20:7.1f} MiB (the row refused unread; "
            f"{len(packed)} bytes sent back)"
        )
        print(f"  ratio old/new: {old_over[0] / seconds:.1f}x time")
    return 0


if __name__ == "__main__":
    sys.exit(main())
