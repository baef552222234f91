"""The library's use cases over a fake connection and a fake Slurm (tests/fakes): submit and its
recovery from a lost connection, status (resume chains included), cancel, logs and results.

The scripts are the real ones, run by bash here; the scheduler and the link to the submit host
are the fakes (tests/cluster runs the same code against the real Slurm and sshd)."""

from __future__ import annotations

import base64
import json
import os
import time
import warnings
from pathlib import Path

import pytest

from nemo_gym.orchestration import contract, library
from nemo_gym.orchestration.api import SubmitConfig
from nemo_gym.orchestration.chain import chain_record
from nemo_gym.orchestration.errors import UserError
from nemo_gym.orchestration.library import LogRequest
from nemo_gym.orchestration.record import SubmissionRecord, load_record

HOST = "login.fake"


def config(base: dict, tmp_path: Path, *benchmarks: str, **bench: dict) -> SubmitConfig:
    base["compute"]["cluster"]["hostname"] = HOST
    base["job"]["output_path"] = str(tmp_path / "runs")
    base["driver"]["benchmarks"] = {name: dict(bench.get(name, {})) for name in benchmarks}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return SubmitConfig.model_validate(base)


def submitted(base, tmp_path, conn, *benchmarks: str, **bench: dict) -> SubmissionRecord:
    submission = library.submit(library.prepare(config(base, tmp_path, *benchmarks, **bench)), connect=conn.connect)
    assert submission.interrupted is None and not submission.failed
    return submission.records[0]


def job_dir(record: SubmissionRecord, benchmark: str) -> Path:
    return Path(next(b.job_dir for b in record.benchmarks if b.benchmark == benchmark))


def job_wrote(record: SubmissionRecord, benchmark: str, job_id: str, phase: str, detail: str = "") -> None:
    """What a job's script writes as it goes: its state file."""
    state = job_dir(record, benchmark) / contract.state_dir(job_id)
    state.mkdir(parents=True, exist_ok=True)
    (state / contract.STATE_FILE).write_text(f"phase={phase}\ndetail={detail}\nattempt=0\n")


def job_file(record: SubmissionRecord, benchmark: str, rel: str, text: str) -> None:
    """A file a job writes in its directory (its artifacts, its logs)."""
    path = job_dir(record, benchmark) / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def by_benchmark(run: library.RunStatus) -> dict[str, tuple[str, str]]:
    return {job.benchmark: (job.state, job.detail) for job in run.jobs}


# -- submit ------------------------------------------------------------------------------------------

SUBMISSION = 2  # the script that stages and queues: the site's limits are asked before it


def test_submit_stages_the_run_queues_each_benchmark_and_records_it_twice(base, tmp_path, conn, cluster) -> None:
    record = submitted(base, tmp_path, conn, "a", "b")
    assert [(b.benchmark, b.job_id) for b in record.benchmarks] == [("a", "100"), ("b", "101")]
    assert [Path(c[-1]).parent.name for c in cluster.calls("sbatch")] == ["a", "b"]
    on_cluster = load_record((Path(record.run_dir) / contract.RECORD_FILE).read_text())
    in_index = load_record((tmp_path / "cache/nemo-gym/jobs" / f"{record.gym_job_id}.json").read_text())
    assert on_cluster == in_index == record
    assert (job_dir(record, "a") / contract.JOB_SCRIPT).stat().st_mode & 0o777 == 0o755
    assert conn.plan.scripts and len(conn.plan.scripts) == 3  # the site's limits, the submission, the record


def test_a_refused_sbatch_fails_only_its_benchmark(base, tmp_path, conn, cluster) -> None:
    cluster.refuse("/b/job.sh", "Invalid partition name specified")
    submission = library.submit(library.prepare(config(base, tmp_path, "a", "b", "c")), connect=conn.connect)
    ids = {b.benchmark: (b.job_id, b.error) for b in submission.records[0].benchmarks}
    assert ids["a"] == ("100", None) and ids["c"] == ("101", None)
    assert ids["b"][0] is None and "Invalid partition name specified" in ids["b"][1]
    assert [job.benchmark for _, job in submission.failed] == ["b"]


def test_site_noise_around_sbatch_never_becomes_a_job_id(base, tmp_path, conn, cluster) -> None:
    cluster.noise(["note: project quota 80%"], ["sbatch: INFO: site plugin says hi"])
    cluster.cluster_name = "gpu-cluster"
    record = submitted(base, tmp_path, conn, "a", "b")
    assert [b.job_id for b in record.benchmarks] == ["100", "101"]


