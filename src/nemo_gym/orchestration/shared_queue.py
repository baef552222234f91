"""A shared deployment's queue of benchmarks, decided on the node (``job.deployment: shared``, and
``reload``: a warm lane).

The shared job runs every benchmark's driver against one set of services, ``at_once`` at a time,
in order. In a warm lane each benchmark belongs to a turn (a run, answered by its own checkpoint's
weights): turn T's weights are loaded in place once no driver of the turn before may still ask the
server anything (every one still running has written all its rows: ``weights.py answered``), and
before turn T's first driver starts. A plain shared deployment is a lane of one turn, 0, loaded
from the start.

In a restart lane (a policy whose weights cannot be switched in place) the "reload" starts the
turn's own deployment in place of the last; one that does not start fails its turn alone, and
the next turn starts its own.

A reload the server fails (not a checkpoint refused before the server was touched) leaves weights
nobody can name: that run's benchmarks fail, and the lane starts its deployment again, on its
starting weights, before the next turn is loaded; at most ``MAX_RESTARTS`` times a lane, since
each start costs minutes on a GPU node and a lane whose every checkpoint breaks the server should
stop paying for them. After that, or when the deployment does not start again, the runs still
waiting fail (they are submitted again: resubmit does not queue a lane's runs yet).

``gym eval cancel`` of some of the runs (or benchmarks) the job serves leaves the job running and
writes each one's cancel marker, which the script reports (``cancelled``): a benchmark still
waiting is dropped, a running one's driver is stopped, and a turn left with no benchmark is never
loaded. A cancelled benchmark is neither a failure nor a success of the job.

``decide`` is the whole of it: the queue's state and what happened since the last call in, the
new state and what the job script does next out. The script (bash) only acts: it launches a
driver, writes a benchmark's phase, asks ``weights.py``, reaps drivers, watches the services; and
tells this program what came of it. Between two calls the state waits in a small JSON file in the
job's state directory (``contract.SHARED_QUEUE_FILE``), written whole or not at all.

Command line (a fixed number of words per event, so a benchmark named ``-x`` is never an option)::

    shared_queue.py STATE start AT_ONCE [BENCHMARK TURN]...
    shared_queue.py STATE step [ended BENCHMARK RC | answered BENCHMARK | died SERVICE
                                | reloaded TURN RC WHY_FILE | restarted RC WHY_FILE | cancelled BENCHMARK]...

Its answer is one action a line, its words separated by tabs (``Do``). The answer to ``reload`` is
the next call's ``reloaded`` event, before any other; to ``restart``, its ``restarted`` event.

Stdlib only, Python 3.8 syntax: it runs on the node with its ``python3``, shipped with the shared
job (``shipping.Program.SHARED_QUEUE``).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING

from nemo_gym.orchestration import contract as c

NOT_RESUBMITTED = "gym eval resubmit does not queue a lane's runs yet"
MAX_RESTARTS = 2  # starts of a lane's deployment after failed reloads, beyond its first
WHY_BYTES = 400  # of a failed reload's reason, as the state file and the status show it
WHY_TAIL_BYTES = 65536  # how much of the end of weights.py's stderr is read for its last line
_ONE_LINE = {ord(ch): " " for ch in "\t\n\r"}  # an action's word, kept to its field of a line


class Do(c.Word):
    """An action the job script takes, the first word of its line."""

    PHASE = "phase"  # BENCHMARK PHASE DETAIL: write the benchmark's state file
    LAUNCH = "launch"  # BENCHMARK: start its driver
    ASK_ANSWERED = "ask-answered"  # BENCHMARK...: each tick, whether they wrote every row (weights.py)
    RELOAD = "reload"  # TURN BENCHMARK...: load the turn's weights (weights.py), its benchmarks' provenance
    RESTART = "restart"  # stop the deployment's services and start them again, on the starting weights
    LOG = "log"  # LINE: into the job's log
    STOP = "stop"  # BENCHMARK: TERM its driver (cancelled while it ran)
    KILL_DRIVERS = "kill-drivers"  # TERM every driver still running
    WAIT = "wait"  # for every child
    FINISH = "finish"  # RC DETAIL [CAUSE]: end the job


class Happened(c.Word):
    """An event the job script reports, the first word of its group of arguments."""

    ENDED = "ended"  # BENCHMARK RC: its driver exited (reaped, its exports done)
    ANSWERED = "answered"  # BENCHMARK: it has written every row it expects
    RELOADED = "reloaded"  # TURN RC WHY: weights.py's exit status (contract.Reload) and its last line
    RESTARTED = "restarted"  # RC WHY: whether the deployment serves again (0), and why not
    DIED = "died"  # SERVICE: a service of the deployment died
    CANCELLED = "cancelled"  # BENCHMARK: its cancel marker appeared (gym eval cancel of its run)


ARITY = {
    Happened.ENDED: 2,
    Happened.ANSWERED: 1,
    Happened.RELOADED: 3,
    Happened.RESTARTED: 2,
    Happened.DIED: 1,
    Happened.CANCELLED: 1,
}
WHY_LAST = (Happened.RELOADED, Happened.RESTARTED)  # events whose last word names a file of reasons
if TYPE_CHECKING:  # annotations only: the node's python3 may be 3.8
    Event = tuple[str, ...]  # (Happened, its words): WHY_LAST's last is the reason itself, not the file
    Action = tuple[str, ...]  # (Do, its words)


@dataclass(frozen=True)
class Queue:
    """The shared job's benchmarks: waiting (in order), running, and the turn whose weights are loaded."""

    at_once: int
    turn_of: dict[str, int]  # every benchmark's turn (all 0 without reloads)
    waiting: list[str]
    running: list[str] = field(default_factory=list)
    # Running drivers that have written every row: they ask the server nothing more, so they
    # neither count against at_once nor hold back the next turn's weights.
    answered: list[str] = field(default_factory=list)
    loaded: int = 0
    failed: int = 0  # benchmarks failed so far
    # Running drivers told to stop (their run was cancelled): they end cancelled, not failed.
    stopping: list[str] = field(default_factory=list)
    cancelled: int = 0  # benchmarks cancelled so far (by gym eval cancel)
    broken: str = ""  # why the lane's server serves no more turns (its weights are unknown)
    restarting: bool = False  # its deployment is being started again: nothing launches meanwhile
    restarts: int = 0  # starts of the deployment after failed reloads


