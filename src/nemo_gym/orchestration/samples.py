"""A benchmark's samples as a person reads them: each row of ``rollouts.jsonl`` as its task, rollout,
reward, prompt, response and gym's other words on it (a judge's verdict, an expected answer),
a page at a time, filtered by reward and searched for a text — streamed from the file, never
loaded whole, each row and each text bounded.

Stdlib only, Python 3.8: ``gym eval view`` imports it for runs on this machine and sends it (with
``facts.py``) to a run's host to read the rows there. Everything a row holds is untrusted text: it
is cut to bounds here and escaped where it is shown.
"""

from __future__ import annotations

import json
import sys
from typing import Any, Iterable, NamedTuple

from nemo_gym.orchestration import facts as f
from nemo_gym.orchestration import untrusted

PAGE_SIZE = 50
TEXT_CAP = 20_000  # characters of a prompt or a response shown
EXTRAS_CAP = 24  # gym's other words on a row shown, each...
EXTRA_CAP = 600  # ... cut to this many characters
# What a row holds that is shown apart, or is gym's bookkeeping, not its words on the sample.
_SHOWN_APART = {"responses_create_params", "response", "reward", f.TASK_INDEX_KEY, f.ROLLOUT_INDEX_KEY}
_BOOKKEEPING = {"agent_ref", "task_source", "mask_sample", "_ng_environment_server", "_ng_result_type"}
# Reward filters a page can ask for.
PASSED, FAILED, UNSCORED = "passed", "failed", "unscored"
REWARD_FILTERS = ("", PASSED, FAILED, UNSCORED)


class Sample(NamedTuple):
    line: int  # its 1-based line in the file
    task: int | None
    rollout: int | None
    reward: float | None
    prompt: str
    response: str
    extras: tuple  # (key, text) of gym's other words on it, bounded
    unreadable: bool = False  # not a JSON object (or over the row bound): nothing else said

    def as_dict(self) -> dict:
        return {**self._asdict(), "extras": [list(pair) for pair in self.extras]}


class Page(NamedTuple):
    samples: list
    start: int  # how many matching samples came before this page
    more: bool  # whether a next page has samples


# -- a row as a sample ------------------------------------------------------------------------------


def sample_of(line: int, row: dict | None) -> Sample:
    if row is None:
        return Sample(line, None, None, None, "", "", (), True)
    pair = f.task_rollout(row)
    reward = row.get("reward")
    params = row.get("responses_create_params")
    return Sample(
        line,
        pair[0] if pair else None,
        pair[1] if pair else None,
        _reward(reward),
        _cut(_prompt(params.get("input") if isinstance(params, dict) else None)),
        _cut(_response(row.get("response"))),
        _extras(row),
    )


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value == value


def _reward(value: Any) -> float | None:
    return float(value) if _number(value) else None


def _prompt(given: Any) -> str:
    """The input as messages (``role: text``), or a plain string."""
    if isinstance(given, str):
        return given
    if not isinstance(given, list):
        return ""
    parts = []
    for message in given:
        if isinstance(message, dict):
            role = message.get("role")
            parts.append((f"{role}: " if isinstance(role, str) else "") + _content(message.get("content")))
    return "\n\n".join(parts)


def _response(response: Any) -> str:
    """The model's output text (an OpenAI Responses object's output items), else its error."""
    if not isinstance(response, dict):
        return ""
    texts = [_content(item.get("content")) for item in response.get("output") or [] if isinstance(item, dict)]
    text = "\n\n".join(t for t in texts if t)
    if not text and response.get("error"):
        return f"(error: {_scalar(response.get('error'))})"
    return text


def _content(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            part.get("text", "") if isinstance(part, dict) and isinstance(part.get("text"), str) else ""
            for part in content
        )
    return ""


def _extras(row: dict) -> tuple:
    found = []
    for key, value in row.items():
        if key in _SHOWN_APART or key in _BOOKKEEPING or value is None or isinstance(value, (dict, list)):
            continue
        found.append((str(key)[:100], _scalar(value)[:EXTRA_CAP]))
        if len(found) == EXTRAS_CAP:
            break
    return tuple(found)


def _scalar(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, default=str)


def _cut(text: str) -> str:
    return text if len(text) <= TEXT_CAP else text[:TEXT_CAP] + f" … ({len(text) - TEXT_CAP} more characters)"