def test_a_connection_lost_after_the_first_sbatch_is_recovered_into_a_true_record(
    base, tmp_path, conn, cluster
) -> None:
    conn.lose_during(SUBMISSION, after_output=f"{contract.JOB_MARKER}a:")
    submission = library.submit(library.prepare(config(base, tmp_path, "a", "b", "c")), connect=conn.connect)
    queued = {b.benchmark: b.job_id for b in submission.records[0].benchmarks}
    assert queued == {"a": "100", "b": None, "c": None}
    assert list(cluster.jobs()) == ["100"]  # nothing was submitted twice, nothing behind our back
    assert "1 of 3 benchmark(s) had been queued" in submission.interrupted
    assert submission.records[0].executor_metadata == {"submission": "interrupted"}
    errors = {b.benchmark: b.error for b in submission.records[0].benchmarks}
    assert errors["b"] == errors["c"] == "not submitted: the connection was lost before its sbatch ran"
    on_cluster = load_record((Path(submission.records[0].run_dir) / contract.RECORD_FILE).read_text())
    assert on_cluster == submission.records[0]


def test_a_connection_lost_after_everything_ran_recovers_every_job(base, tmp_path, conn, cluster) -> None:
    conn.lose_after(SUBMISSION)
    submission = library.submit(library.prepare(config(base, tmp_path, "a", "b")), connect=conn.connect)
    assert [b.job_id for b in submission.records[0].benchmarks] == ["100", "101"]
    assert "all 2 benchmark(s) were queued and are recorded in run" in submission.interrupted


def test_a_connection_that_cannot_be_reopened_says_where_the_truth_is(base, tmp_path, conn, cluster) -> None:
    conn.lose_during(SUBMISSION, after_output=f"{contract.JOB_MARKER}a:")
    original_take = conn.plan.take

    def refuse_after_the_loss(script: str):
        fault = original_take(script)
        conn.refuse_connect()
        return fault

    conn.plan.take = refuse_after_the_loss  # type: ignore[method-assign]
    with pytest.raises(UserError, match=r"could not be re-opened.*\.gym-submitted on login\.fake"):
        library.submit(library.prepare(config(base, tmp_path, "a", "b")), connect=conn.connect)


def test_a_record_that_cannot_be_written_names_the_queued_jobs(base, tmp_path, conn, cluster) -> None:
    conn.fail_file_writes("disk full")
    prepared = library.prepare(config(base, tmp_path, "a", "b"))
    run = prepared.runs[0].plan
    with pytest.raises(UserError) as caught:
        library.submit(prepared, connect=conn.connect)
    assert caught.value.problems == [
        f"2 job(s) of run {run.run_id} were queued but the records could not be written into {run.run_dir} "
        f"(disk full); already queued: a=100, b=101; the local index has them (gym eval status {run.run_id})"
    ]
    assert [
        b.job_id
        for b in load_record(
            (Path(os.environ["XDG_CACHE_HOME"]) / "nemo-gym/jobs" / f"{run.run_id}.json").read_text()
        ).benchmarks
    ] == ["100", "101"]


def test_a_record_write_failing_after_a_reconnect_is_told_as_such_not_as_a_failed_reconnect(
    base, tmp_path, conn, cluster
) -> None:
    conn.lose_after(SUBMISSION)  # every job queued, then the link goes; the reconnect works
    original_take = conn.plan.take

    def full_disk_after_the_loss(script: str):
        fault = original_take(script)
        if len(conn.plan.scripts) == SUBMISSION:
            conn.fail_file_writes("disk full")
        return fault

    conn.plan.take = full_disk_after_the_loss  # type: ignore[method-assign]
    prepared = library.prepare(config(base, tmp_path, "a", "b"))
    run = prepared.runs[0].plan
    with pytest.raises(UserError) as caught:
        library.submit(prepared, connect=conn.connect)
    [message] = caught.value.problems
    assert "could not be re-opened" not in message
    assert message == (
        f"2 job(s) of run {run.run_id} were queued but the records could not be written into {run.run_dir} "
        f"(disk full); already queued: a=100, b=101; the local index has them (gym eval status {run.run_id})"
    )
    assert len(conn.scripts) == 4  # the limits, the submission, the recovery's read-back, the record write


def test_the_queued_jobs_an_error_lists_are_bounded() -> None:
    from nemo_gym.orchestration.verbs.submit.use_case import _queued_jobs

    def rid(name: str) -> str:
        return f"gym-job-20260101T000000Z-0000{name[1]}0"

    def record(name: str, *jobs: tuple[str, str | None]) -> SubmissionRecord:
        run_id = rid(name)
        return SubmissionRecord.model_validate(
            {
                "gym_job_id": run_id,
                "submitted_at": "2026-01-01T00:00:00Z",
                "run_dir": f"/runs/{run_id}",
                "cluster": "c",
                "executor": "slurm",
                "submitted_by": "me",
                "benchmarks": [{"benchmark": b, "job_dir": f"/runs/{run_id}/{b}", "job_id": j} for b, j in jobs],
            }
        )

    records = [record("r1", ("a", "1"), ("b", None), ("c", "3")), record("r2", ("a", "4"), ("b", "5"))]
    assert _queued_jobs(records, None) == "a=1, c=3; a=4, b=5"
    sweep = object()  # only its presence matters: a sweep's pairs are named by run
    r1, r2 = rid("r1"), rid("r2")
    assert _queued_jobs(records, sweep, limit=3) == f"run {r1}: a=1, c=3; run {r2}: a=4 and 1 more"  # type: ignore[arg-type]
    assert _queued_jobs(records, sweep, limit=2) == f"run {r1}: a=1, c=3 and 2 more"  # type: ignore[arg-type]
    assert _queued_jobs([record("r3", ("a", None))], None) == "none"


