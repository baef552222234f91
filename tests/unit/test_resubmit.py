"""`gym eval resubmit` over the fake connection and fake Slurm (tests/fakes): the real probe and
resubmit scripts run by bash. In place: the same run directory, the earlier attempt's files kept
aside byte for byte, the new job queued held and released once the chain records it, its driver
told to keep the rows on disk; a generate-missing attempt's inputs file holds exactly the missing
rows; then status, info and the plan see one benchmark with two attempts. Nothing is queued where
the plan stops, on a dry run, or when this shell cannot give the run's secrets again."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fakes import FakeCluster
from test_library import job_dir, job_file, job_wrote, rollout_rows, submitted
from test_sweep_runs import config_file, over_the_fake  # noqa: F401  (a fixture)
from test_sweep_runs import job_wrote as sweep_job_wrote
from test_sweep_runs import submitted as sweep_submitted

from nemo_gym.orchestration import contract, library
from nemo_gym.orchestration.chain import chain_record, parse_chain
from nemo_gym.orchestration.cli.main import main
from nemo_gym.orchestration.errors import UserError
from nemo_gym.orchestration.library import Remedy
from nemo_gym.orchestration.observe import statuses_json

HOST = "login.fake"
TWELVE = [(t, 0) for t in range(12)]


def ended(record, benchmark: str, job_id: str, phase: str, slurm: str, cluster: FakeCluster, cause: str = "") -> None:
    cluster.set_state(job_id, slurm)
    job_wrote(record, benchmark, job_id, phase, "driver finished" if phase == "succeeded" else "it failed")
    if cause:
        job_file(record, benchmark, f"{contract.state_dir(job_id)}/{contract.CAUSE_FILE}", cause + "\n")


def wrote_samples(record, benchmark: str, written: list[tuple[int, int]]) -> None:
    job_file(record, benchmark, contract.MATERIALIZED_INPUTS_FILE, rollout_rows(TWELVE))
    job_file(record, benchmark, contract.ROLLOUTS_FILE, rollout_rows(written))


def chain_records(record, benchmark: str) -> list[list[str]]:
    path = job_dir(record, benchmark) / contract.CHAIN_FILE
    return [line.split("\t") for line in path.read_text().splitlines()] if path.exists() else []


def one(runs: list[library.RunResubmit]) -> library.BenchmarkResubmit:
    [run] = runs
    [bench] = run.benchmarks
    return bench


# -- nothing to do ------------------------------------------------------------------------------------


def test_a_complete_run_has_nothing_to_do_and_queues_nothing(base, tmp_path, conn, cluster) -> None:
    record = submitted(base, tmp_path, conn, "a")
    ended(record, "a", "100", "succeeded", "COMPLETED", cluster)
    wrote_samples(record, "a", TWELVE)
    scripts, jobs = len(conn.plan.scripts), len(cluster.jobs())
    runs = library.resubmit([record], connect=conn.connect)
    bench = one(runs)
    assert bench.plan.remedy == Remedy.NOTHING and bench.job_id is None and runs[0].ok
    assert len(conn.plan.scripts) == scripts + 1  # the probe only
    assert len(cluster.jobs()) == jobs and not (job_dir(record, "a") / contract.CONTINUE_FILE).exists()


def test_a_dry_run_prints_the_plan_and_queues_nothing(base, tmp_path, conn, cluster) -> None:
    record = submitted(base, tmp_path, conn, "a")
    ended(record, "a", "100", "succeeded", "COMPLETED", cluster)
    wrote_samples(record, "a", TWELVE[:8])
    jobs = len(cluster.jobs())
    [run] = library.resubmit([record], dry_run=True, connect=conn.connect)
    [bench] = run.benchmarks
    assert run.dry_run and bench.plan.remedy == Remedy.GENERATE_MISSING and bench.answer is None
    assert bench.requeued is not None and bench.requeued.attempt == 2  # what it would be
    assert len(cluster.jobs()) == jobs and not (job_dir(record, "a") / contract.ATTEMPTS_DIR).exists()


# -- generate only what is missing -------------------------------------------------------------------


def test_an_incomplete_benchmark_is_finished_in_place_generating_only_the_missing_rows(
    base, tmp_path, conn, cluster
) -> None:
    record = submitted(base, tmp_path, conn, "a")
    ended(record, "a", "100", "succeeded", "COMPLETED", cluster)
    kept = [TWELVE[i] for i in (0, 2, 3, 5, 6, 7, 9, 11)]
    wrote_samples(record, "a", kept)
    directory = job_dir(record, "a")
    before = (directory / contract.ROLLOUTS_FILE).read_bytes()

    bench = one(library.resubmit([record], connect=conn.connect))

    assert bench.plan.remedy == Remedy.GENERATE_MISSING and bench.job_id == "101"
    assert bench.answer is not None and bench.answer.inputs == 4
    # queued held, recorded, then released
    assert "--hold" in cluster.calls("sbatch")[-1] and cluster.job("101")["reason"] == "None"
    assert chain_records(record, "a") == [["resubmit", "101", "100", "2", "generate-missing", "8"]]
    attempt = directory / contract.attempt_dir(2)
    inputs = (attempt / contract.ATTEMPT_INPUTS_FILE).read_text().splitlines()
    materialized = (directory / contract.MATERIALIZED_INPUTS_FILE).read_text().splitlines()
    assert inputs == [materialized[i] for i in (1, 4, 8, 10)]  # verbatim, in order
    earlier = attempt / contract.ATTEMPT_EARLIER_DIR
    assert (
        (earlier / contract.ROLLOUTS_FILE).read_bytes() == before == (directory / contract.ROLLOUTS_FILE).read_bytes()
    )
    assert (directory / contract.CONTINUE_FILE).exists()

    [run] = library.status([record], connect=conn.connect)
    [job] = run.jobs
    assert (job.state, job.job_id, [a.job_id for a in job.history]) == ("queued", "101", ["100", "101"])

    # The new job generates the four rows and ends: one benchmark, complete, with two attempts.
    ended(record, "a", "101", "succeeded", "COMPLETED", cluster)
    wrote_samples(record, "a", kept + [TWELVE[i] for i in (1, 4, 8, 10)])
    [run] = library.status([record], connect=conn.connect)
    [doc] = json.loads(statuses_json(run.record, run.jobs))["jobs"]
    assert (doc["state"], doc["samples"], doc["expected_samples"], doc["attempts"]) == ("succeeded", 12, 12, 2)
    assert [(a["job_id"], a["samples_added"]) for a in doc["attempt_history"]] == [("100", 8), ("101", 4)]
    assert one(library.resubmit([record], connect=conn.connect)).plan.remedy == Remedy.NOTHING


def test_logs_and_cancel_follow_the_new_attempt(base, tmp_path, conn, cluster) -> None:
    record = submitted(base, tmp_path, conn, "a")
    ended(record, "a", "100", "failed", "FAILED", cluster, "service-died")
    bench = one(library.resubmit([record], connect=conn.connect))
    assert bench.plan.remedy == Remedy.REQUEUE and bench.job_id == "101"
    job_file(record, "a", contract.job_log("101"), "the new attempt's log\n")
    job_file(record, "a", contract.job_log("100"), "the first attempt's log\n")
    [log] = library.logs([record], library.LogRequest(benchmark="a"), connect=conn.connect)
    assert "the new attempt's log" in log.text and "first attempt" not in log.text
    [report] = library.cancel([record], connect=conn.connect)
    assert [s.benchmark for s in report.cancelled] == ["a"] and "101" in cluster.cancelled_ids()
    # Not started yet: the chain-wide marker tells it (and status) why; no state directory is made for it.
    assert (job_dir(record, "a") / contract.CHAIN_CANCELLED_FILE).exists()
    assert not (job_dir(record, "a") / contract.state_dir("101")).exists()


# -- re-queue what ended badly -------------------------------------------------------------------------


def test_a_service_that_did_not_start_is_requeued_once_and_stops_when_it_fails_so_again(
    base, tmp_path, conn, cluster
) -> None:
    record = submitted(base, tmp_path, conn, "a")
    ended(record, "a", "100", "failed", "FAILED", cluster, "startup-failed")
    bench = one(library.resubmit([record], connect=conn.connect))
    assert bench.plan.remedy == Remedy.REQUEUE and "--service NAME" in bench.plan.text and bench.job_id == "101"
    ended(record, "a", "101", "failed", "FAILED", cluster, "startup-failed")
    jobs = len(cluster.jobs())
    [run] = library.resubmit([record], connect=conn.connect)
    [bench] = run.benchmarks
    assert bench.plan.remedy == Remedy.STOP_WOULD_REPEAT and "twice in a row" in bench.plan.text
    assert not run.ok and len(cluster.jobs()) == jobs


def test_the_budget_counts_every_job_and_stops_naming_the_flag(base, tmp_path, conn, cluster) -> None:
    record = submitted(base, tmp_path, conn, "a")
    ended(record, "a", "100", "failed", "FAILED", cluster, "service-died")
    assert one(library.resubmit([record], max_attempts=2, connect=conn.connect)).job_id == "101"
    ended(record, "a", "101", "failed", "FAILED", cluster, "service-died")
    bench = one(library.resubmit([record], max_attempts=2, connect=conn.connect))
    assert bench.plan.text == "stop: 2 of 2 attempts made; to allow another, pass --max-attempts 3"
    again = one(library.resubmit([record], max_attempts=3, connect=conn.connect))
    assert again.job_id == "102" and again.requeued is not None and again.requeued.attempt == 3
    assert [r[:4] for r in chain_records(record, "a")] == [
        ["resubmit", "101", "100", "2"],
        ["resubmit", "102", "101", "3"],
    ]


def test_a_cancelled_run_s_marker_is_kept_aside_and_does_not_cancel_the_new_attempt(
    base, tmp_path, conn, cluster
) -> None:
    record = submitted(base, tmp_path, conn, "a")
    cluster.set_state("100", "RUNNING")
    job_wrote(record, "a", "100", "running", "driver")
    library.cancel([record], connect=conn.connect)
    ended(record, "a", "100", "cancelled", "CANCELLED", cluster)
    bench = one(library.resubmit([record], connect=conn.connect))
    assert bench.plan.remedy == Remedy.REQUEUE and bench.job_id == "101"
    directory = job_dir(record, "a")
    assert not (directory / contract.CHAIN_CANCELLED_FILE).exists()
    assert (directory / contract.attempt_dir(2) / contract.ATTEMPT_EARLIER_DIR / "cancelled").exists()
    [run] = library.status([record], connect=conn.connect)
    assert run.jobs[0].state == "queued"


def test_a_refused_sbatch_queues_nothing_records_nothing_and_says_why(base, tmp_path, conn, cluster) -> None:
    record = submitted(base, tmp_path, conn, "a")
    ended(record, "a", "100", "failed", "FAILED", cluster, "service-died")
    cluster.refuse("job.sh", "Batch job submission failed: QOSMaxSubmitJobPerUserLimit")
    [run] = library.resubmit([record], connect=conn.connect)
    [bench] = run.benchmarks
    assert bench.job_id is None and "QOSMaxSubmitJobPerUserLimit" in (bench.refused or "") and not run.ok
    assert chain_records(record, "a") == []
    [status] = library.status([record], connect=conn.connect)
    assert status.jobs[0].state == "failed" and len(status.jobs[0].history) == 1


def test_a_resubmit_past_the_site_s_limit_queues_nothing_and_names_it(base, tmp_path, conn, cluster) -> None:
    """Weighed as its submission was (the record keeps what each job was queued under)."""
    record = submitted(base, tmp_path, conn, "a", "b")
    assert {b.benchmark: b.queued_as.get("account") for b in record.benchmarks} == {"a": "acct", "b": "acct"}
    ended(record, "a", "100", "failed", "FAILED", cluster, "service-died")
    cluster.limit_submit_jobs("acct", 1)  # b still waits in the queue: no room for a again
    jobs = len(cluster.jobs())
    [run] = library.resubmit([record], connect=conn.connect)
    [bench] = [b for b in run.benchmarks if b.benchmark == "a"]  # b is still queued: nothing to do
    problem = bench.refused or ""
    assert bench.job_id is None and not run.ok  # told as a refused sbatch is
    assert problem.startswith("compute.account acct: the run needs 1 Slurm job(s) queued at once, but the site ")
    assert "lets you queue 0 more (MaxSubmitJobs=1 of your association in account acct, 1 counted already)" in problem
    assert len(cluster.jobs()) == jobs and chain_records(record, "a") == []
    assert not cluster.calls("sbatch")[2:]  # the two of the submission only
    cluster.limit_submit_jobs("acct", 2)
    assert one(library.resubmit([record], benchmarks=["a"], connect=conn.connect)).job_id == "102"


def test_what_a_record_says_a_job_was_queued_under_is_read_back_as_plain_words_only() -> None:
    from nemo_gym.orchestration.record import BenchmarkJob

    job = BenchmarkJob(
        benchmark="a", job_dir="/r/a", job_id="1", queued_as={"account": "acct\n; rm -rf /", "partition": "gpu"}
    )
    assert job.queued_as == {"partition": "gpu"}
    assert BenchmarkJob(benchmark="a", job_dir="/r/a", job_id="1").queued_as == {}  # an older record: not weighed


# -- what cannot be resubmitted ------------------------------------------------------------------------


def test_a_command_benchmark_cannot_keep_what_is_on_disk_so_resubmit_stops(base, tmp_path, conn, cluster) -> None:
    record = submitted(base, tmp_path, conn, "a", a={"command": "echo hi"})
    assert not record.benchmarks[0].continues_from_disk
    ended(record, "a", "100", "failed", "FAILED", cluster, "service-died")
    jobs = len(cluster.jobs())
    bench = one(library.resubmit([record], connect=conn.connect))
    assert bench.plan.remedy == Remedy.STOP_CANNOT_CONTINUE and "submit it again" in bench.plan.text
    assert len(cluster.jobs()) == jobs


def test_a_run_missing_from_the_local_index_is_refused_before_anything_is_queued(
    base, tmp_path, conn, cluster, monkeypatch
) -> None:
    record = submitted(base, tmp_path, conn, "a")
    ended(record, "a", "100", "failed", "FAILED", cluster, "service-died")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "another-machine"))
    jobs = len(cluster.jobs())
    with pytest.raises(UserError, match="not in your local index"):
        library.resubmit([record], connect=conn.connect)
    assert len(cluster.jobs()) == jobs


def test_the_run_s_secrets_are_read_again_by_name_and_a_missing_one_queues_nothing(
    base, tmp_path, conn, cluster, monkeypatch
) -> None:
    base["driver"]["env"] = {"HF_TOKEN": "host:MY_HF_TOKEN"}
    monkeypatch.setenv("MY_HF_TOKEN", "hf_secret_value_1")
    record = submitted(base, tmp_path, conn, "a")
    assert "MY_HF_TOKEN" in record.carried_from.values()  # names only
    assert "hf_secret_value_1" not in record.model_dump_json()
    ended(record, "a", "100", "failed", "FAILED", cluster, "service-died")
    monkeypatch.delenv("MY_HF_TOKEN")
    jobs = len(cluster.jobs())
    with pytest.raises(UserError, match="MY_HF_TOKEN is not set in this shell"):
        library.resubmit([record], connect=conn.connect)
    assert len(cluster.jobs()) == jobs and chain_records(record, "a") == []
    monkeypatch.setenv("MY_HF_TOKEN", "hf_secret_value_2")
    assert one(library.resubmit([record], connect=conn.connect)).job_id == "101"
    [carrier] = record.carried_from
    assert f"export {carrier}=hf_secret_value_2" in conn.plan.scripts[-1]


# -- a sweep -------------------------------------------------------------------------------------------


def test_a_sweep_re_queues_only_its_unfinished_runs_in_three_scripts(config_file, conn, cluster) -> None:  # noqa: F811
    submission = sweep_submitted(config_file, conn)
    records = submission.records
    for record in records:
        for job in record.benchmarks:
            assert job.job_id is not None
            cluster.set_state(job.job_id, "COMPLETED")
            sweep_job_wrote(job.job_dir, job.job_id, "succeeded", "driver finished")
            Path(job.job_dir, contract.MATERIALIZED_INPUTS_FILE).parent.mkdir(parents=True, exist_ok=True)
            Path(job.job_dir, contract.MATERIALIZED_INPUTS_FILE).write_text(rollout_rows(TWELVE))
            Path(job.job_dir, contract.ROLLOUTS_FILE).write_text(rollout_rows(TWELVE))
    broken = records[1].benchmarks[0]
    assert broken.job_id is not None
    cluster.set_state(broken.job_id, "FAILED")
    sweep_job_wrote(broken.job_dir, broken.job_id, "failed", "a service died")
    Path(broken.job_dir, contract.state_dir(broken.job_id), contract.CAUSE_FILE).write_text("service-died\n")
    scripts, jobs = len(conn.plan.scripts), len(cluster.jobs())
    runs = library.resubmit(library.select([submission.sweep.sweep_id]).records, connect=conn.connect)
    assert len(conn.plan.scripts) == scripts + 3  # one probe, the site's limits, one resubmit script
    assert "__GYM_LIMITS:" in conn.plan.scripts[-2]
    assert len(cluster.jobs()) == jobs + 1
    queued = [(run.record.gym_job_id, b.benchmark) for run in runs for b in run.queued]
    assert queued == [(records[1].gym_job_id, broken.benchmark)]


# -- the command line ----------------------------------------------------------------------------------


def test_the_command_line_prints_the_plan_then_the_job_and_exits_0(
    base, tmp_path, conn, cluster, capsys, monkeypatch
) -> None:
    record = submitted(base, tmp_path, conn, "a")
    ended(record, "a", "100", "succeeded", "COMPLETED", cluster)
    wrote_samples(record, "a", TWELVE[:8])
    over_the_fake(conn, monkeypatch)
    assert main(["eval", "resubmit", record.gym_job_id, "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "a: generate the 4 missing of 12 samples: task 8 rollout 0" in out and "nothing was queued" in out
    assert main(["eval", "resubmit", record.gym_job_id, "--json"]) == 0
    [doc] = json.loads(capsys.readouterr().out)["runs"][0]["benchmarks"]
    assert (doc["remedy"], doc["job_id"], doc["attempt"], doc["inputs"]) == ("generate-missing", "101", 2, 4)
    assert main(["eval", "resubmit", record.gym_job_id]) == 0  # it is queued now: wait
    assert "wait: it is queued" in capsys.readouterr().out


# -- the chain's attempts, as pure data -----------------------------------------------------------------


def test_a_resubmit_record_opens_a_new_attempt_of_the_chain() -> None:
    text = "".join(
        [
            chain_record("start", "100", 1000, 0),
            chain_record("successor", "101", "100"),
            chain_record("verdict", "100", "walltime", 600, 5, "free", "cut short"),
            chain_record("start", "101", 2000, 5),
            chain_record("end", "failed", "gave up"),
            chain_record("resubmit", "200", "101", 2, "requeue", 7),
        ]
    )
    chain = parse_chain(text)
    assert (chain.attempt, chain.opened_by, chain.earlier, chain.end) == (2, "200", ["100", "101"], None)
    assert chain.latest is None and chain.head("100") == "200" and chain.retries() == 0
    assert chain.attempt_ids("100") == ["100", "101", "200"]
    assert chain.verdict_on("100") is not None and chain.verdict_on("100").action == "free"
    assert chain.samples_added(["100", "101", "200"], 9) == {"100": 5, "101": 2, "200": 2}
    # the new attempt's own chain (a resumable job's) follows it
    chain = parse_chain(text + chain_record("start", "200", 3000, 7))
    assert chain.latest == "200" and chain.attempt_ids("100") == ["100", "101", "200"]


# -- what the review found ---------------------------------------------------------------------------


def test_a_resumable_benchmark_is_resubmitted_and_its_new_chain_starts_fresh(base, tmp_path, conn, cluster) -> None:
    record = submitted(base, tmp_path, conn, "a", a={"resumable": True})
    assert record.benchmarks[0].continues_from_disk  # resume_from_cache is on already: it continues
    job_file(
        record,
        "a",
        contract.CHAIN_FILE,
        chain_record("start", "100", 1000, 0) + chain_record("end", "failed", "gave up: 4 resumes"),
    )
    ended(record, "a", "100", "failed", "FAILED", cluster, "service-died")
    bench = one(library.resubmit([record], connect=conn.connect))
    assert bench.plan.remedy == Remedy.REQUEUE and bench.job_id == "101"
    [run] = library.status([record], connect=conn.connect)
    assert (run.jobs[0].state, run.jobs[0].job_id) == ("queued", "101")  # the old chain's end is the old attempt's


def test_site_messages_around_sbatch_s_answer_do_not_become_the_job_id(base, tmp_path, conn, cluster) -> None:
    record = submitted(base, tmp_path, conn, "a")
    ended(record, "a", "100", "failed", "FAILED", cluster, "service-died")
    cluster.noise(stdout_lines=["NOTE: your account has 10 hours left"], stderr_lines=["sbatch: warning: busy"])
    bench = one(library.resubmit([record], connect=conn.connect))
    assert bench.job_id == "101" and cluster.job("101")["reason"] == "None"  # released
    assert chain_records(record, "a")[0][:2] == ["resubmit", "101"]


def test_a_refused_sbatch_leaves_the_benchmark_as_it_was(base, tmp_path, conn, cluster) -> None:
    record = submitted(base, tmp_path, conn, "a")
    cluster.set_state("100", "RUNNING")
    library.cancel([record], connect=conn.connect)
    ended(record, "a", "100", "cancelled", "CANCELLED", cluster)
    cluster.refuse("job.sh", "Batch job submission failed: Invalid account")
    directory = job_dir(record, "a")
    assert one(library.resubmit([record], connect=conn.connect)).refused
    assert (directory / contract.CHAIN_CANCELLED_FILE).exists() and not (directory / contract.CONTINUE_FILE).exists()


def test_a_benchmark_never_queued_at_submit_is_not_resubmitted_but_said_so(base, tmp_path, conn, cluster) -> None:
    cluster.refuse("/a/", "Batch job submission failed: Invalid account")
    from test_library import config

    [record] = library.submit(library.prepare(config(base, tmp_path, "a")), connect=conn.connect).records
    assert record.benchmarks[0].job_id is None
    [run] = library.resubmit([record], connect=conn.connect)
    [bench] = run.benchmarks
    assert bench.plan.remedy == Remedy.STOP_CANNOT_CONTINUE and "never queued" in bench.plan.text and not run.ok


def test_a_plan_made_stale_by_another_resubmit_queues_nothing(base, tmp_path, conn, cluster) -> None:
    from render_helpers import golden_requeue

    from nemo_gym.orchestration.verbs.resubmit.script import parse_resubmit_output, resubmit_script

    record = submitted(base, tmp_path, conn, "a")
    ended(record, "a", "100", "failed", "FAILED", cluster, "service-died")
    assert one(library.resubmit([record], connect=conn.connect)).job_id == "101"
    stale = golden_requeue(record)  # attempt 2 again, as planned before the first one queued it
    stale = type(stale)(stale.run_id, stale.run_dir, stale.backend, stale.jobs[:1], {})
    jobs = len(cluster.jobs())
    [[answer]] = parse_resubmit_output(conn.run_script(resubmit_script([stale])).stdout, [stale])
    assert answer.queued.job_id is None and "resubmitted meanwhile" in (answer.queued.error or "")
    assert len(cluster.jobs()) == jobs
