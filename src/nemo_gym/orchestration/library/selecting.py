"""Which runs a user names: a run's directory, a run id or a sweep id (or a unique part of either),
or the newest submission (``--last``); a sweep stands for its runs, in the sweep's order."""

from __future__ import annotations

import sys
from dataclasses import dataclass

from nemo_gym.orchestration.errors import UserError
from nemo_gym.orchestration.record import (
    BenchmarkJob,
    SubmissionRecord,
    SweepRecord,
    all_records,
    all_sweeps,
    index_dir,
    looks_like_a_directory,
    run_in_directory,
    your_last,
)


@dataclass(frozen=True)
class Selection:
    """What a user named: runs in the order named, every run of a sweep in the sweep's order; the
    sweep when it was exactly one sweep."""

    records: list[SubmissionRecord]
    sweep: SweepRecord | None = None

    @property
    def name(self) -> str:
        return self.sweep.sweep_id if self.sweep else self.records[0].gym_job_id


def select(names: list[str], last: bool = False) -> Selection:
    """The runs ``names`` name, in order (``last``: the newest submission after them); the newest
    submission without any."""
    parts = [_named(name) for name in names]
    if last or not names:
        parts.append(_newest())
    if len(parts) == 1:
        return parts[0]
    return Selection([record for part in parts for record in part.records])


def select_run(name: str | None, last: bool = False) -> SubmissionRecord:
    """One run a user names (the newest with ``last`` or no name); a sweep of several runs is refused."""
    selection = select([name] if name and not last else [], last)
    if len(selection.records) > 1:
        raise UserError(
            f"{name or '--last'} is sweep {selection.name} of {len(selection.records)} runs; name one of its runs "
            f"(gym eval status {selection.name} lists them)"
        )
    return selection.records[0]


def _indexed() -> tuple[list[SubmissionRecord], dict[str, SweepRecord]]:
    records = all_records()
    if not records:
        raise UserError(f"no runs in the local index ({index_dir()}); submit one with gym eval submit")
    return records, {s.sweep_id: s for s in all_sweeps()}


def _newest() -> Selection:
    """The newest submission: a sweep when the last was one."""
    records, sweeps = _indexed()
    newest = your_last(records)
    return _sweep_selection(newest.sweep_id, records, sweeps) if newest.sweep_id else Selection([newest])


def _named(name: str) -> Selection:
    """A run's directory; a run id or a sweep id, or a unique part of either."""
    if looks_like_a_directory(name):
        return Selection([run_in_directory(name)])
    records, sweeps = _indexed()
    sweep_ids = sorted(set(sweeps) | {r.sweep_id for r in records if r.sweep_id})
    exact = [r for r in records if r.gym_job_id == name]
    if exact:
        return Selection(exact[:1])
    if name in sweep_ids:
        return _sweep_selection(name, records, sweeps)
    run_matches = [r.gym_job_id for r in records if _is_part_of(name, r.gym_job_id)]
    sweep_matches = [s for s in sweep_ids if _is_part_of(name, s)]
    matches = run_matches + sweep_matches
    if len(matches) == 1:
        return _sweep_selection(matches[0], records, sweeps) if sweep_matches else _named(matches[0])
    if not matches:
        raise UserError(f"no run or sweep matches {name!r}; see gym eval list")
    listed = ", ".join(matches[:5])
    raise UserError(f"{name!r} matches {len(matches)} runs and sweeps ({listed}); give more of the id")


def _is_part_of(name: str, identifier: str) -> bool:
    """Any part: the date, the time, the hash or a piece of it (``3f9a`` of ``...-3f9a1c``)."""
    return name in identifier


def _sweep_selection(sweep_id: str, records: list[SubmissionRecord], sweeps: dict[str, SweepRecord]) -> Selection:
    """The sweep's runs in the sweep's order; a run its record lists but the index lost is named."""
    members = {r.gym_job_id: r for r in records if r.sweep_id == sweep_id}
    sweep = sweeps.get(sweep_id)
    if sweep is None:  # the sweep's own index entry could not be written: its runs still say
        return Selection([members[k] for k in sorted(members)])
    lost = [run.run_id for run in sweep.runs if run.run_id not in members]
    if lost:
        print(
            f"warning: sweep {sweep_id}: run(s) {', '.join(lost)} missing from the local index ({index_dir()}); "
            f"their directories hold their records",
            file=sys.stderr,
        )
    ordered = [members[run.run_id] for run in sweep.runs if run.run_id in members]
    if not ordered:
        raise UserError(f"sweep {sweep_id}: none of its runs is in the local index ({index_dir()})")
    return Selection(ordered, sweep)


def select_jobs(record: SubmissionRecord, names: list[str]) -> list[BenchmarkJob]:
    """The benchmarks ``names`` names (all without names); a sharded benchmark's shard by its own
    name (``B@k``) too."""
    if not names:
        return list(record.benchmarks)
    known = {b.benchmark: b for b in record.benchmarks}
    known.update({u.benchmark: u for b in record.benchmarks for u in b.shards})
    unknown = [n for n in names if n not in known]
    if unknown:
        listed = ", ".join(b.benchmark for b in record.benchmarks)
        raise UserError(f"run {record.gym_job_id} has no benchmark {', '.join(map(repr, unknown))}; it has: {listed}")
    return [known[n] for n in names]


def one_job(record: SubmissionRecord, name: str | None) -> BenchmarkJob:
    """The one job ``name`` names: a benchmark's, or a shard's (``B@k``); without a name, the
    run's only job."""
    if name is None:
        if len(record.units) == 1:
            return record.units[0]
        kind = "benchmarks" if len(record.units) == len(record.benchmarks) else "jobs (its benchmarks and their shards)"
        raise UserError(
            f"run {record.gym_job_id} has {len(record.units)} {kind}; name one: "
            f"{', '.join(u.benchmark for u in record.units)}"
        )
    shard = next((u for u in record.units if u.benchmark == name and u not in record.benchmarks), None)
    if shard is not None:
        return shard
    [job] = select_jobs(record, [name])
    if job.shards:
        raise UserError(
            f"{name} of run {record.gym_job_id} runs in {len(job.shards)} shards, each a job of its own; name one: "
            f"{', '.join(u.benchmark for u in job.shards)}"
        )
    return job