def test_a_missing_mount_source_stops_the_submission_before_anything_is_staged(base, tmp_path, conn, cluster) -> None:
    base["driver"]["mounts"] = [str(tmp_path / "no-such-dir") + ":/data"]
    with pytest.raises(UserError, match=r"driver\.mounts: source .*no-such-dir' does not exist on the submit host"):
        library.submit(library.prepare(config(base, tmp_path, "a")), connect=conn.connect)
    assert not cluster.calls("sbatch") and not (tmp_path / "runs").exists()


# -- status ------------------------------------------------------------------------------------------


def test_status_combines_the_jobs_own_word_with_slurms(base, tmp_path, conn, cluster) -> None:
    record = submitted(base, tmp_path, conn, "queued", "running", "done", "broken", "gone")
    cluster.set_state("100", "PENDING", reason="Priority")
    cluster.set_state("101", "RUNNING")
    job_wrote(record, "running", "101", "running", "driver")
    job_file(record, "running", contract.ROLLOUTS_FILE, "{}\n" * 7)
    cluster.set_state("102", "COMPLETED")
    job_wrote(record, "done", "102", "succeeded", "driver finished")
    cluster.set_state("103", "FAILED")
    job_wrote(record, "broken", "103", "failed", "service policy died on node n1 (exit status 7)")
    cluster.set_state("104", "COMPLETED")
    cluster.forget("104")
    run = library.status([record], connect=conn.connect)[0]
    assert by_benchmark(run) == {
        "queued": ("queued", "waiting in the Slurm queue (Priority)"),
        "running": ("running", "driver running, 7 rollout(s) written"),
        "done": ("succeeded", "driver finished"),
        "broken": ("failed", "service policy died on node n1 (exit status 7)"),
        "gone": ("unknown", "Slurm no longer knows job 104 and the job recorded no outcome"),
    }
    assert not run.final and not run.succeeded
    assert len(conn.plan.scripts) == 4  # limits, submit, record, and one probe for five benchmarks


def test_status_while_slurmctld_is_down_shows_each_job_as_it_last_wrote(base, tmp_path, conn, cluster) -> None:
    record = submitted(base, tmp_path, conn, "running", "waiting", "done")
    cluster.set_state("100", "RUNNING")
    job_wrote(record, "running", "100", "running", "driver")
    job_file(record, "running", contract.ROLLOUTS_FILE, "{}\n" * 3)
    cluster.set_state("102", "COMPLETED")
    job_wrote(record, "done", "102", "succeeded", "driver finished")
    cluster.slurmctld_down = True
    down = "Slurm cannot be reached (Slurmctld(primary) at fake-ctl is DOWN); "
    assert by_benchmark(library.status([record], connect=conn.connect)[0]) == {
        "running": ("running", down + "as the job last wrote: driver running, 3 rollout(s) written"),
        "waiting": ("queued", down + "the job has written nothing yet, so it was last known queued"),
        "done": ("succeeded", "driver finished"),
    }
    # Asked once however many jobs: a down controller answers nothing for each.
    assert len([argv for argv in cluster.calls("scontrol") if argv[:1] == ["ping"]]) == 1
    cluster.slurmctld_down = False
    assert by_benchmark(library.status([record], connect=conn.connect)[0])["waiting"][0] == "queued"


def test_status_without_accounting_and_with_it(base, tmp_path, conn, cluster) -> None:
    record = submitted(base, tmp_path, conn, "a")
    cluster.set_state("100", "TIMEOUT", time_limit="00:01:00")
    cluster.forget("100")
    assert by_benchmark(library.status([record], connect=conn.connect)[0])["a"][0] == "unknown"
    cluster.accounting = True
    assert by_benchmark(library.status([record], connect=conn.connect)[0])["a"] == (
        "timed out",
        "walltime reached (its limit)",
    )


