"""The order of a history's series, row by row (``store.history.series_order`` through
``leaderboard``): by step where every checkpoint has one; by the time each was first submitted where
none has; numbered first, then the others by time, in a mix; an unknown time last. Then the same
axis as ``gym eval history`` shows it: the text's column and line, the JSON's ``axis`` and times, the
CSV's column, and the regressions judged along it (each checkpoint against the one before it in time)."""

from __future__ import annotations

import csv
import io
import json
from dataclasses import replace

import pytest
from view.history_store import entry as stored

from nemo_gym.orchestration.store import Entry
from nemo_gym.orchestration.store.history import leaderboard, parse_time
from nemo_gym.orchestration.store.regressions import judge
from nemo_gym.orchestration.verbs.history.command import history_text
from nemo_gym.orchestration.verbs.history.use_case import History


def entry(model: str, step: int | None, submitted_at: str, scores: list[float], benchmark: str = "alpha") -> Entry:
    """An entry as the store reads it back (``tests/view/history_store.py`` makes a training run's)."""
    return replace(
        stored(0, benchmark, scores, model=model, step=0),
        run_id=f"run-{model}-{submitted_at}",
        step=step,
        submitted_at=submitted_at,
        inputs_digest=None,
    )


def at(model: str, step: int | None, submitted_at: str) -> Entry:
    return entry(model, step, submitted_at, [1.0, 0.0])


T = "2026-12-01T{}:00:00.000Z".format

ROWS = [
    # (why, entries, axis, models in series order)
    (
        "every checkpoint numbered: by step, whenever it was submitted",
        [at("/c/step-300", 300, T("01")), at("/c/step-100", 100, T("03")), at("/c/step-200", 200, T("02"))],
        "step",
        ["/c/step-100", "/c/step-200", "/c/step-300"],
    ),
    (
        "equal steps: by model path",
        [at("/b/step-100", 100, T("01")), at("/a/step-100", 100, T("02"))],
        "step",
        ["/a/step-100", "/b/step-100"],
    ),
    (
        "none numbered: by the time first submitted, not by name",
        [at("/m/zeta", None, T("01")), at("/m/alpha", None, T("03")), at("/m/mid", None, T("02"))],
        "time",
        ["/m/zeta", "/m/mid", "/m/alpha"],
    ),
    (
        "a checkpoint evaluated again later keeps its first submission",
        [at("/m/a", None, T("01")), at("/m/b", None, T("02")), entry("/m/a", None, T("05"), [1.0], "beta")],
        "time",
        ["/m/a", "/m/b"],
    ),
    (
        "times in other zones compared in UTC; one without a zone read as UTC",
        [at("/m/a", None, "2026-12-01T03:00:00+02:00"), at("/m/b", None, "2026-12-01T02:00:00")],
        "time",
        ["/m/a", "/m/b"],
    ),
    (
        "a time the store holds that is no time: last, then by name",
        [at("/m/b", None, "yesterday"), at("/m/a", None, "x" * 500), at("/m/c", None, T("09"))],
        "time",
        ["/m/c", "/m/a", "/m/b"],
    ),
    (
        "runs that name no model: each its own checkpoint, by time",
        [at("", None, T("02")), at("", None, T("01"))],
        "time",
        [f"run run--{T('01')}", f"run run--{T('02')}"],
    ),
    (
        "a mix: the numbered by step, then the others by time",
        [
            at("/m/base", None, T("05")),
            at("/c/step-2", 2, T("04")),
            at("/m/sft", None, T("01")),
            at("/c/step-1", 1, T("06")),
        ],
        "step",
        ["/c/step-1", "/c/step-2", "/m/sft", "/m/base"],
    ),
]


@pytest.mark.parametrize(("why", "entries", "axis", "order"), ROWS, ids=[row[0] for row in ROWS])
def test_the_series_order(why: str, entries: list[Entry], axis: str, order: list[str]) -> None:
    board = leaderboard(entries)
    assert (board.axis, [c.model for c in board.checkpoints]) == (axis, order), why