# -- pages ------------------------------------------------------------------------------------------


def matches(sample: Sample, reward: str = "", query: str = "") -> bool:
    """Whether a sample passes the reward filter (``passed``: reward > 0, ``failed``: 0 or less,
    ``unscored``: none) and holds ``query`` (case-insensitive) in its prompt, response or extras."""
    if reward == PASSED and not (sample.reward is not None and sample.reward > 0):
        return False
    if reward == FAILED and not (sample.reward is not None and sample.reward <= 0):
        return False
    if reward == UNSCORED and sample.reward is not None:
        return False
    if query:
        needle = query.casefold()
        haystack = [sample.prompt, sample.response, *(f"{k} {v}" for k, v in sample.extras)]
        return any(needle in text.casefold() for text in haystack)
    return True


def samples_of(lines: Iterable) -> Iterable:
    """Every non-blank line as a sample, in the file's order (an oversized one unreadable)."""
    for row in f.rows_of(lines):
        yield sample_of(row.number, row.row)


def page(samples: Iterable, start: int = 0, size: int = PAGE_SIZE, reward: str = "", query: str = "") -> Page:
    """The ``size`` matching samples after the first ``start``, and whether there are more: it
    reads only as far as the page (and one sample past it) needs."""
    found: list = []
    skipped = 0
    for sample in samples:
        if not matches(sample, reward, query):
            continue
        if skipped < start:
            skipped += 1
            continue
        if len(found) == size:
            return Page(found, start, True)
        found.append(sample)
    return Page(found, start, False)


def of_tasks(samples: Iterable, tasks: set) -> dict:
    """Task -> its samples (every rollout), for the tasks asked, in the file's order."""
    found: dict = {}
    for sample in samples:
        if sample.task in tasks:
            found.setdefault(sample.task, []).append(sample)
    return found


def page_of_file(path: str, start: int = 0, size: int = PAGE_SIZE, reward: str = "", query: str = "") -> Page:
    # Only a regular file: a FIFO or /dev/zero where the rollouts should be would never end.
    with untrusted.open_regular(path, "rollouts") as fh:
        return page(samples_of(f.lines_of(fh)), start, size, reward, query)


def tasks_of_file(path: str, tasks: set) -> dict:
    with untrusted.open_regular(path, "rollouts") as fh:
        return of_tasks(samples_of(f.lines_of(fh)), tasks)


# -- on a run's host ----------------------------------------------------------------------------------


def main(argv: list) -> int:
    """``page PATH START SIZE REWARD QUERY`` or ``tasks PATH T,T,...``: one JSON document on stdout."""
    try:
        if argv[:1] == ["page"] and len(argv) == 6:
            found = page_of_file(argv[1], int(argv[2]), int(argv[3]), argv[4], argv[5])
            print(
                json.dumps({"samples": [s.as_dict() for s in found.samples], "start": found.start, "more": found.more})
            )
            return 0
        if argv[:1] == ["tasks"] and len(argv) == 3:
            wanted = {int(t) for t in argv[2].split(",") if t}
            rows = tasks_of_file(argv[1], wanted)
            print(json.dumps({str(t): [s.as_dict() for s in ss] for t, ss in rows.items()}))
            return 0
    except (OSError, ValueError) as exc:
        print(json.dumps({"error": str(exc)[:300]}))
        return 1
    print("usage: samples.py page PATH START SIZE REWARD QUERY | tasks PATH T,T,...", file=sys.stderr)
    return 2


def sample_from(data: Any) -> Sample | None:
    """A sample as ``main`` printed it (read back from a host: untrusted), or None."""
    if not isinstance(data, dict):
        return None
    try:
        extras = tuple((str(k)[:100], str(v)[:EXTRA_CAP]) for k, v in (data.get("extras") or [])[:EXTRAS_CAP])
        reward = data.get("reward")
        return Sample(
            int(data.get("line") or 0),
            data["task"] if type(data.get("task")) is int else None,
            data["rollout"] if type(data.get("rollout")) is int else None,
            _reward(reward),
            _cut(str(data.get("prompt") or "")),
            _cut(str(data.get("response") or "")),
            extras,
            bool(data.get("unreadable")),
        )
    except (TypeError, ValueError):
        return None


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