def test_status_of_a_resumable_chain_follows_it_to_the_job_that_resumes(base, tmp_path, conn, cluster) -> None:
    record = submitted(base, tmp_path, conn, "long", long={"resumable": True})
    successor = cluster.add_job("gym-long", "PENDING")
    cluster.set_state(successor, "PENDING", reason="Dependency")
    chain = job_dir(record, "long") / contract.CHAIN_FILE
    chain.parent.mkdir(parents=True, exist_ok=True)
    chain.write_text(chain_record("start", "100", 1, 0) + chain_record("successor", successor, "100"))
    cluster.set_state("100", "TIMEOUT", time_limit="00:01:00")
    job_wrote(record, "long", "100", "failed", "stopped by its walltime (SIGTERM)")
    [job] = library.status([record], connect=conn.connect)[0].jobs
    assert (job.state, job.job_id, job.chain) == ("queued", successor, ["100", successor])
    assert job.detail == (
        f"resuming: job 100 timed out (walltime reached (00:01:00)); job {successor} waits in the queue (Dependency)"
    )
    with chain.open("a") as fh:
        fh.write(chain_record("end", "failed", "gave up: 4 resumes without progress"))
    [job] = library.status([record], connect=conn.connect)[0].jobs
    assert (job.state, job.detail) == ("failed", "gave up: 4 resumes without progress")


def test_a_run_nobody_could_queue_needs_no_connection(base, tmp_path, conn, cluster) -> None:
    cluster.refuse("job.sh", "Invalid account")
    record = library.submit(library.prepare(config(base, tmp_path, "a")), connect=conn.connect).records[0]
    conn.refuse_connect()
    [job] = library.status([record], connect=lambda host: (_ for _ in ()).throw(AssertionError("connected")))[0].jobs
    assert job.state == "failed" and "Invalid account" in job.detail


# -- cancel ------------------------------------------------------------------------------------------


def test_cancel_stops_what_runs_and_leaves_what_ended(base, tmp_path, conn, cluster) -> None:
    record = submitted(base, tmp_path, conn, "a", "b")
    cluster.set_state("100", "RUNNING")
    job_wrote(record, "a", "100", "running", "driver")
    cluster.set_state("101", "COMPLETED")
    job_wrote(record, "b", "101", "succeeded", "driver finished")
    report = library.cancel([record], connect=conn.connect)[0]
    assert [j.benchmark for j in report.cancelled] == ["a"] and [j.benchmark for j in report.already_ended] == ["b"]
    assert report.ok and cluster.cancelled_ids() == ["100"]
    assert (job_dir(record, "a") / contract.state_dir("100") / contract.CANCELLED_FILE).exists()
    assert by_benchmark(library.status([record], connect=conn.connect)[0])["a"] == (
        "cancelled",
        "cancelled by the user (gym eval cancel)",
    )


def test_cancel_stops_a_chain_its_running_job_and_the_one_queued_behind_it(base, tmp_path, conn, cluster) -> None:
    record = submitted(base, tmp_path, conn, "long", long={"resumable": True})
    cluster.set_state("100", "RUNNING")
    successor = cluster.add_job("gym-long", "PENDING")
    chain = job_dir(record, "long") / contract.CHAIN_FILE
    chain.parent.mkdir(parents=True, exist_ok=True)
    chain.write_text(chain_record("start", "100", 1, 0) + chain_record("successor", successor, "100"))
    job_wrote(record, "long", "100", "running", "driver")
    report = library.cancel([record], connect=conn.connect)[0]
    assert report.ok and sorted(cluster.cancelled_ids()) == sorted(["100", successor])
    assert (job_dir(record, "long") / contract.CHAIN_CANCELLED_FILE).exists()


def test_a_refused_scancel_is_reported_not_hidden(base, tmp_path, conn, cluster) -> None:
    record = submitted(base, tmp_path, conn, "a")
    cluster.set_state("100", "RUNNING")
    cluster.remove_commands("scancel")
    report = library.cancel([record], connect=conn.connect)[0]
    assert not report.ok and [j.benchmark for j in report.refused] == ["a"]


def test_cancel_asks_slurm_once_for_every_job_and_refuses_only_the_job_it_names(base, tmp_path, conn, cluster) -> None:
    record = submitted(base, tmp_path, conn, "a", "b", "c")
    for job_id in ("100", "101", "102"):
        cluster.set_state(job_id, "RUNNING")
    cluster.deny_cancel("101")
    report = library.cancel([record], connect=conn.connect)[0]
    assert len(cluster.calls("scancel")) == 1 and cluster.cancelled_ids() == ["100", "101", "102"]
    assert [j.benchmark for j in report.refused] == ["b"] and [j.benchmark for j in report.cancelled] == ["a", "c"]


def test_a_cancel_script_that_stops_before_a_run_cancelled_nothing_of_it(
    base, tmp_path, conn, cluster, monkeypatch
) -> None:
    record = submitted(base, tmp_path, conn, "a", "b")
    cluster.set_state("100", "RUNNING")
    cluster.set_state("101", "RUNNING")
    monkeypatch.setenv("TMPDIR", str(tmp_path / "gone"))  # the script's mktemp fails before any run's part
    report = library.cancel([record], connect=conn.connect)[0]
    assert not report.ok and [j.benchmark for j in report.refused] == ["a", "b"] and not cluster.cancelled_ids()


