"""A job's servers' ports, claimed on its node when the job starts (run there by ``job.sh``).

Several jobs may share a node (``compute.exclusive_nodes`` false, the default for a job of one
node): a server that bound a fixed port would collide with another job's, or worse, be answered
for by it. So each server a job starts on its node is given its port here, at the job's start:
the preferred one (the config's) when it is free on this node and no live job holds it, else the
next free one above it (below the kernel's ephemeral range, where no client's socket takes it).

Reservations are node-wide: a file per port, ``<root>/<node>/<port>``, naming its owner (the
job's id, its shell's pid and that pid's start time), written under an ``flock`` on the node's
directory, so two jobs starting at the same moment never get the same port. A reservation whose
owner has died (its pid gone, or reused by another process) is taken back. The job releases its
own at its end (``release``).

    ports.py claim --state-dir DIR --node NODE --job JOB [--pid PID] NAME=PREFERRED[+COUNT] ...
    ports.py release --node NODE --job JOB

``claim`` writes ``GYM_PORT_<NAME>=<port>`` lines into ``DIR/ports`` (what the job's shell
reads), and says on stderr why when it cannot. ``+COUNT`` claims that many consecutive ports from
the one named (a server that listens on its port plus one a rank: NIXL's side channel, one port a
data-parallel rank); the line names the first. Stdlib only, Python 3.8: it runs on the node,
shipped with the job (``shipping.Program.PORTS``); its rules are table-tested
(``tests/unit/test_ports.py``).
"""

from __future__ import annotations

import argparse
import fcntl
import os
import socket
import stat
import sys
from collections.abc import Callable

PORTS_FILE = "ports"  # in the job's state directory: GYM_PORT_<NAME>=<port> lines
VARIABLE_PREFIX = "GYM_PORT_"
# Where a port is looked for when the preferred one is taken: this many above it, never into the
# kernel's ephemeral range (Linux's default starts at 32768), where clients' sockets land.
SPAN = 2000
EPHEMERAL_START = 32768
LOCK_FILE = ".lock"


class NoPort(Exception):
    """No port could be found for a server."""


def root_dir() -> str:
    """Per user, in the node's own /tmp: the reservations of this user's jobs on this node."""
    return os.path.join("/tmp", f"gym-ports-{os.getuid()}")


def candidates(preferred: int) -> range:
    """The ports tried for a server, in order: the preferred one, then upwards."""
    top = min(preferred + SPAN, max(EPHEMERAL_START, preferred + 1), 65536)
    return range(preferred, top)


def choose(preferred: int, in_use: Callable[[int], bool], held: set[int], count: int = 1) -> int:
    """The port a server gets: the first of ``candidates(preferred)`` that, with the ``count - 1``
    above it, no one holds (``held``: live reservations and this claim's own choices) and nothing on
    the node has bound (``in_use``, asked only of the ports not held)."""
    tried = candidates(preferred)
    for port in tried:
        block = range(port, port + count)
        if block[-1] > tried[-1]:
            break
        if not any(p in held for p in block) and not any(in_use(p) for p in block):
            return port
    raise NoPort(f"no {count} free port(s) in {preferred}..{tried[-1]} on this node")


def bound(port: int) -> bool:
    """Whether something on this node holds ``port`` (TCP, any address): binding it fails."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("0.0.0.0", port))
        except OSError:
            return True
    return False


def start_time(pid: int) -> str | None:
    """The process's start time (clock ticks since boot, ``/proc/<pid>/stat``), or None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            line = fh.read()
    except (OSError, ValueError):
        return None
    fields = line[line.rfind(")") + 2 :].split()
    return fields[19] if len(fields) > 19 else None


def owner_line(job: str, pid: int) -> str:
    return f"{job} {pid} {start_time(pid) or '?'}\n"


def alive(line: str, started: Callable[[int], str | None] = start_time) -> bool:
    """Whether the owner a reservation names still runs: its pid, started when it says."""
    words = line.split()
    if len(words) != 3 or not words[1].isdigit():
        return False  # unreadable: no owner can be shown alive
    return started(int(words[1])) == words[2]


def _read(path: str) -> str:
    try:
        with open(path) as fh:
            return fh.read(200)
    except OSError:
        return ""


