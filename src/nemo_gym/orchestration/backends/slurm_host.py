"""What the Slurm scripts run on the submit host decide from what Slurm answers: which jobs of a
snapshot are ours (an array's pending tasks are one record there), how the jobs to cancel are
asked for, whose cancel Slurm refused, and which lines of the QOS table are this user's.

Pure rules, each a function over text with a table test (``tests/unit/test_slurm_host.py``); the
scripts (``backend-slurm.sh.j2``) start Slurm's commands and run this module inline
(``shipping.Program.SCHEDULER_HOST``) over their answers. Stdlib, Python 3.8: it runs on hosts we do not
install. A host without ``python3`` loses the snapshot (each job is asked on its own) and the QOS
lines (the limits it would have told stay unknown), never a status.

    python3 -c PROGRAM snapshot IDS            < scontrol -a show job -o
    python3 -c PROGRAM cancel-words LIST
    python3 -c PROGRAM refused RUN_MARK BENCH_MARK LIST   < scancel's answer
    python3 -c PROGRAM own-qos USER UID        < scontrol show assoc_mgr flags=qos
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable, Iterator

# A Slurm job id as our records hold it: a job, or one task of an array (ID_TASK). The one
# spelling: a POSIX ERE and a Python regex alike, so the Slurm backend's scripts use it too.
JOB_ID_PATTERN = "[0-9]+(_[0-9]+)?"
JOB_ID = re.compile(JOB_ID_PATTERN)
FIELD_SEP = "\x1f"
# scancel's words for a job that ended or that slurmctld forgot: nothing left to cancel.
_GONE = re.compile(r"Invalid job id|already completing or completed")
_REFUSED_ARRAY = re.compile(r"job id ([0-9]+)_\[")
_REFUSED_JOB = re.compile(f"job id ({JOB_ID_PATTERN})")


def wanted_ids(words: str) -> list[str]:
    """The comma-separated ids read back from chain files that are Slurm's, each once, in order."""
    return list(dict.fromkeys(w for w in words.split(",") if JOB_ID.fullmatch(w)))


def _fields(line: str) -> dict[str, str]:
    return dict(word.split("=", 1) for word in line.split() if "=" in word)


def _task_ranges(spec: str) -> list[tuple[int, int]]:
    """``ArrayTaskId=6-9,12%4`` -> [(6, 9), (12, 12)] (the ``%`` limit is not a task)."""
    ranges = []
    for part in spec.split("%", 1)[0].split(","):
        low, _, high = part.partition("-")
        if low.isdigit() and (high or low).isdigit():
            ranges.append((int(low), int(high or low)))
    return ranges


def snapshot(text: str, ids: Iterable[str]) -> Iterator[tuple[str, str]]:
    """(wanted id, its record) for every record of ``scontrol -o`` output that a wanted id names:
    a job by its own id, a task of an array by ARRAY_TASK, whether started (a record of its own)
    or still pending (one record for the array's pending tasks)."""
    wanted = set(ids)
    tasks_of: dict[str, list[int]] = {}
    for job_id in wanted:
        array, _, task = job_id.partition("_")
        if task:
            tasks_of.setdefault(array, []).append(int(task))
    for line in text.splitlines():
        if not line.startswith("JobId="):
            continue
        fields = _fields(line)
        if fields.get("JobId") in wanted:
            yield fields["JobId"], line
        array = fields.get("ArrayJobId", "")
        ranges = _task_ranges(fields.get("ArrayTaskId", ""))
        for number in sorted(tasks_of.get(array, ())):
            if any(low <= number <= high for low, high in ranges):
                yield f"{array}_{number}", line


def read_entries(text: str) -> list[tuple[str, str, str]]:
    """The cancel list's lines: run, benchmark and job id, tab-separated."""
    entries = []
    for line in text.splitlines():
        parts = line.split("\t")
        if len(parts) == 3 and JOB_ID.fullmatch(parts[2]):
            entries.append((parts[0], parts[1], parts[2]))
    return entries


