"""A sweep's runs whose services are the same share one deployment (job.deployment: shared): the
first run's shared job runs every one of their benchmarks, each in its own run's directory; the
others queue nothing and are answered by that job. Over the fake connection and fake Slurm, with
the real scripts run by bash."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
import yaml

from nemo_gym.orchestration import contract, library
from nemo_gym.orchestration.api import SubmitConfig
from nemo_gym.orchestration.errors import UserError
from nemo_gym.orchestration.plan.sharing import deployment_key

HOST = "login.fake"
TEMPERATURES = "++driver.benchmarks.math.run.temperature=0.2,0.6,1.0"


@pytest.fixture
def config_file(base, tmp_path: Path) -> Path:
    base["compute"]["cluster"]["hostname"] = HOST
    base["job"] = {"output_path": str(tmp_path / "runs"), "deployment": "shared"}
    base["driver"]["benchmarks"] = {"math": {}, "code": {}}
    path = tmp_path / "eval.yaml"
    path.write_text(yaml.safe_dump(base, sort_keys=False))
    return path


def prepared(config_file: Path, *overrides: str) -> library.Prepared:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return library.prepare(library.compose(config_file, list(overrides), multirun=True))


def test_runs_that_differ_only_in_the_driver_share_the_first_run_s_job(config_file) -> None:
    runs = prepared(config_file, TEMPERATURES).runs
    host, *guests = [run.plan for run in runs]
    assert len({deployment_key(plan) for plan in (host, *guests)}) == 1
    assert host.host is None and [job.job_dir for job in host.guests] == [
        job.job_dir for guest in guests for job in guest.jobs
    ]
    assert all(guest.host == (host.run_id, host.shared.job_dir) and guest.submitted_jobs == () for guest in guests)
    script = runs[0].staged.files[f"{contract.SHARED_DEPLOYMENT_DIR}/{contract.JOB_SCRIPT}"].content
    # One job, its services once, every run's benchmarks by their own directories.
    for guest in guests:
        assert f"[{guest.run_id}/math]={guest.run_dir}/math" in script
    assert script.count("gym_wait_http policy") == 1
    # A guest stages its benchmarks' drivers, not a job of its own.
    files = runs[1].staged.files
    assert "math/steps/driver.sh" in files and not any(f.startswith(contract.SHARED_DEPLOYMENT_DIR) for f in files)
    assert "temperature=0.6" in files["math/steps/driver.sh"].content


def test_runs_whose_services_differ_keep_a_deployment_each(config_file) -> None:
    runs = prepared(config_file, "services.policy.model=/ckpt/a,/ckpt/b").runs
    assert all(run.plan.host is None and not run.plan.guests for run in runs)


def test_per_benchmark_runs_are_told_they_could_share(config_file, tmp_path) -> None:
    data = yaml.safe_load(config_file.read_text())
    data["job"]["deployment"] = "per_benchmark"
    config_file.write_text(yaml.safe_dump(data))
    assert prepared(config_file, TEMPERATURES).notes == (
        "3 runs of the sweep start the same services: job.deployment=shared would start them once for all of "
        "those runs (one job that runs each run's benchmarks in turn)",
    )
    assert prepared(config_file, "services.policy.model=/ckpt/a,/ckpt/b").notes == ()


def test_one_job_is_queued_and_every_run_records_it_with_where_it_runs(config_file, conn, cluster) -> None:
    submission = library.submit(prepared(config_file, TEMPERATURES), connect=conn.connect)
    assert not submission.failed and submission.interrupted is None
    assert len(cluster.calls("sbatch")) == 1
    host, *guests = submission.records
    [shared_id] = {b.job_id for r in submission.records for b in r.benchmarks}
    assert shared_id is not None
    assert host.deployment_host == host.gym_job_id and host.deployment_shared_with == [g.gym_job_id for g in guests]
    assert not host.is_guest and (host.schema_version, guests[0].schema_version) == (2, 2)
    for guest in guests:
        assert guest.deployment_host == host.gym_job_id and guest.is_guest
        assert guest.shared_deployment_dir == f"{host.run_dir}/{contract.SHARED_DEPLOYMENT_DIR}"
        assert set(guest.deployment_shared_with) == {host.gym_job_id} | {g.gym_job_id for g in guests} - {
            guest.gym_job_id
        }


def test_status_of_a_guest_reads_its_own_benchmarks_written_by_the_host_s_job(config_file, conn, cluster) -> None:
    submission = library.submit(prepared(config_file, TEMPERATURES), connect=conn.connect)
    host, guest, _ = submission.records
    [shared_id] = {b.job_id for b in host.benchmarks}
    cluster.set_state(shared_id, "RUNNING")
    for record, phase in ((host, "succeeded"), (guest, "running")):
        for bench in record.benchmarks:
            state = Path(bench.job_dir) / contract.state_dir(shared_id)
            state.mkdir(parents=True, exist_ok=True)
            (state / contract.STATE_FILE).write_text(f"phase={phase}\ndetail=driver\nattempt=0\n")
    host_status, guest_status, _ = library.status(submission.records, connect=conn.connect)
    assert [j.state for j in guest_status.jobs] == ["running", "running"]
    assert [j.job_id for j in guest_status.jobs] == [shared_id, shared_id]


def marker(record, job_id: str) -> list[bool]:
    return [
        (Path(b.job_dir) / contract.state_dir(job_id) / contract.CANCELLED_FILE).exists() for b in record.benchmarks
    ]


def test_cancelling_one_run_of_a_shared_deployment_marks_it_for_the_job_to_skip(config_file, conn, cluster) -> None:
    submission = library.submit(prepared(config_file, TEMPERATURES), connect=conn.connect)
    host, guest, last = submission.records
    [shared_id] = {b.job_id for b in host.benchmarks}
    cluster.set_state(shared_id, "RUNNING")
    [report] = library.cancel([guest], connect=conn.connect)
    assert report.ok and report.job_left_running and [j.benchmark for j in report.cancelled] == ["math", "code"]
    assert not cluster.calls("scancel")  # the job goes on for the host and the last run
    assert (
        marker(guest, shared_id) == [True, True] and marker(host, shared_id) == marker(last, shared_id) == [False] * 2
    )
    # The job drops them (shared_queue.py), as it writes: the run reads cancelled by the user, the others run on.
    for record, phase in ((host, "running"), (guest, "cancelled"), (last, "queued")):
        for bench in record.benchmarks:
            state = Path(bench.job_dir) / contract.state_dir(shared_id)
            state.mkdir(parents=True, exist_ok=True)
            detail = "cancelled before its turn" if phase == "cancelled" else "waiting for its turn"
            (state / contract.STATE_FILE).write_text(f"phase={phase}\ndetail={detail}\nattempt=0\n")
    statuses = library.status(submission.records, connect=conn.connect)
    assert [[(j.state, j.detail) for j in s.jobs][0] for s in statuses] == [
        ("running", "driver running, 0 rollout(s) written"),
        ("cancelled", "cancelled by the user (gym eval cancel)"),
        ("queued", "waiting for its turn"),
    ]
    [again] = library.cancel([guest], connect=conn.connect)
    assert [j.state for j in again.already_ended] == ["cancelled", "cancelled"] and not again.cancelled


def test_cancelling_the_host_run_alone_leaves_its_job_to_the_others(config_file, conn, cluster) -> None:
    submission = library.submit(prepared(config_file, TEMPERATURES), connect=conn.connect)
    host, guest, _ = submission.records
    [shared_id] = {b.job_id for b in host.benchmarks}
    [report] = library.cancel([host], connect=conn.connect)
    assert report.job_left_running and not cluster.calls("scancel")
    assert marker(host, shared_id) == [True, True] and marker(guest, shared_id) == [False, False]


def test_one_benchmark_of_every_run_is_marked_and_every_run_whole_cancels_the_job(config_file, conn, cluster) -> None:
    submission = library.submit(prepared(config_file, TEMPERATURES), connect=conn.connect)
    [shared_id] = {b.job_id for b in submission.records[0].benchmarks}
    reports = library.cancel(submission.records, ["math"], connect=conn.connect)
    assert all(r.job_left_running for r in reports) and not cluster.calls("scancel")
    assert all(marker(record, shared_id) == [True, False] for record in submission.records)
    reports = library.cancel(submission.records, connect=conn.connect)
    assert all(report.ok and not report.job_left_running for report in reports)
    assert len(cluster.calls("scancel")) == 1 and cluster.cancelled_ids() == [shared_id]


def test_a_shared_job_of_an_older_version_is_cancelled_whole_or_not_at_all(config_file, conn, cluster) -> None:
    submission = library.submit(prepared(config_file, TEMPERATURES), connect=conn.connect)
    older = [record.model_copy(update={"deployment_skips_cancelled": False}) for record in submission.records]
    with pytest.raises(UserError, match="cannot skip some of them; cancel them together, whole: gym eval cancel"):
        library.cancel(older[1:2], connect=conn.connect)
    assert not cluster.calls("scancel") and marker(older[1], older[0].benchmarks[0].job_id or "") == [False, False]
    assert all(report.ok for report in library.cancel(older, connect=conn.connect))
    assert len(cluster.calls("scancel")) == 1


def test_a_guest_counts_no_gpu_hours_its_host_counts_the_shared_job_once(config_file, conn, cluster) -> None:
    submission = library.submit(prepared(config_file, TEMPERATURES), connect=conn.connect)
    host, guest, _ = library.status(submission.records, connect=conn.connect)
    assert all(j.usage.gpu_hours is None and j.usage.wall_seconds is None for j in guest.jobs)


def test_a_record_names_its_host_by_run_id_never_by_path(config_file, conn, cluster) -> None:
    from nemo_gym.orchestration.record import load_record
    from nemo_gym.orchestration.untrusted import Unreadable

    submission = library.submit(prepared(config_file, TEMPERATURES), connect=conn.connect)
    guest = submission.records[1]
    text = guest.dumps()
    for hostile in ("../../etc", "/tmp/elsewhere", "gym-job-20260101T000000Z-abcdef/../x"):
        with pytest.raises(Unreadable, match="is not a run id"):
            load_record(text.replace(guest.deployment_host, hostile))


def test_a_lone_shared_run_is_still_read_by_older_versions(base, tmp_path, conn, cluster) -> None:
    base["compute"]["cluster"]["hostname"] = HOST
    base["job"] = {"output_path": str(tmp_path / "runs"), "deployment": "shared"}
    base["driver"]["benchmarks"] = {"math": {}, "code": {}}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        [record] = library.submit(library.prepare(SubmitConfig.model_validate(base)), connect=conn.connect).records
    assert record.deployment_host == record.gym_job_id and record.schema_version == 1
