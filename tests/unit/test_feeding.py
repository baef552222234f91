"""Feeding a sweep through the site's limits in lanes: the pure rules (feeding.py), then a submission,
its status and its cancel over the fake connection and the fake Slurm (which enforces MaxSubmitJobs
as slurmctld does). The jobs' own queuing of the next of their lane runs on the real cluster
(tests/cluster/test_site_limits.py); here the chain record it writes is written by the test."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from test_site_limits import config_file, three_checkpoints

from nemo_gym.orchestration import contract, library
from nemo_gym.orchestration.chain import chain_record
from nemo_gym.orchestration.errors import UserError
from nemo_gym.orchestration.feeding import LaneJob, Turn, dealt, held_at_once, plan_lanes, turns
from nemo_gym.orchestration.record import load_record

# -- the rules ---------------------------------------------------------------------------------------


def test_thirty_jobs_with_room_for_eight_run_in_four_lanes_dealt_round_robin() -> None:
    lanes = plan_lanes(30, lambda held: len(held) <= 8)
    assert lanes is not None and len(lanes.lanes) == 4
    assert lanes.lanes[0] == (0, 4, 8, 12, 16, 20, 24, 28) and lanes.lanes[3] == (3, 7, 11, 15, 19, 23, 27)
    assert lanes.heads() == [0, 1, 2, 3]
    assert lanes.next_of()[0] == 4 and lanes.fed_by()[4] == 0 and 28 not in lanes.next_of()


def test_no_lane_when_not_even_two_jobs_fit() -> None:
    assert plan_lanes(9, lambda held: len(held) <= 1) is None
    assert plan_lanes(1, lambda held: True) is None  # one job that did not fit alone has no lane to go in


@given(count=st.integers(2, 400), room=st.integers(0, 500))
def test_the_lanes_chosen_are_the_most_that_fit_and_hold_every_job_once(count: int, room: int) -> None:
    asked = []

    def fits(held) -> bool:
        asked.append(len(held))
        return len(held) <= room

    lanes = plan_lanes(count, fits)
    if room < 2:
        assert lanes is None
        return
    assert lanes is not None
    k = len(lanes.lanes)
    assert len(held_at_once(lanes)) <= room
    assert k == count - 1 or len(held_at_once(dealt(count, k + 1))) > room  # one more lane would not fit
    assert sorted(job for lane in lanes.lanes for job in lane) == list(range(count))
    assert all(list(lane) == sorted(lane) for lane in lanes.lanes)
    assert len(asked) <= count.bit_length() + 1


# -- a lane's turns: waiting, stalled, behind a stall -----------------------------------------------

RUNNING = LaneJob()  # queued by the submission, going
ENDED = LaneJob(ended=True)  # queued, and over: whatever it was to queue, it queued as it started


def waiting(fed_by: str, **kw: bool) -> LaneJob:
    return LaneJob(fed_by=fed_by, queued=False, **kw)


TURNS = [
    # its feeder is still going: it waits
    ({"a": RUNNING, "b": waiting("a")}, {"b": (Turn.WAITING, "")}),
    # its feeder ended and never queued it (cancelled while pending): stalled at b
    ({"a": ENDED, "b": waiting("a")}, {"b": (Turn.STALLED, "b")}),
    # the rest of that lane waits behind b
    (
        {"a": ENDED, "b": waiting("a"), "c": waiting("b"), "d": waiting("c")},
        {"b": (Turn.STALLED, "b"), "c": (Turn.BEHIND_A_STALL, "b"), "d": (Turn.BEHIND_A_STALL, "b")},
    ),
    # the feeder tried and the scheduler refused: stalled there, the next behind it
    (
        {"a": ENDED, "b": waiting("a", refused=True, ended=True), "c": waiting("b")},
        {"b": (Turn.STALLED, "b"), "c": (Turn.BEHIND_A_STALL, "b")},
    ),
    # a job cancelled before its lane queued it is passed over: the one before it feeds the next
    (
        {"a": RUNNING, "b": waiting("a", cancelled=True, ended=True), "c": waiting("b")},
        {"c": (Turn.WAITING, "")},
    ),
    ({"a": ENDED, "b": waiting("a", cancelled=True, ended=True), "c": waiting("b")}, {"c": (Turn.STALLED, "c")}),
    # a feeder in a run not asked about is taken to be on its way
    ({"b": waiting("elsewhere/a"), "c": waiting("b")}, {"b": (Turn.WAITING, ""), "c": (Turn.WAITING, "")}),
    # a lane head the submission could not queue: the rest of its lane is behind it
    (
        {"a": LaneJob(queued=False, refused=True, ended=True), "b": waiting("a")},
        {"b": (Turn.BEHIND_A_STALL, "a")},
    ),
    # fed already (queued): not told
    ({"a": ENDED, "b": LaneJob(fed_by="a")}, {}),
    # labels read back that loop: never followed for ever
    ({"b": waiting("c"), "c": waiting("b")}, {"b": (Turn.WAITING, ""), "c": (Turn.WAITING, "")}),
    (
        {"b": waiting("c", cancelled=True), "c": waiting("b", cancelled=True), "d": waiting("c")},
        {"d": (Turn.WAITING, "")},
    ),
]


@pytest.mark.parametrize(("jobs", "told"), TURNS)
def test_a_lane_job_waits_while_its_feeder_may_still_start_and_stalls_once_it_cannot(jobs, told) -> None:
    assert turns(jobs) == told


# -- a submission past the limit ---------------------------------------------------------------------


def fed_submission(base, tmp_path, write_config, conn, cluster):
    cluster.limit_submit_jobs("acct", 5)
    cluster.add_job("other", "RUNNING", account="acct")  # one of the user's jobs counts already: room for 4
    prepared = three_checkpoints(config_file(base, tmp_path, write_config, "a", "b"))
    return library.submit(prepared, connect=conn.connect)


def jobs_of(submission) -> list:
    return [b for r in submission.records for b in r.benchmarks]


def test_a_sweep_past_the_limit_queues_the_first_of_each_lane_and_tells_each_job_its_next(
    base, tmp_path, write_config, conn, cluster
) -> None:
    submission = fed_submission(base, tmp_path, write_config, conn, cluster)
    jobs = jobs_of(submission)
    assert not submission.failed and submission.interrupted is None
    # 6 jobs, room for 4: two lanes (each holds two at once), of jobs 0 2 4 and 1 3 5.
    assert [b.job_id for b in jobs] == ["101", "102", None, None, None, None]
    assert len(cluster.calls("sbatch")) == 2
    runs = [r.gym_job_id for r in submission.records]
    assert [b.fed_by for b in jobs] == [None, None, f"{runs[0]}/a", f"{runs[0]}/b", f"{runs[1]}/a", f"{runs[1]}/b"]
    nexts = {b.job_dir: (Path(b.job_dir) / contract.LANE_NEXT_FILE) for b in jobs}
    # Each pointer: the next job, then the feeder staged once, in the submission's first run.
    feeder = Path(submission.records[0].run_dir) / contract.LANE_FEEDER_DIR
    assert nexts[jobs[0].job_dir].read_text() == f"{jobs[2].job_dir}\n{feeder}\n"
    assert nexts[jobs[2].job_dir].read_text() == f"{jobs[4].job_dir}\n{feeder}\n"
    assert nexts[jobs[1].job_dir].read_text() == f"{jobs[3].job_dir}\n{feeder}\n"
    assert not nexts[jobs[4].job_dir].exists() and not nexts[jobs[5].job_dir].exists()
    assert (feeder / contract.SHIPPED_DIR / "nemo_gym/orchestration/lane_feed.py").is_file()
    assert (feeder / contract.SHIPPED_DIR / "nemo_gym/orchestration/backends/slurm_node.py").is_file()
    assert not (Path(submission.records[1].run_dir) / contract.LANE_FEEDER_DIR).exists()
    # The run directory's own record says so too (status reads either).
    on_cluster = load_record((Path(submission.records[1].run_dir) / contract.RECORD_FILE).read_text())
    assert [b.fed_by for b in on_cluster.benchmarks] == [f"{runs[0]}/a", f"{runs[0]}/b"]


def test_a_sweep_that_cannot_fit_even_one_lane_is_refused_whole_naming_the_limit(
    base, tmp_path, write_config, conn, cluster
) -> None:
    cluster.limit_submit_jobs("acct", 5)
    for _ in range(4):
        cluster.add_job("other", "RUNNING", account="acct")  # room for one: no lane holds two
    prepared = three_checkpoints(config_file(base, tmp_path, write_config, "a", "b"))
    with pytest.raises(UserError) as caught:
        library.submit(prepared, connect=conn.connect)
    [problem] = caught.value.problems
    assert problem.startswith("compute.account acct: the 3 runs need 6 Slurm job(s) queued at once, but the site ")
    assert "lets you queue 1 more (MaxSubmitJobs=5 of your association in account acct, 4 counted already)" in problem
    assert not cluster.calls("sbatch") and not any(Path(run.plan.run_dir).exists() for run in prepared.runs)


def fed(job, job_id: str, by: str) -> None:
    """What the job before it in its lane writes once it has queued it (feed_lane)."""
    chain = Path(job.job_dir) / contract.CHAIN_FILE
    chain.parent.mkdir(parents=True, exist_ok=True)
    with chain.open("a") as fh:
        fh.write(chain_record(contract.RECORD_FED, job_id, by, 1700000000))


def states(conn, submission) -> list[tuple[str, str | None, str]]:
    runs = library.status(submission.records, connect=conn.connect)
    return [(job.state, job.job_id, job.detail) for run in runs for job in run.jobs]


def test_status_tells_a_job_waiting_its_turn_then_follows_the_id_its_lane_fed_it_as(
    base, tmp_path, write_config, conn, cluster
) -> None:
    submission = fed_submission(base, tmp_path, write_config, conn, cluster)
    jobs = jobs_of(submission)
    cluster.set_state("101", "RUNNING")
    first = states(conn, submission)
    assert first[2][:2] == ("queued", None)
    assert first[2][2] == f"waiting its turn in its lane: {jobs[2].fed_by} queues it as that one starts"
    fed_id = cluster.add_job("a", "PENDING", account="acct")
    fed(jobs[2], fed_id, "101")
    # The lane could not queue job 3: its predecessor said why.
    chain = Path(jobs[3].job_dir) / contract.CHAIN_FILE
    chain.parent.mkdir(parents=True, exist_ok=True)
    chain.write_text(chain_record(contract.RECORD_UNFED, "102", "sbatch: error: QOSMaxSubmitJobPerUserLimit"))
    second = states(conn, submission)
    assert second[2][:2] == ("queued", fed_id) and "waiting in the Slurm queue" in second[2][2]
    assert second[3][0] == "failed" and "its lane could not queue it" in second[3][2]
    assert "QOSMaxSubmitJobPerUserLimit" in second[3][2]


def test_cancel_stops_the_lanes_and_cancels_what_they_queued(base, tmp_path, write_config, conn, cluster) -> None:
    submission = fed_submission(base, tmp_path, write_config, conn, cluster)
    jobs = jobs_of(submission)
    fed_id = cluster.add_job("a", "PENDING", account="acct")
    fed(jobs[2], fed_id, "101")
    reports = library.cancel(submission.records, connect=conn.connect)
    assert all(report.ok for report in reports), reports
    [scancel] = cluster.calls("scancel")
    assert sorted(scancel) == sorted(["101", "102", fed_id])
    # Every job directory is marked, so no job still to come queues or runs another.
    assert [(Path(b.job_dir) / contract.CHAIN_CANCELLED_FILE).exists() for b in jobs] == [True] * 6, reports
    after = states(conn, submission)
    assert [s for s, _, _ in after[3:]] == ["cancelled"] * 3, after


def test_a_lane_whose_feeder_ended_unstarted_is_told_stalled_and_resubmit_feeds_it(
    base, tmp_path, write_config, conn, cluster
) -> None:
    """Lane 0 2 4: its first job (101) is cancelled by scancel while it waits (an administrator, a
    dependency Slurm gave up on), so it never queues job 2. Status says where the lane stalled and
    what to do; resubmit queues job 2 (held, recorded as fed, released), and job 4 waits its turn
    again; the other lane (1 3 5) is not touched."""
    submission = fed_submission(base, tmp_path, write_config, conn, cluster)
    jobs = jobs_of(submission)
    cluster.set_state("101", "CANCELLED")
    cluster.set_state("102", "RUNNING")
    told = states(conn, submission)
    assert [s for s, _, _ in told] == ["cancelled", "starting", "failed", "queued", "failed", "queued"], told
    assert told[2][2] == (
        f"never queued: its lane stalled: {jobs[0].fed_by or submission.records[0].gym_job_id + '/a'} ended "
        "(cancelled) without queuing it; gym eval resubmit queues it"
    )
    assert told[4][2].startswith(f"not queued: its lane stalled at {jobs[4].fed_by}; gym eval resubmit queues")
    assert told[3][2].startswith("waiting its turn in its lane")
    # A run asked alone still sees its lane: the runs that feed it are read from the index.
    [alone] = library.status([submission.records[2]], connect=conn.connect)
    assert [job.state for job in alone.jobs] == ["failed", "queued"] and alone.jobs[0].stalled_at == jobs[4].fed_by
    [second, third] = library.info(submission.records[1:], connect=conn.connect)
    assert [b.plan.remedy for b in second.benchmarks + third.benchmarks] == ["feed", "wait", "wait", "wait"]
    assert "its lane stalled here" in second.benchmarks[0].plan.text
    [run1, run2] = library.resubmit(submission.records[1:], connect=conn.connect)
    assert [(b.benchmark, bool(b.job_id)) for b in run1.benchmarks] == [("a", True), ("b", False)], run1
    assert not run2.queued
    [held] = [argv for argv in cluster.calls("sbatch") if "--hold" in argv]
    assert held[-1] == f"{jobs[2].job_dir}/{contract.JOB_SCRIPT}"
    chain = (Path(jobs[2].job_dir) / contract.CHAIN_FILE).read_text().split("\t")
    assert chain[:3] == [contract.RECORD_FED, run1.benchmarks[0].job_id, contract.FED_BY_RESUBMIT]
    after = states(conn, submission)
    assert after[2][:2] == ("queued", run1.benchmarks[0].job_id) and after[4][0] == "queued", after
    assert after[4][2].startswith("waiting its turn in its lane")
