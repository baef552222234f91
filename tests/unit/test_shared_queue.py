"""A shared deployment's queue (``shared_queue``): which driver starts next, when a warm lane's next
turn is loaded, what fails with what after a failed reload or a service's death; each case a
table of calls (the events told) and what the job is told to do. Then the program as the job
script runs it, its state in a file between calls."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from nemo_gym.orchestration import shipping
from nemo_gym.orchestration.contract import Reload
from nemo_gym.orchestration.shared_queue import Queue, answer_lines, decide, main, parse_events, reload_reason, start

QUEUED = "waiting for its turn on the shared services"
NOT_LOADED = "its checkpoint's weights were not loaded: "
NOT_STARTED = "its checkpoint's deployment did not start: "


def launch(bench: str) -> list[tuple[str, ...]]:
    return [("phase", bench, "running", "driver"), ("launch", bench)]


def ok(bench: str) -> tuple[str, ...]:
    return ("phase", bench, "succeeded", "driver finished")


def failed(bench: str, rc: int) -> list[tuple[str, ...]]:
    return [
        ("phase", bench, "failed", f"driver failed with exit status {rc}"),
        ("log", f"ERROR: the driver of {bench} failed with exit status {rc}"),
    ]


ALL_DONE = ("finish", "0", "every benchmark finished")

# (at_once, {benchmark: turn}, [(events of a call, the actions it answers)...])
PLAIN = {
    "at_once=1: one driver at a time, in order": (
        1,
        {"a": 0, "b": 0, "c": 0},
        [
            ([], launch("a")),
            ([("ended", "a", "0")], [ok("a"), *launch("b")]),
            ([("ended", "b", "0")], [ok("b"), *launch("c")]),
            ([("ended", "c", "0")], [ok("c"), ALL_DONE]),
        ],
    ),
    "at_once=2: two at once, the next as soon as either ends": (
        2,
        {"a": 0, "b": 0, "c": 0},
        [
            ([], launch("a") + launch("b")),
            ([("ended", "b", "0")], [ok("b"), *launch("c")]),
            ([("ended", "a", "0"), ("ended", "c", "0")], [ok("a"), ok("c"), ALL_DONE]),
        ],
    ),
    "a failing driver fails its benchmark alone, and the job at its end": (
        2,
        {"a": 0, "b": 0, "c": 0},
        [
            ([], launch("a") + launch("b")),
            ([("ended", "a", "3")], [*failed("a", 3), *launch("c")]),
            (
                [("ended", "b", "0"), ("ended", "c", "137")],
                [ok("b"), *failed("c", 137), ("finish", "1", "2 benchmark(s) failed", "driver-failed")],
            ),
        ],
    ),
    "nothing happened: nothing to do": (
        1,
        {"a": 0, "b": 0},
        [([], launch("a")), ([], [])],
    ),
}

LANE = {"a": 0, "b": 0, "c": 1, "d": 2}


def restarting(n: int) -> tuple[str, ...]:
    return ("log", f"starting the deployment again for the runs after it ({n} of 2)")


NO_RESTART = "the deployment did not start again after a failed reload: service policy did not start"
NOT_SERVED = (
    "; the runs after it were not served: submit them again (gym eval resubmit does not queue a lane's runs yet)"
)
EXHAUSTED = "x (the deployment was started again 2 times already)"  # run 0 has a and b, run 1 c, run 2 d

RELOADS = {
    "turns in order: each loaded once the turn before has no driver left": (
        2,
        LANE,
        [
            ([], [*launch("a"), *launch("b"), ("ask-answered", "a", "b")]),
            ([("ended", "a", "0")], [ok("a"), ("ask-answered", "b")]),
            ([("ended", "b", "0")], [ok("b"), ("reload", "1", "c")]),
            ([("reloaded", "1", "0", "")], [*launch("c"), ("ask-answered", "c")]),
            ([("ended", "c", "0")], [ok("c"), ("reload", "2", "d")]),
            ([("reloaded", "2", "0", "")], launch("d")),
            ([("ended", "d", "0")], [ok("d"), ALL_DONE]),
        ],
    ),
    "the next turn waits for every running driver to have answered, then loads while they wind down": (
        2,
        LANE,
        [
            ([], [*launch("a"), *launch("b"), ("ask-answered", "a", "b")]),
            ([("ended", "a", "0")], [ok("a"), ("ask-answered", "b")]),
            ([], [("ask-answered", "b")]),  # asked again each tick until it has
            ([("answered", "b")], [("reload", "1", "c")]),
            # b still winds down: it no longer counts
            ([("reloaded", "1", "0", "")], [*launch("c"), ("ask-answered", "c")]),
            ([("ended", "b", "0")], [ok("b"), ("ask-answered", "c")]),
        ],
    ),
    "answered, one of two: the switch still waits for the other": (
        2,
        {"a": 0, "b": 0, "c": 1},
        [
            ([], [*launch("a"), *launch("b"), ("ask-answered", "a", "b")]),
            ([("answered", "a")], [("ask-answered", "b")]),
            ([("answered", "b")], [("reload", "1", "c")]),
        ],
    ),
    "an answered driver frees its place for a driver of the same turn": (
        1,
        {"a": 0, "b": 0, "c": 1},
        [
            ([], launch("a")),
            ([("answered", "a")], [*launch("b"), ("ask-answered", "b")]),
            ([], [("ask-answered", "b")]),
        ],
    ),
    "refused: that run's benchmarks fail, the lane goes on with the weights it had": (
        1,
        {"a": 0, "b": 1, "c": 1, "d": 2},
        [
            ([], [*launch("a"), ("ask-answered", "a")]),
            ([("ended", "a", "0")], [ok("a"), ("reload", "1", "b", "c")]),
            (
                [("reloaded", "1", str(Reload.REFUSED), "step-1: model.safetensors is torn")],
                [
                    ("log", "ERROR: step-1: model.safetensors is torn"),
                    ("phase", "b", "failed", NOT_LOADED + "step-1: model.safetensors is torn"),
                    ("phase", "c", "failed", NOT_LOADED + "step-1: model.safetensors is torn"),
                    ("reload", "2", "d"),
                ],
            ),
            ([("reloaded", "2", "0", "")], launch("d")),
            ([("ended", "d", "0")], [ok("d"), ("finish", "1", "2 benchmark(s) failed", "driver-failed")]),
        ],
    ),
    "a restart lane's turn whose deployment does not start fails alone; the next turn starts its own": (
        1,
        {"a": 0, "b": 1, "c": 2},
        [
            ([], [*launch("a"), ("ask-answered", "a")]),
            ([("ended", "a", "0")], [ok("a"), ("reload", "1", "b")]),
            (
                [("reloaded", "1", str(Reload.NOT_STARTED), "service policy did not start on this run's checkpoint")],
                [
                    ("log", "ERROR: service policy did not start on this run's checkpoint"),
                    ("phase", "b", "failed", NOT_STARTED + "service policy did not start on this run's checkpoint"),
                    ("reload", "2", "c"),  # no restart of turn 0's: turn 2 starts its own
                ],
            ),
            ([("reloaded", "2", "0", "")], launch("c")),
            ([("ended", "c", "0")], [ok("c"), ("finish", "1", "1 benchmark(s) failed", "driver-failed")]),
        ],
    ),
    "broken: the server failed the reload, so that run fails and the deployment starts again for the next": (
        1,
        {"a": 0, "b": 1, "c": 2, "d": 2},
        [
            ([], [*launch("a"), ("ask-answered", "a")]),
            ([("ended", "a", "0")], [ok("a"), ("reload", "1", "b")]),
            (
                [("reloaded", "1", str(Reload.FAILED), "")],
                [
                    ("log", "ERROR: weights.py exited with status 4"),
                    ("phase", "b", "failed", NOT_LOADED + "weights.py exited with status 4"),
                    restarting(1),
                    ("restart",),
                ],
            ),
            ([], []),  # nothing launches while it starts
            # It serves its starting weights (turn 0's): the next turn is loaded over them.
            ([("restarted", "0", "")], [("reload", "2", "c", "d")]),
            ([("reloaded", "2", "0", "")], launch("c")),
            ([("ended", "c", "0")], [ok("c"), *launch("d")]),
            ([("ended", "d", "0")], [ok("d"), ("finish", "1", "1 benchmark(s) failed", "driver-failed")]),
        ],
    ),
    "broken while a driver of the turn before winds down: the deployment starts again, it goes on": (
        2,
        {"a": 0, "b": 1, "c": 2},
        [
            ([], [*launch("a"), ("ask-answered", "a")]),
            ([("answered", "a")], [("reload", "1", "b")]),
            (
                [("reloaded", "1", str(Reload.FAILED), "the server is gone")],
                [
                    ("log", "ERROR: the server is gone"),
                    ("phase", "b", "failed", NOT_LOADED + "the server is gone"),
                    restarting(1),
                    ("restart",),
                ],
            ),
            ([("restarted", "0", ""), ("ended", "a", "0")], [ok("a"), ("reload", "2", "c")]),
        ],
    ),
    "broken at the last run: nothing is left to serve, so nothing starts again": (
        1,
        {"a": 0, "b": 1},
        [
            ([], [*launch("a"), ("ask-answered", "a")]),
            ([("ended", "a", "0")], [ok("a"), ("reload", "1", "b")]),
            (
                [("reloaded", "1", str(Reload.FAILED), "gone")],
                [
                    ("log", "ERROR: gone"),
                    ("phase", "b", "failed", NOT_LOADED + "gone"),
                    ("finish", "1", "1 benchmark(s) failed", "driver-failed"),
                ],
            ),
        ],
    ),
    "the deployment does not start again: the runs still waiting fail, named, and the lane ends": (
        1,
        {"a": 0, "b": 1, "c": 2, "d": 3},
        [
            ([], [*launch("a"), ("ask-answered", "a")]),
            ([("ended", "a", "0")], [ok("a"), ("reload", "1", "b")]),
            (
                [("reloaded", "1", str(Reload.FAILED), "gone")],
                [("log", "ERROR: gone"), ("phase", "b", "failed", NOT_LOADED + "gone"), restarting(1), ("restart",)],
            ),
            (
                [("restarted", "1", "service policy did not start")],
                [
                    ("log", "ERROR: " + NO_RESTART),
                    ("phase", "c", "failed", NO_RESTART),
                    ("phase", "d", "failed", NO_RESTART),
                    ("finish", "1", NO_RESTART + NOT_SERVED, "weights-failed"),
                ],
            ),
        ],
    ),
    "every reload breaks the server: past MAX_RESTARTS the runs still waiting fail": (
        1,
        {"a": 0, "b": 1, "c": 2, "d": 3, "e": 4},
        [
            ([], [*launch("a"), ("ask-answered", "a")]),
            ([("ended", "a", "0")], [ok("a"), ("reload", "1", "b")]),
            (
                [("reloaded", "1", str(Reload.FAILED), "x")],
                [("log", "ERROR: x"), ("phase", "b", "failed", NOT_LOADED + "x"), restarting(1), ("restart",)],
            ),
            ([("restarted", "0", "")], [("reload", "2", "c")]),
            (
                [("reloaded", "2", str(Reload.FAILED), "x")],
                [("log", "ERROR: x"), ("phase", "c", "failed", NOT_LOADED + "x"), restarting(2), ("restart",)],
            ),
            ([("restarted", "0", "")], [("reload", "3", "d")]),
            (
                [("reloaded", "3", str(Reload.FAILED), "x")],
                [
                    ("log", "ERROR: x"),
                    ("phase", "d", "failed", NOT_LOADED + "x"),
                    ("phase", "e", "failed", "the lane's server failed a reload before its turn: " + EXHAUSTED),
                    ("finish", "1", EXHAUSTED + NOT_SERVED, "weights-failed"),
                ],
            ),
        ],
    ),
}

DEATHS = {
    "a service dies: the running drivers are stopped, every benchmark fails, the job ends": (
        2,
        {"a": 0, "b": 0, "c": 0, "d": 0},
        [
            ([], launch("a") + launch("b")),
            ([("ended", "a", "0")], [ok("a"), *launch("c")]),
            (
                [("died", "policy")],
                [
                    ("kill-drivers",),
                    ("phase", "b", "failed", "service policy died while the driver ran"),
                    ("phase", "c", "failed", "service policy died while the driver ran"),
                    ("phase", "d", "failed", "service policy died before its turn"),
                    ("wait",),
                    ("finish", "1", "service policy died", "service-died"),
                ],
            ),
        ],
    ),
    "a warm lane's service dies between turns: the next turns' benchmarks fail too": (
        1,
        LANE,
        [
            ([], launch("a")),
            (
                [("died", "policy")],
                [
                    ("kill-drivers",),
                    ("phase", "a", "failed", "service policy died while the driver ran"),
                    *[("phase", b, "failed", "service policy died before its turn") for b in "bcd"],
                    ("wait",),
                    ("finish", "1", "service policy died", "service-died"),
                ],
            ),
        ],
    ),
}


def cancelled(bench: str, when: str = "before its turn") -> tuple[str, ...]:
    return ("phase", bench, "cancelled", f"cancelled {when}")


ALL_DONE_BUT = ("finish", "0", "every benchmark finished but {} cancelled (gym eval cancel)")

CANCELS = {
    "a queued benchmark is dropped before its turn; the others run; the job succeeds": (
        1,
        {"a": 0, "b": 0, "c": 0},
        [
            ([], launch("a")),
            ([("cancelled", "b")], [cancelled("b")]),
            ([("ended", "a", "0")], [ok("a"), *launch("c")]),
            ([("ended", "c", "0")], [ok("c"), (ALL_DONE_BUT[0], "0", ALL_DONE_BUT[2].format(1))]),
        ],
    ),
    "a running driver is stopped and ends cancelled, not failed; its place goes to the next": (
        1,
        {"a": 0, "b": 0},
        [
            ([], launch("a")),
            ([("cancelled", "a")], [("stop", "a")]),
            ([("cancelled", "a")], []),  # told again: stopped once
            ([("ended", "a", "143")], [cancelled("a", "while its driver ran"), *launch("b")]),
            ([("ended", "b", "0")], [ok("b"), (ALL_DONE_BUT[0], "0", ALL_DONE_BUT[2].format(1))]),
        ],
    ),
    "a stopped driver that had finished anyway succeeded": (
        1,
        {"a": 0},
        [
            ([], launch("a")),
            ([("cancelled", "a")], [("stop", "a")]),
            ([("ended", "a", "0")], [ok("a"), ALL_DONE]),
        ],
    ),
    "cancelled after it ended, or never known: nothing to do": (
        1,
        {"a": 0, "b": 0},
        [
            ([], launch("a")),
            ([("ended", "a", "0")], [ok("a"), *launch("b")]),
            ([("cancelled", "a"), ("cancelled", "zz")], []),
        ],
    ),
    "every benchmark cancelled: the job ends, and succeeds": (
        2,
        {"a": 0, "b": 0, "c": 0},
        [
            (
                [("cancelled", "a"), ("cancelled", "b"), ("cancelled", "c")],
                [cancelled(b) for b in "abc"] + [(ALL_DONE_BUT[0], "0", ALL_DONE_BUT[2].format(3))],
            ),
        ],
    ),
    "a failure beside a cancel: the job fails for the failure alone": (
        2,
        {"a": 0, "b": 0},
        [
            ([], launch("a") + launch("b")),
            ([("cancelled", "b"), ("ended", "a", "3")], [("stop", "b"), *failed("a", 3)]),
            (
                [("ended", "b", "143")],
                [cancelled("b", "while its driver ran"), ("finish", "1", "1 benchmark(s) failed", "driver-failed")],
            ),
        ],
    ),
    "a service dies while a stopped driver winds down: it still ends cancelled": (
        2,
        {"a": 0, "b": 0},
        [
            ([], launch("a") + launch("b")),
            ([("cancelled", "a")], [("stop", "a")]),
            (
                [("died", "policy")],
                [
                    ("kill-drivers",),
                    cancelled("a", "while its driver ran"),
                    ("phase", "b", "failed", "service policy died while the driver ran"),
                    ("wait",),
                    ("finish", "1", "service policy died", "service-died"),
                ],
            ),
        ],
    ),
}

LANE_CANCELS = {
    "a warm lane's middle run cancelled before its turn: its weights are never loaded": (
        1,
        {"a": 0, "b": 1, "c": 2},
        [
            ([("cancelled", "b")], [cancelled("b"), *launch("a"), ("ask-answered", "a")]),
            ([("ended", "a", "0")], [ok("a"), ("reload", "2", "c")]),
            ([("reloaded", "2", "0", "")], launch("c")),
            ([("ended", "c", "0")], [ok("c"), (ALL_DONE_BUT[0], "0", ALL_DONE_BUT[2].format(1))]),
        ],
    ),
    "one of a turn's two benchmarks cancelled: the turn is loaded for the other alone": (
        1,
        {"a": 0, "b": 1, "c": 1},
        [
            ([], [*launch("a"), ("ask-answered", "a")]),
            ([("cancelled", "b"), ("ended", "a", "0")], [cancelled("b"), ok("a"), ("reload", "1", "c")]),
            ([("reloaded", "1", "0", "")], launch("c")),
        ],
    ),
    "the running turn cancelled: its driver stopped, the next turn loaded once it has ended": (
        1,
        {"a": 0, "b": 1},
        [
            ([], [*launch("a"), ("ask-answered", "a")]),
            ([("cancelled", "a")], [("stop", "a"), ("ask-answered", "a")]),
            ([("ended", "a", "143")], [cancelled("a", "while its driver ran"), ("reload", "1", "b")]),
        ],
    ),
    "the last turn cancelled while the one before runs: the lane ends without loading it": (
        1,
        {"a": 0, "b": 1},
        [
            ([], [*launch("a"), ("ask-answered", "a")]),
            ([("cancelled", "b")], [cancelled("b")]),
            ([("ended", "a", "0")], [ok("a"), (ALL_DONE_BUT[0], "0", ALL_DONE_BUT[2].format(1))]),
        ],
    ),
}


def play(at_once: int, turns: dict[str, int], calls: list) -> None:
    queue, actions = start(at_once, turns)
    assert actions == [("phase", b, "queued", QUEUED) for b in turns]
    for i, (events, expected) in enumerate(calls):
        queue, actions = decide(queue, events)
        assert [tuple(str(w) for w in a) for a in actions] == [tuple(e) for e in expected], f"call {i}: {events}"


@pytest.mark.parametrize("case", list(PLAIN), ids=list(PLAIN))
def test_plain_shared_deployment(case: str) -> None:
    play(*PLAIN[case])


@pytest.mark.parametrize("case", list(RELOADS), ids=list(RELOADS))
def test_warm_lane_turns_and_reloads(case: str) -> None:
    play(*RELOADS[case])


@pytest.mark.parametrize("case", list(DEATHS), ids=list(DEATHS))
def test_a_service_death_fails_every_benchmark(case: str) -> None:
    play(*DEATHS[case])


@pytest.mark.parametrize("case", list(CANCELS), ids=list(CANCELS))
def test_a_cancelled_benchmark_is_skipped_and_counts_neither_way(case: str) -> None:
    play(*CANCELS[case])


@pytest.mark.parametrize("case", list(LANE_CANCELS), ids=list(LANE_CANCELS))
def test_a_warm_lane_skips_a_cancelled_run_without_loading_it(case: str) -> None:
    play(*LANE_CANCELS[case])


def test_a_refused_reload_keeps_the_loaded_turn_and_counts_its_failures() -> None:
    queue, _ = start(1, {"a": 0, "b": 1, "c": 2})
    queue, _ = decide(queue, [])
    queue, _ = decide(queue, [("ended", "a", "0")])
    queue, _ = decide(queue, [("reloaded", "1", str(Reload.REFUSED), "no")])
    assert (queue.loaded, queue.failed, queue.waiting, queue.broken) == (0, 1, ["c"], "")


EVENT_WORDS = [
    (["ended", "-x", "0", "answered", "y"], [("ended", "-x", "0"), ("answered", "y")]),
    (["died", "ended"], [("died", "ended")]),  # a service may be named like an event
    (["reloaded", "1", "3", "/why"], [("reloaded", "1", "3", "/why")]),
    (["restarted", "1", "/why", "ended", "a", "0"], [("restarted", "1", "/why"), ("ended", "a", "0")]),
    (["cancelled", "-x", "ended", "a", "1"], [("cancelled", "-x"), ("ended", "a", "1")]),
    ([], []),
]


@pytest.mark.parametrize(("words", "events"), EVENT_WORDS)
def test_events_are_read_by_their_fixed_number_of_words(words, events) -> None:
    assert [tuple(str(w) for w in e) for e in parse_events(words)] == events


@pytest.mark.parametrize("words", [["ended", "a"], ["exploded", "a"], ["answered"], ["cancelled"]])
def test_words_that_are_no_event_are_refused(words) -> None:
    with pytest.raises(ValueError):
        parse_events(words)


REASONS = [
    (b"", ""),
    (b"Traceback\nweights: step-5: model.safetensors is torn\n", "step-5: model.safetensors is torn"),
    (b"weights: bad \x1b[31mcolour\t\xff\n", "bad [31mcolour"),
    (b"x" * 1000, "x" * 400),
]


@pytest.mark.parametrize(("text", "reason"), REASONS)
def test_a_reload_reason_is_the_last_line_printable_and_short(tmp_path, text, reason) -> None:
    (tmp_path / "why").write_bytes(text)
    assert reload_reason(str(tmp_path / "why")) == reason
    assert reload_reason(str(tmp_path / "missing")) == ""


def test_an_answer_is_one_line_an_action_whatever_its_words_hold() -> None:
    answer = answer_lines([("log", "two\nlines\tand a tab"), ("finish", "0", "done")])
    assert answer.splitlines() == ["log\ttwo lines and a tab", "finish\t0\tdone"]


def test_the_state_file_carries_the_queue_between_calls(tmp_path, capsys) -> None:
    state = str(tmp_path / "queue.json")
    assert main([state, "start", "1", "a", "0", "-b", "1"]) == 0
    assert capsys.readouterr().out.splitlines() == [f"phase\ta\tqueued\t{QUEUED}", f"phase\t-b\tqueued\t{QUEUED}"]
    assert main([state, "step"]) == 0
    assert capsys.readouterr().out.splitlines() == ["phase\ta\trunning\tdriver", "launch\ta", "ask-answered\ta"]
    (tmp_path / "why").write_text("weights: torn\n")
    main([state, "step", "ended", "a", "0"])
    assert capsys.readouterr().out.splitlines() == ["phase\ta\tsucceeded\tdriver finished", "reload\t1\t-b"]
    main([state, "step", "reloaded", "1", str(Reload.REFUSED), str(tmp_path / "why")])
    assert capsys.readouterr().out.splitlines() == [
        "log\tERROR: torn",
        f"phase\t-b\tfailed\t{NOT_LOADED}torn",
        "finish\t1\t1 benchmark(s) failed\tdriver-failed",
    ]
    assert main([state, "nonsense"]) == 2


def test_a_restart_s_reason_is_read_from_its_file(tmp_path, capsys) -> None:
    state = str(tmp_path / "queue.json")
    main([state, "start", "1", "a", "0", "b", "1", "c", "2"])
    main([state, "step", "ended", "a", "0"])
    main([state, "step", "reloaded", "1", str(Reload.FAILED), str(tmp_path / "none")])
    capsys.readouterr()
    (tmp_path / "why").write_text("noise\nservice policy did not start\n")
    main([state, "step", "restarted", "1", str(tmp_path / "why")])
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"log\tERROR: {NO_RESTART}", lines


def test_the_shipped_program_runs_with_only_its_tree(tmp_path) -> None:
    for rel, text in shipping.staged(shipping.Program.SHARED_QUEUE).items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    program = [sys.executable, "-E", "-s", str(tmp_path / shipping.contract.SHIPPED_DIR / shipping.LAUNCHER)]
    program.append(shipping.Program.SHARED_QUEUE.entry_module)
    state = str(tmp_path / "queue.json")
    subprocess.run([*program, state, "start", "2", "a", "0"], check=True, capture_output=True, cwd=tmp_path)
    proc = subprocess.run([*program, state, "step"], check=True, capture_output=True, text=True, cwd=tmp_path)
    assert proc.stdout == "phase\ta\trunning\tdriver\nlaunch\ta\n"
    assert Path(state).exists() and Queue(**json.loads(Path(state).read_text())).running == ["a"]
