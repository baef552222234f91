"""A job's servers' ports, claimed on its node at its start (ports.py): which port each server
gets, when a reservation still counts, and two jobs claiming on one node at the same moment."""

from __future__ import annotations

import ast
import os
import shutil
import socket
import subprocess
from pathlib import Path

import pytest

from nemo_gym.orchestration import ports, shipping
from nemo_gym.orchestration.shipping import Program


@pytest.mark.parametrize(
    ("preferred", "bound", "held", "expected"),
    [
        (8000, set(), set(), 8000),  # free and unheld: the config's own port
        (8000, {8000}, set(), 8001),  # something on the node binds it
        (8000, set(), {8000}, 8001),  # another live job holds it
        (8000, {8001}, {8000}, 8002),  # both, one after the other
        (11000, {11000, 11002}, {11001}, 11003),
        (32767, set(), set(), 32767),  # up to the ephemeral range, never into it
    ],
)
def test_a_server_gets_its_preferred_port_else_the_next_free_one(
    preferred: int, bound: set[int], held: set[int], expected: int
) -> None:
    assert ports.choose(preferred, bound.__contains__, held) == expected


@pytest.mark.parametrize(
    ("preferred", "count", "bound", "held", "expected"),
    [
        (5600, 2, set(), set(), 5600),  # the block free: from the preferred port
        (5600, 2, {5601}, set(), 5602),  # one port of the block taken: the next whole block
        (5600, 4, set(), {5603}, 5604),
        (5600, 1, set(), {5601}, 5600),
        (32766, 2, set(), set(), 32766),  # the block's last port still below the ephemeral range
    ],
)
def test_a_server_of_several_ranks_gets_a_block_of_consecutive_free_ports(
    preferred: int, count: int, bound: set[int], held: set[int], expected: int
) -> None:
    assert ports.choose(preferred, bound.__contains__, held, count) == expected


def test_a_block_never_reaches_into_the_ephemeral_range() -> None:
    with pytest.raises(ports.NoPort, match="2 free port"):
        ports.choose(32767, set().__contains__, set(), 2)


def test_a_claimed_block_is_reserved_whole_and_released_whole(tmp_path: Path) -> None:
    first = ports.claim(
        [("nixl", 5600, 3), ("decode", 5601)], "job-1", os.getpid(), "n1", str(tmp_path), lambda p: False
    )
    assert first == {"nixl": 5600, "decode": 5603}
    second = ports.claim([("nixl", 5600, 2)], "job-2", os.getpid(), "n1", str(tmp_path), lambda p: False)
    assert second == {"nixl": 5604}
    assert ports.release("job-1", "n1", str(tmp_path)) == [5600, 5601, 5602, 5603]


def test_no_port_is_chosen_in_the_ephemeral_range() -> None:
    with pytest.raises(ports.NoPort, match="32767"):
        ports.choose(32767, {32767}.__contains__, set())
    assert max(ports.candidates(31000)) == 32767


@pytest.mark.parametrize(
    ("line", "started", "alive"),
    [
        ("job-1 100 555\n", {100: "555"}, True),
        ("job-1 100 555\n", {}, False),  # the pid is gone
        ("job-1 100 555\n", {100: "777"}, False),  # the pid now names another process
        ("job-1 100 ?\n", {100: "555"}, False),  # no start time was recorded: never shown alive
        ("garbage", {100: "555"}, False),
        ("", {}, False),
    ],
)
def test_a_reservation_counts_while_its_owner_runs(line: str, started: dict[int, str], alive: bool) -> None:
    assert ports.alive(line, started.get) is alive


def test_a_dead_jobs_reservation_is_taken_back_and_a_live_ones_is_not(tmp_path: Path) -> None:
    first = ports.claim([("policy", 8000)], "job-1", os.getpid(), "n1", root=str(tmp_path), in_use=lambda p: False)
    assert first == {"policy": 8000}
    second = ports.claim([("policy", 8000)], "job-2", os.getpid(), "n1", root=str(tmp_path), in_use=lambda p: False)
    assert second == {"policy": 8001}
    (tmp_path / "n1" / "8000").write_text("job-1 999999999 1\n")  # its owner is gone
    third = ports.claim([("policy", 8000)], "job-3", os.getpid(), "n1", root=str(tmp_path), in_use=lambda p: False)
    assert third == {"policy": 8000}
    other_node = ports.claim([("policy", 8000)], "job-4", os.getpid(), "n2", root=str(tmp_path), in_use=lambda p: False)
    assert other_node == {"policy": 8000}  # reservations are per node