def start(at_once: int, turn_of: dict[str, int]) -> tuple[Queue, list[Action]]:
    """The queue as the job starts, every benchmark told it waits (nothing launched yet: the job
    records its starting weights first)."""
    queue = Queue(at_once=at_once, turn_of=dict(turn_of), waiting=list(turn_of))
    return queue, [(Do.PHASE, b, c.Phase.QUEUED, "waiting for its turn on the shared services") for b in turn_of]


def decide(queue: Queue, events: Sequence[Event]) -> tuple[Queue, list[Action]]:
    """What follows from the events, in order, and then what the job does next: a service's death
    ends the job; otherwise launches, a reload, or the job's end once nothing is left."""
    actions: list[Action] = []
    for event in events:
        if event[0] == Happened.DIED:
            return queue, _service_died(queue, event[1])
        queue = _apply(queue, event, actions)
    queue, next_actions = _next(queue)
    return queue, actions + next_actions


def _apply(queue: Queue, event: Event, actions: list[Action]) -> Queue:
    kind = event[0]
    if kind == Happened.ENDED:
        return _driver_ended(queue, event[1], int(event[2]), actions)
    if kind == Happened.ANSWERED:
        done = [b for b in queue.running if b == event[1] and b not in queue.answered]
        return replace(queue, answered=queue.answered + done)
    if kind == Happened.RELOADED:
        return _reloaded(queue, int(event[1]), int(event[2]), event[3], actions)
    if kind == Happened.RESTARTED:
        return _restarted(queue, int(event[1]), event[2], actions)
    if kind == Happened.CANCELLED:
        return _cancelled(queue, event[1], actions)
    raise ValueError(f"no such event: {kind}")


def _cancelled(queue: Queue, bench: str, actions: list[Action]) -> Queue:
    """Its run was cancelled: dropped if it waits (a turn left empty is never loaded), its driver
    stopped if it runs (it still counts as running until it ends: it may still ask the server).
    Told again, or once it ended, nothing more."""
    if bench in queue.waiting:
        actions.append((Do.PHASE, bench, c.Phase.CANCELLED, "cancelled before its turn"))
        return replace(queue, waiting=[b for b in queue.waiting if b != bench], cancelled=queue.cancelled + 1)
    if bench in queue.running and bench not in queue.stopping:
        actions.append((Do.STOP, bench))
        return replace(queue, stopping=queue.stopping + [bench])
    return queue


