"""A job's own job-end record wins over a scheduler answer that contradicts it: a copied Slurm run
read where the scheduler knows another job of the same id stays as it ended, flagged."""

from __future__ import annotations

import warnings
from dataclasses import astuple
from pathlib import Path

import pytest
from fakes import FakeCluster, FakeConnection

from nemo_gym.orchestration import contract, library
from nemo_gym.orchestration.api import SubmitConfig
from nemo_gym.orchestration.backends import backend_named
from nemo_gym.orchestration.backends.base import JobProbe, JobState
from nemo_gym.orchestration.contract import StateFile, Status
from nemo_gym.orchestration.record import SubmissionRecord

SLURM = backend_named("slurm")
HOST = "login.fake"


def probe(phase: str, job_end: str | None, fields: str, attempt: str = "0") -> JobProbe:
    own = {"phase": phase, "detail": "driver finished", "attempt": attempt}
    return JobProbe(StateFile.from_fields(own), SLURM.describe([fields, ""]), False, job_end)


@pytest.mark.parametrize(
    "fields", ["JobState=PENDING Reason=Priority", "JobState=CANCELLED", "JobState=TIMEOUT", "JobState=NODE_FAIL"]
)
def test_a_job_that_ended_0_by_its_own_record_succeeded_whatever_slurm_says_of_its_id(fields) -> None:
    state, detail = astuple(SLURM.job_state("100", probe("succeeded", "0", fields), 12, {}))
    word = fields.split()[0].split("=")[1]
    assert state == "succeeded" and detail.startswith("driver finished (the job's own job-end record (exit status 0)")
    assert f"Slurm, which says {word} of job 100: another job of this id?" in detail


def test_a_job_that_failed_by_its_own_record_is_not_queued() -> None:
    state, detail = astuple(SLURM.job_state("100", probe("failed", "1", "JobState=PENDING"), 0, {}))
    assert state == "failed" and "wins over Slurm, which says PENDING" in detail


def test_slurm_still_explains_a_failure_the_job_recorded() -> None:
    assert SLURM.job_state("100", probe("failed", "143", "JobState=TIMEOUT"), 0, {}).status == "timed out"
    assert SLURM.job_state("100", probe("failed", "143", "JobState=CANCELLED"), 0, {}).status == "cancelled"


def test_without_its_job_end_record_or_with_one_that_disagrees_slurm_decides_as_before() -> None:
    assert SLURM.job_state("100", probe("succeeded", None, "JobState=PENDING"), 0, {}).status == "queued"
    assert SLURM.job_state("100", probe("succeeded", "1", "JobState=PENDING"), 0, {}).status == "queued"
    assert SLURM.job_state("100", probe("failed", "0", "JobState=CANCELLED"), 0, {}).status == "cancelled"


def test_a_job_slurm_requeued_since_is_queued_not_its_earlier_runs_end() -> None:
    requeued = probe("succeeded", "0", "JobState=PENDING Restarts=1 Reason=BeginTime")
    assert SLURM.job_state("100", requeued, 0, {}).status == "queued"


def test_agreeing_answers_carry_no_flag() -> None:
    for fields in ("JobState=COMPLETED", "JobState=COMPLETING", ""):
        assert SLURM.job_state("100", probe("succeeded", "0", fields), 0, {}) == JobState(
            Status.SUCCEEDED, "driver finished"
        )


# -- through the probe, against the fake cluster -----------------------------------------------------


def submitted(base: dict, tmp_path: Path, conn: FakeConnection) -> SubmissionRecord:
    base["compute"]["cluster"]["hostname"] = HOST
    base["job"]["output_path"] = str(tmp_path / "runs")
    base["driver"]["benchmarks"] = {"math": {}}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        submission = library.submit(library.prepare(SubmitConfig.model_validate(base)), connect=conn.connect)
    assert submission.interrupted is None and not submission.failed
    return submission.records[0]


def test_a_copied_run_whose_job_id_slurm_gives_another_job_reads_as_it_ended(base, tmp_path) -> None:
    cluster = FakeCluster(tmp_path / "slurm")
    conn = FakeConnection(cluster, HOST)
    record = submitted(base, tmp_path, conn)
    [job] = record.benchmarks
    state = Path(job.job_dir) / contract.state_dir(job.job_id or "")
    state.mkdir(parents=True, exist_ok=True)
    (state / contract.STATE_FILE).write_text("phase=succeeded\ndetail=driver finished\nattempt=0\n")
    (state / contract.EVENTS_FILE).write_text(f"1 {contract.EVENT_JOB_START}\n9 {contract.EVENT_JOB_END} 0\n")
    cluster.set_state(job.job_id or "", "PENDING")  # another job of the same id, as Slurm knows it
    [status] = library.status([record], connect=conn.connect)[0].jobs
    assert status.state == "succeeded" and "job-end record (exit status 0) wins over Slurm" in status.detail
    cluster.set_state(job.job_id or "", "CANCELLED")
    [status] = library.status([record], connect=conn.connect)[0].jobs
    assert status.state == "succeeded" and "which says CANCELLED" in status.detail