def test_an_ended_job_of_a_chain_that_strict_scancel_reports_is_no_refusal(base, tmp_path, conn, cluster) -> None:
    record = submitted(base, tmp_path, conn, "long", long={"resumable": True})
    cluster.set_state("100", "COMPLETED")
    successor = cluster.add_job("gym-long", "RUNNING")
    chain = job_dir(record, "long") / contract.CHAIN_FILE
    chain.parent.mkdir(parents=True, exist_ok=True)
    chain.write_text(chain_record("start", "100", 1, 0) + chain_record("start", successor, 2, 0))
    job_wrote(record, "long", successor, "running", "driver")
    cluster.strict_scancel = True
    report = library.cancel([record], connect=conn.connect)[0]
    assert report.ok and [j.benchmark for j in report.cancelled] == ["long"]
    assert cluster.job(successor)["state"] == "CANCELLED"


def test_cancel_of_one_benchmark_of_a_shared_deployment_marks_it_for_the_job_to_skip(
    base, tmp_path, conn, cluster
) -> None:
    base["job"]["deployment"] = "shared"
    record = submitted(base, tmp_path, conn, "a", "b")
    assert {b.job_id for b in record.benchmarks} == {"100"}
    cluster.set_state("100", "RUNNING")
    report = library.cancel([record], ["a"], connect=conn.connect)[0]
    assert report.ok and report.job_left_running and not cluster.cancelled_ids()
    assert (job_dir(record, "a") / contract.state_dir("100") / contract.CANCELLED_FILE).exists()
    assert not (job_dir(record, "b") / contract.state_dir("100") / contract.CANCELLED_FILE).exists()
    assert library.cancel([record], connect=conn.connect)[0].ok and cluster.cancelled_ids() == ["100"]


# -- logs --------------------------------------------------------------------------------------------


def test_logs_of_the_job_a_service_on_every_node_and_the_driver(base, tmp_path, conn, cluster) -> None:
    record = submitted(base, tmp_path, conn, "a")
    logs = job_dir(record, "a") / contract.LOGS_DIR
    (job_dir(record, "a") / contract.job_log("100")).write_text("job line\n")
    (logs / "policy-100-n1.log").write_text("head\n")
    (logs / "policy-100-n2.log").write_text("rank 1\n")
    (logs / "driver-100.log").write_text("d1\nd2\nd3\n")
    assert library.logs([record], LogRequest(), connect=conn.connect)[0].text == "job line\n"
    both = library.logs([record], LogRequest(service="policy"), connect=conn.connect)[0].text or ""
    assert "head" in both and "rank 1" in both
    assert library.logs([record], LogRequest(driver=True, lines=2), connect=conn.connect)[0].text == "d2\nd3\n"
    [missing] = library.logs([record], LogRequest(service="judge"), connect=conn.connect)
    assert missing.text is None and "no log of service 'judge' for a yet" in (missing.problem or "")


def test_logs_of_a_job_never_queued_say_so_without_connecting(base, tmp_path, conn, cluster) -> None:
    cluster.refuse("/b/job.sh", "Invalid partition name specified")
    submission = library.submit(library.prepare(config(base, tmp_path, "a", "b")), connect=conn.connect)
    [record] = submission.records
    conn.refuse_connect()  # the host is unreachable now
    scripts = len(conn.scripts)
    [log] = library.logs([record], LogRequest("b"), connect=conn.connect)
    assert log.text is None and (log.problem or "").startswith("b was never queued (")
    assert len(conn.scripts) == scripts


def test_logs_tell_every_runs_problem_when_the_host_cannot_be_reached(base, tmp_path, conn, cluster) -> None:
    cluster.refuse("/b/job.sh", "Invalid partition name specified", times=1)
    never = library.submit(library.prepare(config(base, tmp_path, "a", "b")), connect=conn.connect).records[0]
    queued = submitted(base, tmp_path, conn, "b")
    conn.refuse_connect()
    with pytest.raises(UserError) as caught:
        library.logs([never, queued], LogRequest("b"), connect=conn.connect)
    told, unreachable = caught.value.problems
    assert told.startswith(f"run {never.gym_job_id}: b was never queued (")
    assert unreachable.startswith("cannot connect to login.fake over ssh")


def test_logs_of_a_chain_are_its_latest_jobs(base, tmp_path, conn, cluster) -> None:
    record = submitted(base, tmp_path, conn, "long", long={"resumable": True})
    chain = job_dir(record, "long") / contract.CHAIN_FILE
    chain.parent.mkdir(parents=True, exist_ok=True)
    chain.write_text(chain_record("start", "100", 1, 0) + chain_record("start", "105", 9, 3))
    (job_dir(record, "long") / contract.job_log("100")).write_text("first job\n")
    (job_dir(record, "long") / contract.job_log("105")).write_text("resumed job\n")
    assert library.logs([record], LogRequest(), connect=conn.connect)[0].text == "resumed job\n"