def _driver_ended(queue: Queue, bench: str, rc: int, actions: list[Action]) -> Queue:
    running = [b for b in queue.running if b != bench]
    answered = [b for b in queue.answered if b != bench]
    if rc == 0:
        # Finished before the stop reached it: its results are whole.
        actions.append((Do.PHASE, bench, c.Phase.SUCCEEDED, "driver finished"))
        return replace(queue, running=running, answered=answered, stopping=[b for b in queue.stopping if b != bench])
    if bench in queue.stopping:
        actions.append((Do.PHASE, bench, c.Phase.CANCELLED, "cancelled while its driver ran"))
        stopping = [b for b in queue.stopping if b != bench]
        return replace(queue, running=running, answered=answered, stopping=stopping, cancelled=queue.cancelled + 1)
    actions.append((Do.PHASE, bench, c.Phase.FAILED, f"driver failed with exit status {rc}"))
    actions.append((Do.LOG, f"ERROR: the driver of {bench} failed with exit status {rc}"))
    return replace(queue, running=running, answered=answered, failed=queue.failed + 1)


def _reloaded(queue: Queue, turn: int, rc: int, why: str, actions: list[Action]) -> Queue:
    """A switch to ``turn`` done, or failed: its benchmarks fail with the reason. A checkpoint
    merely refused leaves the server on the weights it had; a server that failed the reload is
    started again for the turns after (``_broken``)."""
    if rc == c.Reload.LOADED:
        return replace(queue, loaded=turn)
    why = why or f"weights.py exited with status {rc}"
    actions.append((Do.LOG, f"ERROR: {why}"))
    if rc == c.Reload.NOT_STARTED:
        # A restart lane: its deployment is stopped, and the next turn starts its own.
        return _fail_waiting(queue, actions, f"its checkpoint's deployment did not start: {why}", turn)
    queue = _fail_waiting(queue, actions, f"its checkpoint's weights were not loaded: {why}", turn)
    return queue if rc == c.Reload.REFUSED else _broken(queue, why, actions)


def _fail_waiting(queue: Queue, actions: list[Action], why: str, turn: int | None = None) -> Queue:
    """The waiting benchmarks of ``turn`` (of every turn: None) fail with ``why``."""
    failing = [b for b in queue.waiting if turn is None or queue.turn_of[b] == turn]
    actions += [(Do.PHASE, bench, c.Phase.FAILED, why) for bench in failing]
    waiting = [b for b in queue.waiting if b not in failing]
    return replace(queue, waiting=waiting, failed=queue.failed + len(failing))


def _broken(queue: Queue, why: str, actions: list[Action]) -> Queue:
    """The server's weights are unknown: its deployment starts again for the runs still waiting,
    or, past the lane's restarts, they fail."""
    if not queue.waiting:
        return queue
    if queue.restarts < MAX_RESTARTS:
        actions.append(
            (Do.LOG, f"starting the deployment again for the runs after it ({queue.restarts + 1} of {MAX_RESTARTS})")
        )
        actions.append((Do.RESTART,))
        return replace(queue, restarting=True)
    why = f"{why} (the deployment was started again {MAX_RESTARTS} times already)"
    queue = _fail_waiting(queue, actions, f"the lane's server failed a reload before its turn: {why}")
    return replace(queue, broken=why)


def _restarted(queue: Queue, rc: int, why: str, actions: list[Action]) -> Queue:
    """The deployment serves again, on the weights it started with (turn 0's); or it did not
    start, and the runs still waiting fail."""
    queue = replace(queue, restarting=False, restarts=queue.restarts + 1)
    if rc == 0:
        return replace(queue, loaded=0)
    why = f"the deployment did not start again after a failed reload: {why or f'exit status {rc}'}"
    actions.append((Do.LOG, f"ERROR: {why}"))
    return replace(_fail_waiting(queue, actions, why), broken=why)


def _service_died(queue: Queue, service: str) -> list[Action]:
    """Every driver stopped and every benchmark failed: the services they share are gone."""
    actions: list[Action] = [(Do.KILL_DRIVERS,)]
    for bench in queue.running:
        if bench in queue.stopping:
            actions.append((Do.PHASE, bench, c.Phase.CANCELLED, "cancelled while its driver ran"))
        else:
            actions.append((Do.PHASE, bench, c.Phase.FAILED, f"service {service} died while the driver ran"))
    actions += [(Do.PHASE, b, c.Phase.FAILED, f"service {service} died before its turn") for b in queue.waiting]
    return actions + [(Do.WAIT,), (Do.FINISH, "1", f"service {service} died", c.Cause.SERVICE_DIED)]


