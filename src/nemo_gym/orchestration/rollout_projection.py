"""Cut a benchmark's rollouts down to what results need, where the files lie. Stdlib only, Python 3.8.

``gym eval results`` and ``compare`` need three things of every row: the task and rollout indices
and one metric. A real ``rollouts.jsonl`` carries whole conversations (kilobytes a row, hundreds
of megabytes a run), so the submit host runs this file's source with its ``python3`` and sends back
each row reduced to those keys, zlib-compressed: a few bytes a row.

The reduction keeps ``rollouts.parse_rollouts`` and ``parse_expected`` exact: one output line per
input line (so line numbers, blank lines and duplicates stay as they were), ``!`` for a line that
is not a JSON object (or is nested too deep to parse), ``!oversized`` for a line longer than
``MAX_ROW_BYTES`` (refused unread: no row of ours comes near it), and the metric copied under its
own name only when it is a scalar (a non-scalar value is no score either way). Lines are read in
linear time and bounded memory: at most one row of ``MAX_ROW_BYTES`` and one block at a time.
Run as

    python3 -c "$(shipping.inline(Program.PROJECTION))" MARKER METRIC [+GROUP] BENCHMARK ROLLOUTS EXPECTED [=LINE] [BENCHMARK ROLLOUTS EXPECTED ...]

(``+GROUP``: each rollout row also keeps the value of its field GROUP, the group of related tasks
``compare --group-key`` clusters by.)

it prints, per file that exists, ``MARKER<benchmark>\\x1f<part>\\x1fz\\x1f<metric names>\\x1f<base64>``
(part: rollouts or expected; metric names: the numeric top-level keys of the first row), and each
``=LINE`` argument as the line LINE where it stands (a run's marker before that run's files).
"""

import base64
import json
import os
import sys
import zlib

from nemo_gym.orchestration.facts import (
    GROUP_KEY,
    GROUP_VALUE_MAX,
    INPUT_DIGEST_KEY,
    OVERSIZED,
    ROLLOUT_INDEX_KEY,
    TASK_INDEX_KEY,
    input_row_digest,
    lines_of,
    parse_row,
)

UNREADABLE = "!"
SEPARATOR = "\x1f"
LINE_ITEM = "="  # an argument printed as a line of its own (no benchmark name starts with it)
GROUP_ITEM = "+"  # an argument naming the field whose value groups related tasks, for the files after it


def metric_value(row, metric):
    """The metric's value as ``parse_rollouts`` finds it (top-level key, then dotted path), or a
    sentinel for "absent"."""
    if metric in row:
        return row[metric]
    if "." not in metric:
        return _ABSENT
    node = row
    for part in metric.split("."):
        if not isinstance(node, dict) or part not in node:
            return _ABSENT
        node = node[part]
    return node


_ABSENT = object()


def project_line(line, metric, digest=False, group=None):
    """One line of ``rollouts.jsonl`` (or of the materialized inputs) reduced to its indices and
    metric (or, ``digest``, the digest of the row's content: ``facts.inputs_digest`` reads it), and
    with ``group`` the value of that field (a scalar, cut to ``GROUP_VALUE_MAX``) as ``GROUP_KEY``."""
    if line is None:
        return OVERSIZED
    if not line.strip():
        return ""
    row = parse_row(line)
    if row is None:
        return UNREADABLE
    kept = {key: row[key] for key in (TASK_INDEX_KEY, ROLLOUT_INDEX_KEY) if key in row}
    if metric:
        value = metric_value(row, metric)
        if value is not _ABSENT:
            scalar = isinstance(value, (bool, int, float))
            kept[metric] = value if scalar else None
    if digest:
        kept[INPUT_DIGEST_KEY] = input_row_digest(row)
    if group:
        value = metric_value(row, group)
        if isinstance(value, (str, bool, int, float)):
            kept[GROUP_KEY] = str(value)[:GROUP_VALUE_MAX]
    return json.dumps(kept)


def numeric_keys(line):
    row = parse_row(line)
    if row is None:
        return []
    return sorted(k for k, v in row.items() if isinstance(v, (bool, int, float)) and not k.startswith("_ng_"))


def project_file(path, metric, digest=False, group=None):
    """(metric names of the first readable row, zlib of the projected lines joined by newlines)."""
    packer = zlib.compressobj(6)
    chunks = []
    names = None
    first = True
    with open(path, "rb") as fh:
        for raw in lines_of(fh):
            line = None if raw is None else raw.decode("utf-8", "replace")
            if names is None and line is not None and line.strip():
                names = numeric_keys(line) or None
            projected = project_line(line, metric, digest, group)
            chunks.append(packer.compress((("" if first else "\n") + projected).encode()))
            first = False
    chunks.append(packer.flush())
    return names or [], b"".join(chunks)


def main(argv):
    marker, metric, rest = argv[0], argv[1], argv[2:]
    out = sys.stdout
    i = 0
    group = None
    while i < len(rest):
        if rest[i].startswith(GROUP_ITEM):
            group = rest[i][len(GROUP_ITEM) :] or None
            i += 1
            continue
        if rest[i].startswith(LINE_ITEM):
            # A line printed as it is, between files (a run's marker: one call serves several runs).
            out.write(rest[i][len(LINE_ITEM) :] + "\n")
            i += 1
            continue
        if i + 3 > len(rest):
            break
        benchmark, rollouts, expected = rest[i : i + 3]
        i += 3
        for part, path, part_metric in (("rollouts", rollouts, metric), ("expected", expected, "")):
            if not os.path.isfile(path):
                continue
            try:
                names, packed = project_file(
                    path, part_metric, part == "expected", group if part == "rollouts" else None
                )
            except OSError:
                continue
            fields = [benchmark, part, "z", ",".join(names), base64.b64encode(packed).decode()]
            out.write(marker + SEPARATOR.join(fields) + "\n")
    out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