def test_logs_name_a_benchmark_when_the_run_has_several(base, tmp_path, conn, cluster) -> None:
    record = submitted(base, tmp_path, conn, "a", "b")
    with pytest.raises(UserError, match="has 2 benchmarks; name one: a, b"):
        library.logs([record], LogRequest(), connect=conn.connect)


# -- results ----------------------------------------------------------------------------------------


def rollout_rows(pairs: list[tuple[int, int]], reward: float = 1.0) -> str:
    return "".join(json.dumps({"_ng_task_index": t, "_ng_rollout_index": r, "reward": reward}) + "\n" for t, r in pairs)


def test_results_are_results_only_when_the_job_succeeded(base, tmp_path, conn, cluster) -> None:
    record = submitted(base, tmp_path, conn, "good", "cut")
    pairs = [(t, 0) for t in range(4)]
    for name, job_id, phase, state in (("good", "100", "succeeded", "COMPLETED"), ("cut", "101", "failed", "FAILED")):
        cluster.set_state(job_id, state)
        job_wrote(record, name, job_id, phase)
        job_file(record, name, contract.ROLLOUTS_FILE, rollout_rows(pairs[:3] if name == "cut" else pairs))
        job_file(record, name, contract.MATERIALIZED_INPUTS_FILE, rollout_rows(pairs))
        job_file(
            record, name, "artifacts/b_aggregate_metrics.json", json.dumps({"mean/reward": 0.75, "nested": {"k": 2}})
        )
    run = library.results([record], connect=conn.connect)[0]
    good, cut = run.benchmarks
    assert good.metrics == {"mean/reward": 0.75, "nested/k": 2.0} and good.complete and good.note is None
    assert (good.samples, good.expected_samples, good.value) == (4, 4, 1.0)
    assert not cut.complete and cut.missing == [(3, 0)]
    assert cut.note == "partial: the job failed; 3/4 samples on disk"
    assert not run.complete and run.states == {"good": "succeeded", "cut": "failed"}
    assert len(conn.plan.scripts) == 5  # limits, submit, record, then one connection: probe and files


def test_results_decode_whatever_bytes_a_metrics_file_holds(base, tmp_path, conn, cluster) -> None:
    record = submitted(base, tmp_path, conn, "a")
    cluster.set_state("100", "COMPLETED")
    job_wrote(record, "a", "100", "succeeded")
    job_file(record, "a", "artifacts/x_aggregate_metrics.json", "{not json")
    [result] = library.results([record], connect=conn.connect)[0].benchmarks
    assert not result.complete and result.note is not None and "unreadable metrics file" in result.note
    assert base64  # the payload travels base64-encoded; a broken file is named, not a crash


# -- GPU-hours and wall time ---------------------------------------------------------------------------

GPU_POOL = {"gpu": {"partition": "debug", "nodes": 2, "gpus_per_node": 4}}


def job_events(record: SubmissionRecord, benchmark: str, job_id: str, *lines: str, shared: bool = False) -> None:
    directory = Path(record.run_dir) / contract.SHARED_DEPLOYMENT_DIR if shared else job_dir(record, benchmark)
    state = directory / contract.state_dir(job_id)
    state.mkdir(parents=True, exist_ok=True)
    (state / contract.EVENTS_FILE).write_text("".join(line + "\n" for line in lines))


def test_the_record_keeps_the_gpus_each_job_holds(base, tmp_path, conn, cluster) -> None:
    base["compute"]["cluster"]["node_pools"] = GPU_POOL
    record = submitted(base, tmp_path, conn, "a", "b")
    assert [b.gpus for b in record.benchmarks] == [8, 8]


def test_without_accounting_gpu_hours_are_the_jobs_own_times_the_planned_gpus(base, tmp_path, conn, cluster) -> None:
    base["compute"]["cluster"]["node_pools"] = GPU_POOL
    record = submitted(base, tmp_path, conn, "a", "b")
    for name, job_id in (("a", "100"), ("b", "101")):
        cluster.set_state(job_id, "COMPLETED")
        job_wrote(record, name, job_id, "succeeded", "driver finished")
    job_events(record, "a", "100", "1000.25 job-start", "1000.5 driver-start", "1900.25 job-end 0")
    job_events(record, "b", "101", "2000 job-start", "3800 job-end 0")
    run = library.status([record], connect=conn.connect)[0]
    a, b = (json.loads(observe_json(run))["jobs"][i] for i in (0, 1))
    assert (a["gpus"], a["wall_seconds"], a["gpu_hours"], a["usage_source"]) == (8, 900.0, 2.0, "job record")
    assert (b["wall_seconds"], b["gpu_hours"]) == (1800.0, 4.0)
    assert (run.usage.gpu_hours, run.usage.wall_seconds) == (6.0, 2700.0)
    assert json.loads(observe_json(run))["gpu_hours"] == 6.0