def cancel_words(entries: Iterable[tuple[str, str, str]]) -> list[str]:
    """One scancel word per job, and the tasks of one array as one word (``ID_[1,5,7]``):
    slurmctld cancels those at once, where it takes a request per word."""
    jobs: list[str] = []
    tasks: dict[str, list[str]] = {}
    for job_id in dict.fromkeys(entry[2] for entry in entries):
        array, _, task = job_id.partition("_")
        if task:
            tasks.setdefault(array, []).append(task)
        else:
            jobs.append(job_id)
    return jobs + [f"{array}_[{','.join(each)}]" for array, each in tasks.items()]


def refused(answer: str, entries: Iterable[tuple[str, str, str]]) -> list[tuple[str, str]]:
    """(run, benchmark) of every cancel a failed scancel refused, each once. A job that ended or
    that Slurm forgot is no refusal; a line that names no job, or a failure that says nothing,
    refuses them all (nothing tells which went)."""
    lines = [line for line in answer.splitlines() if line.strip()]
    jobs: set[str] = set()
    arrays: set[str] = set()
    every = not lines
    for line in lines:
        if _GONE.search(line):
            continue
        array, job = _REFUSED_ARRAY.search(line), _REFUSED_JOB.search(line)
        if array:
            arrays.add(array.group(1))
        elif job:
            jobs.add(job.group(1))
        else:
            every = True
    said: list[tuple[str, str]] = []
    for run, benchmark, job_id in entries:
        hit = every or job_id in jobs or ("_" in job_id and job_id.split("_")[0] in arrays)
        if hit and (run, benchmark) not in said:
            said.append((run, benchmark))
    return said


def own_qos_lines(text: str, user: str, uid: str) -> list[str]:
    """What ``scontrol show assoc_mgr flags=qos`` says of each QOS, keeping only this user's entry
    among its users' (every user of a QOS has one) and no TRES lines (most of the text)."""
    kept: list[str] = []
    block, mine = "", False
    for line in text.splitlines():
        stripped = line.strip()
        if line.startswith("QOS="):
            block = "qos"
        elif stripped.startswith("Account Limits"):
            block = "accounts"
        elif stripped.startswith("User Limits"):
            block = "users"
        elif block == "users" and "=" not in line:
            first = (stripped.split() or [""])[0]
            mine = first in (f"{user}({uid})", uid, user)
            if mine:
                kept.append(line)
            continue
        elif re.search(r"TRES[A-Za-z]*=", line) or (block == "users" and not mine):
            continue
        kept.append(line)
    return kept


def main(argv: list[str]) -> int:
    verb, args = (argv[0], argv[1:]) if argv else ("", [])
    if verb == "snapshot" and len(args) == 1:
        ids = wanted_ids(args[0])
        # Printed whole or not at all: a partial answer would read as jobs Slurm forgot.
        records = [f"{job_id}{FIELD_SEP}{line}" for job_id, line in snapshot(sys.stdin.read(), ids)]
        print("\n".join([",".join(ids), *records]))
    elif verb == "cancel-words" and len(args) == 1:
        with open(args[0], encoding="utf-8", errors="replace") as listed:
            print("\n".join(cancel_words(read_entries(listed.read()))))
    elif verb == "refused" and len(args) == 3:
        with open(args[2], encoding="utf-8", errors="replace") as listed:
            for run, benchmark in refused(sys.stdin.read(), read_entries(listed.read())):
                print(f"{args[0]}{run}\n{args[1]}{benchmark}")
    elif verb == "own-qos" and len(args) == 2:
        print("\n".join(own_qos_lines(sys.stdin.read(), args[0], args[1])))
    else:
        print("usage: slurm_host.py snapshot IDS | cancel-words LIST | refused RUN_MARK BENCH_MARK LIST | "
              "own-qos USER UID", file=sys.stderr)  # fmt: skip
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
