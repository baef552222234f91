"""How fast `gym eval view` answers in a real browser: the index of many run directories, and a
benchmark's first page of samples from a huge rollouts.jsonl.

Builds RUNS copies of the real quickstart run (tests/data/quickstart-run) in a private index, one
of them with its rollouts padded to ROLLOUTS_MB (rows shaped like the real ones, a long response
each), serves them with the view (stdlib http.server, loopback) and loads the pages in Debian's
headless Chromium (playwright, the system binary), timing navigation to the `load` event. Against
it, in the same run: reading the file whole and parsing every row, as a viewer that loads a log
before showing it does (the old way: parse rollouts.jsonl by hand).

    .venv/bin/python benchmarks/view_timing.py [--runs 100] [--rollouts-mb 200] [--repeats 3]

Targets (issue #25): the index of 100 runs in under 3 s, the first page of 200 MB in under 1 s.
A benchmark, not a test: its figures vary with the machine's load.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO / "tests"))

from nemo_gym.orchestration import contract  # noqa: E402
from nemo_gym.orchestration.record import load_record, write_local_index  # noqa: E402

REAL_RUN = REPO / "tests" / "data" / "quickstart-run"
BENCH = "answer-judge"
CHROMIUM = "/usr/bin/chromium"


def make_runs(root: Path, count: int) -> list[str]:
    """``count`` copies of the real run, each indexed under an id of its own."""
    ids = []
    for i in range(count):
        run_dir = root / f"run-{i:04d}"
        shutil.copytree(REAL_RUN, run_dir)
        record = load_record((run_dir / contract.RECORD_FILE).read_text())
        run_id = f"gym-job-20261201T{i // 3600:02d}{i // 60 % 60:02d}{i % 60:02d}Z-{i:06x}"
        jobs = [b.model_copy(update={"job_dir": str(run_dir / b.benchmark)}) for b in record.benchmarks]
        record = record.model_copy(update={"gym_job_id": run_id, "run_dir": str(run_dir), "benchmarks": jobs})
        (run_dir / contract.RECORD_FILE).write_text(record.dumps())
        write_local_index(record)
        ids.append(run_id)
    return ids


def pad_rollouts(run_dir: Path, megabytes: int, padding_bytes: int) -> int:
    """The run's rollouts grown to ``megabytes`` by repeating its real rows (~6 KB each), each a
    new task, its response padded by ``padding_bytes``; returns the rows written."""
    path = run_dir / BENCH / contract.ROLLOUTS_FILE
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    padding = " and so on" * (padding_bytes // 10)
    written = 0
    with open(path, "w") as out:
        while out.tell() < megabytes * 1_000_000:
            row = dict(rows[written % len(rows)])
            row["_ng_task_index"] = written
            row["response"] = json.loads(json.dumps(row["response"]))
            row["response"]["output"][0]["content"][0]["text"] += padding
            out.write(json.dumps(row) + "\n")
            written += 1
    (run_dir / BENCH / contract.MATERIALIZED_INPUTS_FILE).unlink(missing_ok=True)
    return written


def load_seconds(page, url: str) -> float:
    start = time.perf_counter()
    page.goto(url, wait_until="load")
    return time.perf_counter() - start


WHOLE_FILE = """
import json, resource, sys, time
start = time.perf_counter()
with open(sys.argv[1]) as fh:
    rows = [json.loads(line) for line in fh]
first = rows[:50]
print(time.perf_counter() - start, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


def whole_file(path: Path) -> tuple[float, float]:
    """The old way, in a process of its own: every row parsed before the first is shown.
    Returns (seconds, peak resident MB)."""
    out = subprocess.run([sys.executable, "-c", WHOLE_FILE, str(path)], capture_output=True, text=True, check=True)
    seconds, max_rss_kb = out.stdout.split()
    return float(seconds), int(max_rss_kb) / 1024


def server_peak_mb() -> float:
    """This process's peak resident memory (it ran the view's server): what paging cost."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--rollouts-mb", type=int, default=200)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--padding-bytes", type=int, default=400, help="added to each real row's response")
    args = ap.parse_args()

    from playwright.sync_api import sync_playwright

    from nemo_gym.orchestration.library import Viewer, serve

    with tempfile.TemporaryDirectory(prefix="gym-view-timing-") as tmp:
        root = Path(tmp)
        os.environ["XDG_CACHE_HOME"] = str(root / "cache")
        ids = make_runs(root / "runs", args.runs)
        big_dir = root / "runs" / "run-0000"
        rows = pad_rollouts(big_dir, args.rollouts_mb, args.padding_bytes)
        size = (big_dir / BENCH / contract.ROLLOUTS_FILE).stat().st_size
        server = serve(Viewer([]), "127.0.0.1", 0)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        base = f"http://127.0.0.1:{server.server_address[1]}"
        index, first_page = [], []
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
            page = browser.new_page()
            for _ in range(args.repeats):
                index.append(load_seconds(page, f"{base}/"))
                first_page.append(load_seconds(page, f"{base}/samples/{ids[0]}/{BENCH}"))
            page.goto(f"{base}/", wait_until="load")
            shown = page.inner_text("body")
            listed = sum(1 for run_id in ids if run_id in shown)
            browser.close()
        server.shutdown()
        served_mb = server_peak_mb()
        whole = [whole_file(big_dir / BENCH / contract.ROLLOUTS_FILE) for _ in range(args.repeats)]

    paged = statistics.median(first_page)
    print(
        f"index of {args.runs} run directories: {statistics.median(index):.2f} s median of {args.repeats} "
        f"(target < 3 s; {listed} run ids on the page)"
    )
    print(
        f"first page of samples from a {size / 1e6:.0f} MB rollouts.jsonl ({rows} rows): {paged:.3f} s median "
        f"(target < 1 s)"
    )
    whole_s = statistics.median(w[0] for w in whole)
    whole_mb = max(w[1] for w in whole)
    print(
        f"the old way, the file parsed whole first: {whole_s:.2f} s, {whole_mb:.0f} MB peak "
        f"-> the view is {whole_s / paged:.1f}x faster to its first page; the view's process "
        f"(server, index of {args.runs}, every page above) peaked at {served_mb:.0f} MB"
    )


if __name__ == "__main__":
    main()