def held_ports(node_dir: str, started: Callable[[int], str | None] = start_time) -> set[int]:
    """The ports live jobs hold on this node; dead owners' reservations are removed."""
    held: set[int] = set()
    for name in os.listdir(node_dir):
        if not name.isdigit():
            continue
        path = os.path.join(node_dir, name)
        if alive(_read(path), started):
            held.add(int(name))
        else:
            try:
                os.unlink(path)
            except OSError:
                pass
    return held


class _Locked:
    """The node's reservations directory, held under its flock."""

    def __init__(self, root: str, node: str) -> None:
        self.dir = os.path.join(root, node.replace("/", "_") or "node")
        os.makedirs(self.dir, mode=0o700, exist_ok=True)
        for path in (root, self.dir):  # /tmp is everyone's: a directory another user made is not ours
            info = os.lstat(path)
            if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
                raise OSError(f"{path} is not a directory of this user's")

    def __enter__(self) -> str:
        self.fd = os.open(os.path.join(self.dir, LOCK_FILE), os.O_RDWR | os.O_CREAT, 0o600)
        fcntl.flock(self.fd, fcntl.LOCK_EX)
        return self.dir

    def __exit__(self, *exc: object) -> None:
        os.close(self.fd)  # closing the file lets go of its lock


def claim(
    wanted: list[tuple[str, int]] | list[tuple[str, int, int]],
    job: str,
    pid: int,
    node: str,
    root: str | None = None,
    in_use: Callable[[int], bool] = bound,
) -> dict[str, int]:
    """``wanted``: (name, preferred port[, count]) tuples. Reserves one port each (``count``
    consecutive ones where given), as one step under the node's lock; returns name -> its (first) port."""
    chosen: dict[str, int] = {}
    with _Locked(root or root_dir(), node) as node_dir:
        held = held_ports(node_dir)
        reserved: list[int] = []
        for name, preferred, *more in wanted:
            count = more[0] if more else 1
            port = choose(preferred, in_use, held, count)
            block = range(port, port + count)
            held.update(block)
            reserved += block
            chosen[name] = port
        for port in reserved:
            with open(os.path.join(node_dir, str(port)), "w") as fh:
                fh.write(owner_line(job, pid))
    return chosen


def release(job: str, node: str, root: str | None = None) -> list[int]:
    """Gives back every port ``job`` holds on this node; returns them."""
    freed: list[int] = []
    with _Locked(root or root_dir(), node) as node_dir:
        for name in os.listdir(node_dir):
            path = os.path.join(node_dir, name)
            if name.isdigit() and _read(path).split()[:1] == [job]:
                os.unlink(path)
                freed.append(int(name))
    return sorted(freed)


def variable(name: str) -> str:
    return VARIABLE_PREFIX + "".join(ch if ch.isalnum() else "_" for ch in name.upper())


def _wanted(words: list[str]) -> list[tuple[str, int, int]]:
    out: list[tuple[str, int, int]] = []
    for word in words:
        name, _, spec = word.partition("=")
        port, _, count = spec.partition("+")
        count = count or "1"
        if not name or not port.isdigit() or not 0 < int(port) < 65536 or not count.isdigit() or int(count) < 1:
            raise SystemExit(f"ports: {word!r} is not NAME=PORT[+COUNT]")
        out.append((name, int(port), int(count)))
    return out


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="ports.py")
    parser.add_argument("verb", choices=("claim", "release"))
    parser.add_argument("--node", required=True)
    parser.add_argument("--job", required=True)
    parser.add_argument("--pid", type=int, default=os.getppid())
    parser.add_argument("--state-dir")
    parser.add_argument("wanted", nargs="*")
    args = parser.parse_intermixed_args(argv)
    if args.verb == "release":
        release(args.job, args.node)
        return 0
    try:
        chosen = claim(_wanted(args.wanted), args.job, args.pid, args.node)
    except (NoPort, OSError) as exc:
        print(f"ports: {exc}", file=sys.stderr)
        return 1
    lines = "".join(f"{variable(name)}={port}\n" for name, port in chosen.items())
    with open(os.path.join(args.state_dir or ".", PORTS_FILE), "w") as fh:
        fh.write(lines)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