def _next(queue: Queue) -> tuple[Queue, list[Action]]:
    """Launches while there is room, the next turn's weights once nothing may ask the old ones,
    and the job's end once no benchmark is left."""
    actions: list[Action] = []
    if queue.restarting:
        return queue, actions
    while queue.waiting and len(queue.running) - len(queue.answered) < queue.at_once:
        bench = queue.waiting[0]
        if queue.turn_of[bench] != queue.loaded:
            if len(queue.running) > len(queue.answered):
                break
            # The turn's benchmarks still to run (a cancelled one is no longer waiting).
            turn = queue.turn_of[bench]
            return queue, actions + [(Do.RELOAD, str(turn), *(b for b in queue.waiting if queue.turn_of[b] == turn))]
        actions += [(Do.PHASE, bench, c.Phase.RUNNING, "driver"), (Do.LAUNCH, bench)]
        queue = replace(queue, waiting=queue.waiting[1:], running=queue.running + [bench])
    unanswered = [b for b in queue.running if b not in queue.answered]
    if queue.waiting and queue.turn_of[queue.waiting[0]] != queue.loaded and unanswered:
        actions.append((Do.ASK_ANSWERED, *unanswered))
    if not queue.waiting and not queue.running:
        actions.append(_finish(queue))
    return queue, actions


def _finish(queue: Queue) -> Action:
    if queue.broken:
        detail = f"{queue.broken}; the runs after it were not served: submit them again ({NOT_RESUBMITTED})"
        return (Do.FINISH, "1", detail, c.Cause.WEIGHTS_FAILED)
    if queue.failed:
        return (Do.FINISH, "1", f"{queue.failed} benchmark(s) failed", c.Cause.DRIVER_FAILED)
    if queue.cancelled:
        # Cancelled by the user: neither failed nor run; the rest finished, so the job did.
        return (Do.FINISH, "0", f"every benchmark finished but {queue.cancelled} cancelled (gym eval cancel)")
    return (Do.FINISH, "0", "every benchmark finished")


# -- the command line: the state file, the events' words, the actions' lines --------------------------


def parse_events(words: Sequence[str]) -> list[Event]:
    """The events' words, each kind followed by its fixed number of words (``ARITY``)."""
    events: list[Event] = []
    i = 0
    while i < len(words):
        kind = Happened.from_word(words[i])
        if kind is None or i + ARITY[kind] >= len(words):
            raise ValueError(f"not an event: {' '.join(words[i : i + 4])}")
        events.append((kind, *words[i + 1 : i + 1 + ARITY[kind]]))
        i += 1 + ARITY[kind]
    return events


def reload_reason(path: str) -> str:
    """The last line weights.py wrote to its stderr (``path``), printable and at most ``WHY_BYTES``
    long, without its program's name."""
    try:
        with open(path, "rb") as f:
            f.seek(max(0, os.fstat(f.fileno()).st_size - WHY_TAIL_BYTES))  # its end is all that is read
            lines = f.read(WHY_TAIL_BYTES).splitlines()
    except OSError:
        return ""
    last = bytes(b for b in (lines[-1] if lines else b"")[:WHY_BYTES] if 32 <= b < 127).decode("ascii")
    return last[len("weights: ") :] if last.startswith("weights: ") else last


def load(path: str) -> Queue:
    with open(path, encoding="utf-8") as f:
        return Queue(**json.load(f))


def save(queue: Queue, path: str) -> None:
    """Replaced whole: a call cut short leaves the state the last one wrote."""
    tmp = f"{path}.{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(asdict(queue), f)
    os.replace(tmp, path)


def answer_lines(actions: Sequence[Action]) -> str:
    """One action a line, its words separated by tabs (a tab or line break inside a word, which
    names and reasons never hold, would be a space)."""
    return "".join("\t".join(str(w).translate(_ONE_LINE) for w in action) + "\n" for action in actions)


def main(argv: list[str]) -> int:
    if len(argv) < 2 or argv[1] not in ("start", "step"):
        print("usage: shared_queue.py STATE start AT_ONCE [BENCHMARK TURN]... | STATE step [EVENT...]", file=sys.stderr)
        return 2
    state, verb, words = argv[0], argv[1], argv[2:]
    if verb == "start":
        pairs = words[1:]
        queue, actions = start(int(words[0]), {pairs[i]: int(pairs[i + 1]) for i in range(0, len(pairs) - 1, 2)})
    else:
        events = [(*e[:-1], reload_reason(e[-1])) if e[0] in WHY_LAST else e for e in parse_events(words)]
        queue, actions = decide(load(state), events)
    save(queue, state)
    sys.stdout.write(answer_lines(actions))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