def test_with_accounting_gpu_hours_come_from_sacct(base, tmp_path, conn, cluster) -> None:
    base["compute"]["cluster"]["node_pools"] = GPU_POOL
    record = submitted(base, tmp_path, conn, "a")
    cluster.accounting = True
    cluster.set_state("100", "COMPLETED")
    cluster.set_times("100", 10_000, 13_600)
    job_wrote(record, "a", "100", "succeeded")
    job_events(record, "a", "100", "10005 job-start", "10010 job-end 0")  # accounting wins over the job's own word
    [job] = library.status([record], connect=conn.connect)[0].jobs
    assert (job.usage.wall_seconds, job.usage.gpu_hours, job.usage.gpus, job.usage.source) == (
        3600.0,
        8.0,
        8,
        "accounting",
    )
    # One sacct for the probe (the states and the GPU-hours alike), of every run of a requeued job.
    [sacct] = [argv for argv in cluster.calls("sacct") if any("ElapsedRaw,AllocTRES" in arg for arg in argv)]
    assert "-D" in sacct
    cluster.slurmdbd_down = True  # accounting unreachable: the job's own record instead
    [job] = library.status([record], connect=conn.connect)[0].jobs
    assert (job.usage.wall_seconds, job.usage.gpu_hours, job.usage.source) == (5.0, 8 * 5 / 3600, "job record")


def test_benchmarks_that_share_a_job_count_its_accounting_once(base, tmp_path, conn, cluster) -> None:
    base["compute"]["cluster"]["node_pools"] = GPU_POOL
    base["job"]["deployment"] = "shared"
    record = submitted(base, tmp_path, conn, "a", "b", "c")
    cluster.accounting = True
    cluster.set_state("100", "COMPLETED")
    cluster.set_times("100", 10_000, 13_600)
    statuses = library.status([record], connect=conn.connect)[0]
    assert statuses.usage.wall_seconds == 3600.0 and statuses.usage.gpu_hours == 8.0


def test_a_job_end_on_the_events_files_last_unterminated_line_counts(base, tmp_path, conn, cluster) -> None:
    record = submitted(base, tmp_path, conn, "a")
    cluster.set_state("100", "COMPLETED")
    job_wrote(record, "a", "100", "succeeded", "driver finished")
    events = job_dir(record, "a") / contract.state_dir("100") / contract.EVENTS_FILE
    events.write_text("10005 job-start\n10010 job-end 0")  # no line break after the last line
    [job] = library.status([record], connect=conn.connect)[0].jobs
    assert job.usage.wall_seconds == 5.0


def test_a_resumed_chain_sums_its_jobs(base, tmp_path, conn, cluster) -> None:
    base["compute"]["cluster"]["node_pools"] = GPU_POOL
    record = submitted(base, tmp_path, conn, "long", long={"resumable": True})
    successor = cluster.add_job("gym-long", "COMPLETED")
    chain = job_dir(record, "long") / contract.CHAIN_FILE
    chain.parent.mkdir(parents=True, exist_ok=True)
    chain.write_text(
        chain_record("start", "100", 1000, 0)
        + chain_record("successor", successor, "100")
        + chain_record("start", successor, 5000, 40)
    )
    cluster.set_state("100", "TIMEOUT")
    job_wrote(record, "long", "100", "failed", "stopped by its walltime")
    job_wrote(record, "long", successor, "succeeded", "driver finished")
    job_events(record, "long", "100", "1000 job-start", "4600 job-end 143")
    job_events(record, "long", successor, "5000 job-start", "6800 job-end 0")
    [job] = library.status([record], connect=conn.connect)[0].jobs
    assert job.chain == ["100", successor] and job.usage.wall_seconds == 3600 + 1800 and job.usage.gpu_hours == 12.0


def test_benchmarks_of_a_shared_deployment_show_its_job_and_the_total_counts_it_once(
    base, tmp_path, conn, cluster
) -> None:
    base["compute"]["cluster"]["node_pools"] = GPU_POOL
    base["job"]["deployment"] = "shared"
    record = submitted(base, tmp_path, conn, "a", "b")
    cluster.set_state("100", "COMPLETED")
    for name in ("a", "b"):
        job_wrote(record, name, "100", "succeeded", "driver finished")
    job_events(record, "", "100", "0 job-start", "100 driver-start a", "900 job-end 0", shared=True)
    run = library.status([record], connect=conn.connect)[0]
    assert [j.usage.gpu_hours for j in run.jobs] == [2.0, 2.0]
    assert run.usage.gpu_hours == 2.0 and run.usage.wall_seconds == 900.0


