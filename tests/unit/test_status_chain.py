"""`gym eval status` of a resumable benchmark: which job is current, what the chain is, and the
words that say why — from the chain file and what each job and Slurm say (no sacct here)."""

from __future__ import annotations

from nemo_gym.orchestration.backends import backend_named
from nemo_gym.orchestration.backends.base import JobProbe
from nemo_gym.orchestration.chain import parse_chain
from nemo_gym.orchestration.contract import StateFile
from nemo_gym.orchestration.observe import chain_status

SLURM = backend_named("slurm")


def probe_of(own: dict[str, str], fields: dict[str, str], sacct: str = "") -> JobProbe:
    """A job as the probe finds it: its state file, and Slurm's scontrol fields (and sacct line)."""
    own = dict(own)
    by_user = own.pop("cancelled_by_user", "") == "1"
    described = [" ".join(f"{k}={v}" for k, v in fields.items()), sacct]
    return JobProbe(StateFile.from_fields(own), SLURM.describe(described), by_user)


def chain(*records: tuple) -> str:
    return "".join("\t".join(map(str, r)) + "\n" for r in records)


def slurm(state: str, **more: str) -> JobProbe:
    return probe_of({}, {"JobState": state, **more}, "")


def own(phase: str, detail: str = "", state: str = "", **more: str) -> JobProbe:
    return probe_of({"phase": phase, "detail": detail}, {"JobState": state, **more} if state else {}, "")


def status(text: str, probe: dict, rollouts: int = 0) -> tuple[str, str, str]:
    shown, current = chain_status("100", parse_chain(text), probe, rollouts, SLURM, {})
    return shown.status, shown.detail, current


def test_before_the_first_job_starts_it_is_the_submitted_job() -> None:
    state, detail, current = status("", {"100": slurm("PENDING", Reason="Priority")})
    assert (state, current) == ("queued", "100") and "Priority" in detail


def test_the_running_job_is_current_and_its_successor_waits() -> None:
    text = chain(("start", 100, 1, 0), ("successor", 101, 100))
    state, detail, current = status(text, {"100": own("running", state="RUNNING"), "101": slurm("PENDING")}, 5)
    assert (state, current) == ("running", "100") and detail == "driver running, 5 rollout(s) written"
    assert parse_chain(text).job_ids() == ["100", "101"]


def test_between_two_jobs_status_says_resuming() -> None:
    text = chain(("start", 100, 1, 0), ("successor", 101, 100))
    probe = {
        "100": own("failed", "stopped by its walltime (SIGTERM)", "TIMEOUT", TimeLimit="00:01:00"),
        "101": slurm("PENDING", Reason="Resources"),
    }
    state, detail, current = status(text, probe)
    assert (state, current) == ("queued", "101")
    assert detail == "resuming: job 100 timed out (walltime reached (00:01:00)); job 101 waits in the queue (Resources)"
    probe["101"] = slurm("RUNNING")
    assert status(text, probe)[:2] == (
        "starting",
        "resuming in job 101: job 100 timed out (walltime reached (00:01:00))",
    )


def test_a_resumed_job_says_how_far_the_chain_went() -> None:
    text = chain(
        ("start", 100, 1, 0),
        ("successor", 101, 100),
        ("verdict", 100, "timeout", 70, 30, "free", "it reached its walltime after 70s, 30 new rollout(s)"),
        ("start", 101, 80, 30),
        ("successor", 102, 101),
    )
    state, detail, current = status(text, {"101": own("running", state="RUNNING"), "102": slurm("PENDING")}, 40)
    assert (state, current) == ("running", "101")
    assert (
        detail
        == "driver running, 40 rollout(s) written (resumed 1 time(s), 0 of them retries; 70s used by earlier jobs)"
    )


def test_success_voids_the_queued_successor() -> None:
    text = chain(("start", 100, 1, 0), ("successor", 101, 100))
    state, _, current = status(
        text, {"100": own("succeeded", "driver finished", "COMPLETED"), "101": slurm("CANCELLED")}
    )
    assert (state, current) == ("succeeded", "100")


def test_an_ended_chain_reports_its_end() -> None:
    text = chain(
        ("start", 100, 1, 0),
        ("successor", 101, 100),
        (
            "verdict",
            100,
            "service-died",
            9,
            0,
            "retry",
            "a service died while the driver ran after 9s, 0 new rollout(s)",
        ),
        ("end", "failed", "gave up: 1 resumes without progress or after failures (max_retries 0); last: ..."),
    )
    state, detail, current = status(text, {"100": own("failed", "service policy died", "FAILED")})
    assert (state, current) == ("failed", "100")
    assert detail.startswith("gave up: 1 resumes") and detail.endswith(
        "(resumed 1 time(s), 1 of them retries; 9s used by earlier jobs)"
    )
    assert parse_chain(text).job_ids() == ["100"]  # an ended chain has nothing to come


def test_a_job_without_a_successor_says_why_it_will_not_resume() -> None:
    text = chain(("start", 100, 1, 0), ("nosuccessor", 100, "sbatch refused the resume job: QOS limit"))
    state, detail, _ = status(
        text, {"100": own("failed", "stopped by its walltime (SIGTERM)", "TIMEOUT", TimeLimit="1")}
    )
    assert state == "timed out" and detail.endswith("; not resumed: sbatch refused the resume job: QOS limit")


def test_a_user_cancel_of_the_waiting_successor_reads_cancelled() -> None:
    text = chain(("start", 100, 1, 0), ("successor", 101, 100))
    probe = {
        "100": own("failed", "", "TIMEOUT"),
        "101": probe_of({"cancelled_by_user": "1"}, {"JobState": "CANCELLED"}, ""),
    }
    assert status(text, probe)[:2] == ("cancelled", "cancelled by the user (gym eval cancel)")


def test_a_job_slurm_is_requeueing_is_queued_not_failed() -> None:
    """Right after a requeue Slurm shows the job COMPLETING, then PENDING, with Restarts=1, while
    its state file still holds the TERM of the run being requeued (attempt 0)."""
    stale = {"phase": "failed", "detail": "stopped by a signal (SIGTERM)", "attempt": "0"}
    for slurm_state in ("COMPLETING", "PENDING", "REQUEUED"):
        probe = {"100": probe_of(stale, {"JobState": slurm_state, "Restarts": "1", "Reason": "BeginTime"}, "")}
        state, detail, _ = status("", probe)
        assert state == "queued" and detail.startswith("requeued by Slurm"), (slurm_state, detail)


def test_the_requeued_run_s_own_end_is_its_state() -> None:
    done = {"phase": "succeeded", "detail": "driver finished", "attempt": "1"}
    probe = {"100": probe_of(done, {"JobState": "COMPLETING", "Restarts": "1"}, "")}
    assert status("", probe)[:2] == ("succeeded", "driver finished")
