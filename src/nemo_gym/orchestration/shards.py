"""A sharded benchmark's node side: which prepared inputs a shard runs, and which shard merges.

A benchmark with ``shards: N`` is N jobs, each with its own deployment. Every shard has gym
prepare the benchmark's inputs as one job would (``gym dataset collate``), keeps its slice of them
(``slice``): the tasks whose index is ``k - 1`` modulo N, each row stamped with its task index as
gym would have numbered it over the whole file (after ``limit``), so that every shard's
(task, rollout) pairs are the ones the unsharded run has, and gym's aggregation unions the shards
(gym honours a stamped ``_ng_task_index``). It then runs ``gym eval run`` on that slice alone,
without aggregating.

A shard's driver takes its done marker away as it starts (``starting``) and writes it anew once it
has ended well (``finished``). The shard that then holds the lock in the benchmark's directory
merges, for as long as a merge is due: ``merge-due`` tells whether every shard is done and no
merge covered these done markers, keeping the markers it saw; the job runs ``gym eval aggregate``
over the shards' rollouts into the benchmark's own ``artifacts/``, ``gather`` puts the shards'
expected pairs and failure rows beside them, and ``merged`` records the markers ``merge-due``
saw (not those on disk by then: a shard that finished meanwhile is merged by the next round). A
shard that finds the lock held leaves the merge to its holder, which looks again before it lets
go.

Stdlib only, Python 3.8 syntax: staged into each shard's job as ``steps/shards.py`` beside
``steps/contract.py`` and run with the driver's ``python3``. The decisions are pure functions
(``task_index_of``, ``slice_lines``, ``merge_due``); ``main`` does the I/O.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Iterable, Iterator

from nemo_gym.orchestration import contract as c

TASK_INDEX_KEY = "_ng_task_index"

EXIT_DUE = 0
EXIT_NOT_DUE = 1
EXIT_USAGE = 2


class BadInput(ValueError):
    """A prepared input line that is not a JSON object: gym would refuse it too."""


# -- decisions -------------------------------------------------------------------------------------


def slice_lines(lines: Iterable[str], shard: int, count: int, limit: int | None = None) -> Iterator[str]:
    """The lines of the prepared inputs (as read, newline included) that shard ``shard`` of
    ``count`` runs, each carrying its task index. The index is gym's: a row's own, else the place
    of the first line like it among the lines without one (gym numbers identical rows alike); only
    the first ``limit`` lines count when ``limit`` is set (gym's ``limit``; 0 means none)."""
    if not 1 <= shard <= count:
        raise ValueError(f"shard {shard} is not one of 1..{count}")
    numbered: dict[str, int] = {}
    for number, line in enumerate(lines, start=1):
        if limit and number > limit:
            return
        row = _row(line, number)
        own = row.get(TASK_INDEX_KEY)
        if isinstance(own, int) and not isinstance(own, bool) and own >= 0:
            index = own
        else:
            index = numbered.setdefault(line, len(numbered))
            row[TASK_INDEX_KEY] = index
            line = json.dumps(row, ensure_ascii=False) + "\n"
        if index % count == shard - 1:
            yield line if line.endswith("\n") else line + "\n"


def _row(line: str, number: int) -> dict:
    try:
        row = json.loads(line)
    except ValueError as exc:
        raise BadInput(f"line {number} of the prepared inputs is not JSON ({exc})") from None
    if not isinstance(row, dict):
        raise BadInput(f"line {number} of the prepared inputs is not a JSON object")
    return row


def merge_due(done: dict[int, str], count: int, merged: str | None) -> bool:
    """Whether the shard that has just finished merges: every shard 1..count has a done marker
    (``done``: shard -> its marker's text), and the last merge (``merged``: the markers it
    covered, as ``done_text`` writes them; None when there was none) did not cover these."""
    if any(k not in done for k in range(1, count + 1)):
        return False
    return merged != done_text(done, count)


def done_text(done: dict[int, str], count: int) -> str:
    """The done markers of shards 1..count, one line each: what a merge covered."""
    return "".join(f"{k}\t{done[k]}\n" for k in range(1, count + 1))


# -- I/O -------------------------------------------------------------------------------------------


def _markers(bench_dir: str) -> str:
    return os.path.join(bench_dir, c.SHARDS_MARKERS_DIR)


def _done_path(bench_dir: str, shard: int) -> str:
    return os.path.join(_markers(bench_dir), f"{shard}{c.SHARD_DONE_SUFFIX}")


def _read(path: str, limit: int = 4096) -> str | None:
    try:
        with open(path, "rb") as fh:
            return fh.read(limit).decode("utf-8", "replace")
    except OSError:
        return None


def _write_atomically(path: str, text: str) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    partial = f"{path}.partial-{os.getpid()}"
    with open(partial, "w") as fh:
        fh.write(text)
    os.replace(partial, path)


def read_done(bench_dir: str, count: int) -> dict[int, str]:
    found = {}
    for k in range(1, count + 1):
        text = _read(_done_path(bench_dir, k))
        if text is not None:
            found[k] = text.strip().replace("\t", " ").replace("\n", " ")
    return found


def prepared_file(prepared_dir: str, split: str) -> str:
    """The prepared inputs of ``split`` (gym's ``<split>.jsonl``); without a split (gym's config
    files set it), the one prepared file there is."""
    if split:
        return os.path.join(prepared_dir, f"{split}.jsonl")
    found = sorted(name for name in os.listdir(prepared_dir) if name.endswith(".jsonl"))
    if len(found) != 1:
        raise ValueError(
            f"gym prepared {len(found)} input files in {prepared_dir} ({', '.join(found) or 'none'}); "
            f"set the benchmark's run.split to say which one the shards slice"
        )
    return os.path.join(prepared_dir, found[0])


def write_slice(path: str, shard: int, count: int, limit: int | None) -> int:
    """Replace the prepared inputs at ``path`` with shard ``shard``'s slice of them; how many rows."""
    rows = 0
    partial = f"{path}.partial-{os.getpid()}"
    with open(path, encoding="utf-8") as src, open(partial, "w", encoding="utf-8") as out:
        for line in slice_lines(src, shard, count, limit):
            out.write(line)
            rows += 1
    os.replace(partial, path)
    return rows


def gather(bench_dir: str, count: int) -> None:
    """The shards' expected pairs and failure rows, concatenated into the benchmark's own
    artifacts beside the merged rollouts (a shard without a file adds nothing)."""
    for name in (c.MATERIALIZED_INPUTS_FILE, c.FAILURES_FILE):
        target = os.path.join(bench_dir, name)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        partial = f"{target}.partial-{os.getpid()}"
        with open(partial, "wb") as out:
            for k in range(1, count + 1):
                try:
                    with open(os.path.join(c.shard_dir(bench_dir, k), name), "rb") as src:
                        data = src.read()
                except OSError:
                    continue
                out.write(data if not data or data.endswith(b"\n") else data + b"\n")
        os.replace(partial, target)


def main(argv: list[str]) -> int:
    usage = (
        "usage: shards.py slice PREPARED_DIR SPLIT SHARD COUNT [LIMIT] | starting BENCH_DIR SHARD | "
        "finished BENCH_DIR SHARD JOB_ID | merge-due BENCH_DIR COUNT SEEN_FILE | gather BENCH_DIR COUNT | "
        "merged BENCH_DIR SEEN_FILE"
    )
    try:
        verb, args = argv[0], argv[1:]
        if verb == "slice" and len(args) in (4, 5):
            limit = int(args[4]) if len(args) == 5 else None
            path = prepared_file(args[0], args[1])
            rows = write_slice(path, int(args[2]), int(args[3]), limit)
            print(f"shard {args[2]} of {args[3]}: {rows} row(s) of {path}")
            return 0
        if verb == "starting" and len(args) == 2:
            try:
                os.remove(_done_path(args[0], int(args[1])))
            except FileNotFoundError:
                pass
            return 0
        if verb == "finished" and len(args) == 3:
            _write_atomically(_done_path(args[0], int(args[1])), f"{args[2]} {time.time():.0f}\n")
            return 0
        if verb == "merge-due" and len(args) == 3:
            count = int(args[1])
            done = read_done(args[0], count)
            if not merge_due(done, count, _read(os.path.join(args[0], c.SHARDS_MERGED_FILE))):
                return EXIT_NOT_DUE
            _write_atomically(args[2], done_text(done, count))  # what ``merged`` records
            return EXIT_DUE
        if verb == "gather" and len(args) == 2:
            gather(args[0], int(args[1]))
            return 0
        if verb == "merged" and len(args) == 2:
            seen = _read(args[1], 1 << 20)
            if seen is None:
                raise ValueError(f"no done markers kept in {args[1]} (merge-due writes them)")
            _write_atomically(os.path.join(args[0], c.SHARDS_MERGED_FILE), seen)
            return 0
    except (IndexError, ValueError) as exc:
        print(f"shards.py: {exc}" if str(exc) else usage, file=sys.stderr)
        return EXIT_USAGE
    except OSError as exc:
        print(f"shards.py: {exc}", file=sys.stderr)
        return EXIT_USAGE
    print(usage, file=sys.stderr)
    return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