def test_a_running_job_counts_up_to_now(base, tmp_path, conn, cluster) -> None:
    base["compute"]["cluster"]["node_pools"] = GPU_POOL
    record = submitted(base, tmp_path, conn, "a")
    cluster.set_state("100", "RUNNING")
    job_wrote(record, "a", "100", "running", "driver")
    started = time.time() - 360
    job_events(record, "a", "100", f"{started} job-start")
    [job] = library.status([record], connect=conn.connect)[0].jobs
    assert job.state == "running" and 358 <= (job.usage.wall_seconds or 0) <= 380 and not job.usage.approximate


# -- samples in status ----------------------------------------------------------------------------------


def test_status_calls_a_finished_job_with_missing_samples_incomplete(base, tmp_path, conn, cluster) -> None:
    record = submitted(base, tmp_path, conn, "a", "b")
    pairs = [(t, r) for t in range(3) for r in range(2)]
    for name, job_id in (("a", "100"), ("b", "101")):
        cluster.set_state(job_id, "COMPLETED")
        job_wrote(record, name, job_id, "succeeded", "driver finished")
        job_file(record, name, contract.MATERIALIZED_INPUTS_FILE, rollout_rows(pairs))
    job_file(record, "a", contract.ROLLOUTS_FILE, rollout_rows(pairs))
    job_file(record, "b", contract.ROLLOUTS_FILE, rollout_rows([pairs[0], pairs[2], pairs[5], pairs[0]]))
    run = library.status([record], connect=conn.connect)[0]
    assert by_benchmark(run) == {
        "a": ("succeeded", "driver finished"),
        "b": (
            "incomplete",
            "driver finished, but 3 of 6 samples are missing (task 0 rollout 1, task 1 rollout 1, task 2 rollout 0)",
        ),
    }
    assert run.final and not run.succeeded
    b = run.jobs[1].as_dict()
    assert (b["complete"], b["expected_samples"], b["samples"], b["missing_samples"], b["duplicates"]) == (
        False,
        6,
        3,
        3,
        1,
    )


def test_watching_counts_the_samples_of_an_ended_job_once(base, tmp_path, conn, cluster) -> None:
    record = submitted(base, tmp_path, conn, "a")
    cluster.set_state("100", "COMPLETED")
    job_wrote(record, "a", "100", "succeeded", "driver finished")
    job_file(record, "a", contract.MATERIALIZED_INPUTS_FILE, rollout_rows([(0, 0), (1, 0)]))
    job_file(record, "a", contract.ROLLOUTS_FILE, rollout_rows([(0, 0), (1, 0)]))
    first = library.status([record], connect=conn.connect)[0]
    job_file(record, "a", contract.ROLLOUTS_FILE, rollout_rows([(0, 0)]))  # a final count cannot change ...
    again = library.status([record], connect=conn.connect, previous=[first])[0]
    assert again.jobs[0].state == "succeeded" and again.jobs[0].check == first.jobs[0].check  # ... so it is not redone
    assert library.status([record], connect=conn.connect)[0].jobs[0].state == "incomplete"


def test_no_count_while_the_job_runs(base, tmp_path, conn, cluster) -> None:
    record = submitted(base, tmp_path, conn, "a")
    cluster.set_state("100", "RUNNING")
    job_wrote(record, "a", "100", "running", "driver")
    job_file(record, "a", contract.MATERIALIZED_INPUTS_FILE, rollout_rows([(0, 0), (1, 0)]))
    [job] = library.status([record], connect=conn.connect)[0].jobs
    assert job.state == "running" and job.check is None


def observe_json(run: library.RunStatus) -> str:
    from nemo_gym.orchestration.observe import statuses_json

    return statuses_json(run.record, run.jobs)


def test_a_job_killed_without_its_end_record_counts_to_its_last_sign_of_life(base, tmp_path, conn, cluster) -> None:
    base["compute"]["cluster"]["node_pools"] = GPU_POOL
    record = library.submit(library.prepare(config(base, tmp_path / "with spaces", "a")), connect=conn.connect).records[
        0
    ]
    assert " " in record.benchmarks[0].job_dir
    cluster.set_state("100", "NODE_FAIL")
    job_wrote(record, "a", "100", "running", "driver")
    job_events(record, "a", "100", "1000 job-start", "1010 driver-start")
    state = job_dir(record, "a") / contract.state_dir("100") / contract.STATE_FILE
    os.utime(state, (1000 + 1800, 1000 + 1800))  # the job's last write before the node died
    [job] = library.status([record], connect=conn.connect)[0].jobs
    assert job.state == "failed"
    assert (job.usage.wall_seconds, job.usage.gpu_hours, job.usage.approximate) == (1800.0, 4.0, True)