def test_one_claim_gives_its_servers_different_ports_and_release_frees_only_its_own(tmp_path: Path) -> None:
    mine = ports.claim(
        [("policy", 8000), ("judge", 8000), ("head", 11000)], "job-1", os.getpid(), "n1", str(tmp_path), lambda p: False
    )
    assert mine == {"policy": 8000, "judge": 8001, "head": 11000}
    ports.claim([("policy", 8000)], "job-2", os.getpid(), "n1", str(tmp_path), lambda p: False)
    assert ports.release("job-1", "n1", str(tmp_path)) == [8000, 8001, 11000]
    assert sorted(p.name for p in (tmp_path / "n1").iterdir() if p.name.isdigit()) == ["8002"]


def test_a_reservations_directory_that_is_not_this_users_own_is_refused(tmp_path: Path) -> None:
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "n1").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(OSError, match="not a directory of this user's"):
        ports.claim([("policy", 8000)], "job-1", os.getpid(), "n1", str(tmp_path), lambda p: False)


def test_a_port_bound_on_the_node_is_not_given(tmp_path: Path) -> None:
    with socket.socket() as sock:
        taken = next(p for p in range(20000, 30000) if not ports.bound(p))  # below the ephemeral range
        sock.bind(("0.0.0.0", taken))
        sock.listen()
        assert ports.bound(taken)
        got = ports.claim([("policy", taken)], "job-1", os.getpid(), "n1", str(tmp_path))
    assert got["policy"] != taken


def _shipped(tmp_path: Path) -> str:
    for rel, text in shipping.staged(Program.PORTS).items():
        path = tmp_path / "job" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return shipping.launch_words(Program.PORTS, tree=str(tmp_path / "job"))


def test_two_jobs_claiming_at_the_same_moment_on_one_node_never_share_a_port(tmp_path: Path) -> None:
    """Eight jobs' shells start the shipped program at once, each for two servers on one node."""
    run = _shipped(tmp_path)
    node = f"node-{os.getpid()}-{tmp_path.name}"
    procs = []
    for k in range(8):
        state = tmp_path / f"state{k}"
        state.mkdir()
        command = f"{run} claim --state-dir {state} --node {node} --job job-{k} policy=8000 head=11000; sleep 2"
        procs.append(subprocess.Popen(["bash", "-c", command]))
    for proc in procs:
        assert proc.wait(timeout=60) == 0
    claimed = [
        dict(line.split("=") for line in (tmp_path / f"state{k}" / "ports").read_text().split()) for k in range(8)
    ]
    assert all(set(c) == {"GYM_PORT_POLICY", "GYM_PORT_HEAD"} for c in claimed)
    policy = [c["GYM_PORT_POLICY"] for c in claimed]
    head = [c["GYM_PORT_HEAD"] for c in claimed]
    assert len(set(policy)) == 8 and len(set(head)) == 8
    # Their shells have ended: a ninth job takes the preferred ports back (unless something else
    # on this machine binds them).
    subprocess.run(["bash", "-c", f"{run} release --node {node} --job job-0"], check=True)
    again = ports.claim([("policy", 8000)], "job-9", os.getpid(), node, in_use=lambda p: False)
    assert again == {"policy": 8000}
    ports.release("job-9", node)
    shutil.rmtree(Path(ports.root_dir(), node))


def test_bad_words_are_refused_with_the_word() -> None:
    with pytest.raises(SystemExit, match="'policy'"):
        ports.main(["claim", "--node", "n", "--job", "j", "policy"])
    with pytest.raises(SystemExit, match="'nixl=5600[+]0'"):
        ports.main(["claim", "--node", "n", "--job", "j", "nixl=5600+0"])


def test_it_parses_as_python_38() -> None:
    ast.parse(Path(ports.__file__).read_text(), feature_version=(3, 8))
