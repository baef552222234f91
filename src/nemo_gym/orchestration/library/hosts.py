"""A use case's work over a set of runs: one connection per submit host, the answers in the runs' order."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from nemo_gym.orchestration.connection import Connect, Connection
from nemo_gym.orchestration.record import SubmissionRecord

T = TypeVar("T")


def over_their_hosts(
    records: list[SubmissionRecord],
    connect: Connect,
    work: Callable[[Connection, list[int]], list[T]],
    conn: Connection | None = None,
) -> list[T]:
    """``work(conn, indices)`` once per host with the indices of its records, whose answers are in
    that order; all of them over ``conn`` when given (a sweep's runs share one host)."""
    if conn is not None:
        return work(conn, list(range(len(records))))
    by_host: dict[str | None, list[int]] = {}
    for i, record in enumerate(records):
        by_host.setdefault(record.hostname, []).append(i)
    out: dict[int, T] = {}
    for host, indices in by_host.items():
        with connect(host) as opened:
            out.update(zip(indices, work(opened, indices)))
    return [out[i] for i in range(len(records))]


def each_over_its_host(
    records: list[SubmissionRecord],
    connect: Connect,
    work: Callable[[Connection, int], T],
) -> list[T]:
    """``work(conn, i)`` for every record, in order, over one connection per host."""
    return over_their_hosts(records, connect, lambda opened, indices: [work(opened, i) for i in indices])
