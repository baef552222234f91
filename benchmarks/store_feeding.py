"""What feeding the results store adds to `gym eval results` of a final run of 30 benchmarks.

Builds one run directory of BENCHMARKS benchmarks (the quickstart's real run copied, as
tests/store builds them), then times the real CLI in a subprocess, each case REPEATS times (the
median): the store off (GYM_RESULTS_URL=off); the run's first read with the SQLite store made and
migrated already (its entries written); its first read into a store not yet made (made, migrated
and written); and a read of a run already written (its marker read, no database opened).

    .venv/bin/python benchmarks/store_feeding.py [--benchmarks 30] [--repeats 7]

A benchmark, not a test: its figures vary with the machine's load.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO / "tests" / "store"))

from store_runs import run_directory, scoring  # noqa: E402

GYM = str(Path(sys.executable).with_name("gym"))


def read_seconds(run: Path, cache: Path, url: str | None) -> float:
    env = {**os.environ, "XDG_CACHE_HOME": str(cache)}
    env.pop("GYM_RESULTS_URL", None)
    if url is not None:
        env["GYM_RESULTS_URL"] = url
    started = time.perf_counter()
    done = subprocess.run([GYM, "eval", "results", str(run)], env=env, capture_output=True, text=True)
    took = time.perf_counter() - started
    if done.returncode != 0 or done.stderr:
        raise SystemExit(f"gym eval results failed ({done.returncode}): {done.stderr.strip()}")
    return took


def forget_written(cache: Path) -> None:
    for marker in (cache / "nemo-gym" / "jobs" / "observed").glob("*.json"):
        marker.unlink()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--benchmarks", type=int, default=30)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "runs").mkdir()
        rewards = {f"bench-{k:02d}": scoring(k % 13) for k in range(args.benchmarks)}
        run = run_directory(root / "runs", 1, rewards, model="/ckpt/feeding/step-100")
        cases: dict[str, list[float]] = {"off": [], "first, store made": [], "first, new store": [], "fed": []}
        for k in range(args.repeats):
            cases["off"].append(read_seconds(run, root / f"off-{k}", "off"))
            cases["first, new store"].append(read_seconds(run, root / f"new-{k}", None))
            kept = root / "kept"
            read_seconds(run, kept, None)  # the store made and the run written once
            forget_written(kept)
            cases["first, store made"].append(read_seconds(run, kept, None))
            cases["fed"].append(read_seconds(run, kept, None))
        off = statistics.median(cases["off"])
        print(f"gym eval results of 1 run x {args.benchmarks} benchmarks, median of {args.repeats}:")
        for name, seconds in cases.items():
            median = statistics.median(seconds)
            print(f"  {name:18} {median:6.3f} s  ({median - off:+.3f} s against off)")


if __name__ == "__main__":
    main()