def test_a_job_its_walltime_ended_reads_timed_out_while_slurm_still_calls_it_completing() -> None:
    from nemo_gym.orchestration.backends.base import JobProbe as Probe
    from nemo_gym.orchestration.backends.base import SchedulerView
    from nemo_gym.orchestration.contract import Cause, StateFile, Status

    own = StateFile.from_fields({"phase": "failed", "detail": "stopped by its walltime (SIGTERM)"})
    view = SchedulerView(word="COMPLETING", running=True, time_limit="00:01:00")
    state = SLURM.job_state("21", Probe(own, view, False, "143", Cause.WALLTIME), 0, {})
    assert (state.status, state.detail) == (Status.TIMED_OUT, "walltime reached (00:01:00)")


def test_a_job_a_cancel_ended_reads_cancelled_while_slurm_still_calls_it_completing() -> None:
    """A cancelled shard's job wrote "cancelled (SIGTERM)" and Slurm still shows it COMPLETING (its
    epilog under way): cancelled, the user's when the cancel marker is there, never failed."""
    from nemo_gym.orchestration.backends.base import JobProbe as Probe
    from nemo_gym.orchestration.backends.base import SchedulerView
    from nemo_gym.orchestration.contract import Cause, StateFile, Status

    own = StateFile.from_fields({"phase": "failed", "detail": "cancelled (SIGTERM)"})
    view = SchedulerView(word="COMPLETING", running=True)
    table = [
        (True, Cause.CANCELLED, (Status.CANCELLED, "cancelled by the user (gym eval cancel)")),
        (False, Cause.CANCELLED, (Status.CANCELLED, "cancelled (SIGTERM)")),
        (True, Cause.SIGNAL, (Status.FAILED, "cancelled (SIGTERM)")),
        # A preemption the job saw at its TERM (PreemptTime set): preempted, neither failed nor
        # the user's cancel, whatever marker is there.
        (False, Cause.PREEMPTED, (Status.PREEMPTED, "cancelled (SIGTERM)")),
        (True, Cause.PREEMPTED, (Status.PREEMPTED, "cancelled (SIGTERM)")),
    ]
    for by_user, cause, expected in table:
        state = SLURM.job_state("22", Probe(own, view, by_user, "143", cause), 0, {})
        assert (state.status, state.detail) == expected, (by_user, cause)


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        # A site that cancels preempted jobs (PreemptMode=CANCEL): Slurm's word, whatever the job wrote.
        ("JobState=PREEMPTED", Status.PREEMPTED),
        # A site that requeues them: queued again under the same id.
        ("JobState=PENDING Reason=BeginTime Restarts=1", Status.QUEUED),
    ],
)
def test_a_preempted_job_reads_as_the_site_treats_it(fields: str, expected: Status) -> None:
    state = SLURM.job_state("30", probe("failed", "143", fields, attempt="0"), 0, {})
    assert state.status == expected, state


@pytest.mark.parametrize(
    ("phase", "expected"),
    [
        ("running", (Status.RUNNING, "as the job last wrote: driver running, 4 rollout(s) written")),
        ("starting", (Status.STARTING, "as the job last wrote: driver finished")),
        # Nothing written yet: last known queued, never forgotten or failed.
        ("", (Status.QUEUED, "the job has written nothing yet, so it was last known queued")),
        # An end the job recorded itself stands: the controller is not needed to tell it.
        ("succeeded", (Status.SUCCEEDED, "driver finished")),
    ],
)
def test_a_job_slurmctld_could_not_be_asked_about_reads_as_it_last_wrote(phase: str, expected) -> None:
    down = "? Slurmctld(primary) at ctl is DOWN"
    own = StateFile.from_fields({"phase": phase, "detail": "driver finished"} if phase else {})
    job_end = "0" if phase == "succeeded" else None
    state = SLURM.job_state("40", JobProbe(own, SLURM.describe([down, ""]), False, job_end), 4, {})
    assert state.status == expected[0], state
    assert state.detail.endswith(expected[1]), state
    if phase != "succeeded":
        assert state.detail.startswith("Slurm cannot be reached (Slurmctld(primary) at ctl is DOWN); "), state