@pytest.mark.parametrize(
    ("text", "seen"),
    [
        ("2026-12-01T00:00:01.000Z", "2026-12-01T00:00:01Z"),
        ("2026-12-01T02:00:01+02:00", "2026-12-01T00:00:01Z"),
        ("2026-12-01 00:00", "2026-12-01T00:00:00Z"),
        ("0001-01-01T00:00+05:00", None),  # its UTC falls before the calendar
        ("<script>", None),
        ("", None),
    ],
)
def test_a_time_is_read_in_utc_or_not_at_all(text: str, seen: str | None) -> None:
    when = parse_time(text)
    assert (None if when is None else when.strftime("%Y-%m-%dT%H:%M:%SZ")) == seen


def unnumbered_history() -> History:
    """Three models with no step, submitted c, a, b: a drops every task against c, the one before it in time."""
    entries = [
        entry("/m/c", None, T("01"), [1.0] * 12),
        entry("/m/a", None, T("02"), [0.0] * 12),
        entry("/m/b", None, T("03"), [0.0] * 6 + [1.0] * 6),
    ]
    board = leaderboard(entries)
    judged = judge(board)
    return History(board, judged.regressions, detectable=judged.detectable)


def test_the_text_says_the_time_axis_and_shows_each_time() -> None:
    lines = history_text(unnumbered_history()).splitlines()
    assert lines[1] == "axis: time (no checkpoint has a step number: each in the order it was first submitted, UTC)"
    assert lines[2].split() == ["MODEL", "TIME", "alpha", "SUITE"]
    assert [line.split()[:2] for line in lines[3:6]] == [
        ["/m/c", "2026-12-01T01:00:00Z"],
        ["/m/a", "2026-12-01T02:00:00Z"],
        ["/m/b", "2026-12-01T03:00:00Z"],
    ]
    [flagged] = [line for line in lines if line.startswith("  alpha at ")]
    assert flagged.startswith("  alpha at /m/a: -1.0000 against /m/c (p ")


def test_a_mix_says_where_the_unnumbered_go_and_a_step_axis_says_nothing_more() -> None:
    mixed = leaderboard([at("/c/step-1", 1, T("02")), at("/m/base", None, T("01"))])
    text = history_text(History(mixed, [])).splitlines()
    assert text[1].startswith("axis: step (job.training_step, else the number the model's path ends in); 1 checkpoint")
    assert text[2].split()[:2] == ["MODEL", "STEP"] and text[4].split()[:2] == ["/m/base", "-"]
    stepped = history_text(History(leaderboard([at("/c/step-1", 1, T("02"))]), [])).splitlines()
    assert stepped[1].split()[:2] == ["MODEL", "STEP"]  # as before: the column says it


def test_json_and_csv_name_the_axis() -> None:
    found = unnumbered_history()
    doc = json.loads(found.to_json())
    assert doc["axis"] == "time"
    assert [(c["model"], c["step"], c["time"]) for c in doc["checkpoints"]] == [
        ("/m/c", None, "2026-12-01T01:00:00Z"),
        ("/m/a", None, "2026-12-01T02:00:00Z"),
        ("/m/b", None, "2026-12-01T03:00:00Z"),
    ]
    [regression] = doc["regressions"]
    assert (regression["model"], regression["time"], regression["against_time"]) == (
        "/m/a",
        "2026-12-01T02:00:00Z",
        "2026-12-01T01:00:00Z",
    )
    rows = list(csv.reader(io.StringIO(found.board.to_csv())))
    assert rows[0] == ["model", "time", "alpha", "suite_mean", "incomplete"]
    assert [row[:2] for row in rows[1:]] == [
        ["/m/c", "2026-12-01T01:00:00Z"],
        ["/m/a", "2026-12-01T02:00:00Z"],
        ["/m/b", "2026-12-01T03:00:00Z"],
    ]
    stepped = leaderboard([at("/c/step-1", 1, T("02"))])
    assert json.loads(stepped.to_json())["axis"] == "step"
    assert next(csv.reader(io.StringIO(stepped.to_csv())))[:2] == ["model", "step"]
