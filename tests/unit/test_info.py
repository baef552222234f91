"""`gym eval info` over the fake connection and fake Slurm (tests/fakes): the real probe script run
by bash, the attempts of a benchmark in order with their causes, its samples and logs, and what
resubmit would do; and status --json's attempt fields. Everything shown is read back, untrusted."""

from __future__ import annotations

import json

import documentation
import pytest
from test_library import job_dir, job_events, job_file, job_wrote, rollout_rows, submitted

from nemo_gym.orchestration import contract, library
from nemo_gym.orchestration.chain import chain_record
from nemo_gym.orchestration.cli.common import MAX_ATTEMPTS_SHOWN
from nemo_gym.orchestration.cli.main import build_parser
from nemo_gym.orchestration.errors import UserError
from nemo_gym.orchestration.library import Remedy
from nemo_gym.orchestration.observe import statuses_json
from nemo_gym.orchestration.verbs.info.command import info_text

HOST = "login.fake"


def recorded_cause(record, benchmark: str, job_id: str, cause: str) -> None:
    """What a failing job writes beside its state file."""
    job_file(record, benchmark, f"{contract.state_dir(job_id)}/{contract.CAUSE_FILE}", cause + "\n")


def samples(record, benchmark: str, expected: list[tuple[int, int]], written: list[tuple[int, int]]) -> None:
    job_file(record, benchmark, contract.MATERIALIZED_INPUTS_FILE, rollout_rows(expected))
    job_file(record, benchmark, contract.ROLLOUTS_FILE, rollout_rows(written))


def failed_then_resumed(base, tmp_path, conn, cluster):
    """A resumable benchmark whose first job's service died; the chain resumed it in job 101,
    which wrote every sample."""
    record = submitted(base, tmp_path, conn, "long", long={"resumable": True})
    successor = cluster.add_job("gym-long", "COMPLETED")
    job_file(
        record,
        "long",
        contract.CHAIN_FILE,
        "".join(
            [
                chain_record("start", "100", 1000, 0),
                chain_record("successor", successor, "100"),
                chain_record(
                    "verdict", "100", "service-died", 600, 4, "retry", "a service died after 600s, 4 new rollout(s)"
                ),
                chain_record("start", successor, 2000, 4),
            ]
        ),
    )
    cluster.set_state("100", "FAILED")
    job_wrote(record, "long", "100", "failed", "service policy died on node n1 (exit status 7)")
    recorded_cause(record, "long", "100", "service-died")
    job_events(record, "long", "100", "1000 job-start", "1600 job-end 1")
    job_wrote(record, "long", successor, "succeeded", "driver finished")
    job_events(record, "long", successor, "2000 job-start", "2900 job-end 0")
    pairs = [(t, 0) for t in range(6)]
    samples(record, "long", pairs, pairs)
    return record, successor


def test_a_failed_then_resumed_benchmark_lists_both_attempts_in_order_with_their_causes(
    base, tmp_path, conn, cluster
) -> None:
    record, successor = failed_then_resumed(base, tmp_path, conn, cluster)
    scripts_before = len(conn.plan.scripts)
    [run] = library.info([record], connect=conn.connect)
    assert len(conn.plan.scripts) == scripts_before + 2  # one probe, as status, then one read of the files
    [bench] = run.benchmarks
    history = [(a.attempt.job_id, a.attempt.state, a.attempt.cause) for a in bench.attempts]
    assert history == [("100", "failed", "service-died"), (successor, "succeeded", None)]
    first, second = (a.attempt for a in bench.attempts)
    assert (first.started, first.ended, second.started, second.ended) == (1000, 1600, 2000, 2900)
    assert first.verdict == "a service died after 600s, 4 new rollout(s) -> retry"
    logs = bench.attempts[0].logs
    directory = job_dir(record, "long")
    assert logs.job_log == f"{directory}/{contract.job_log('100')}"
    assert logs.driver_log == f"{directory}/{contract.step_log('driver', '100')}"
    assert bench.plan.remedy == Remedy.NOTHING and bench.plan.text == "nothing to do: it succeeded with all 6 samples"


def test_status_json_gains_the_attempts_oldest_first(base, tmp_path, conn, cluster) -> None:
    record, successor = failed_then_resumed(base, tmp_path, conn, cluster)
    [run] = library.status([record], connect=conn.connect)
    [doc] = json.loads(statuses_json(run.record, run.jobs))["jobs"]
    assert doc["attempts"] == 2
    assert doc["attempt_history"] == [
        {"job_id": "100", "state": "failed", "cause": "service-died", "samples_added": 4},
        {"job_id": successor, "state": "succeeded", "cause": None, "samples_added": 2},
    ]
    assert doc["chain"] == ["100", successor] and doc["state"] == "succeeded"  # what was there stays


def test_an_incomplete_benchmark_names_its_missing_pairs_and_the_plan_generates_those(
    base, tmp_path, conn, cluster
) -> None:
    record = submitted(base, tmp_path, conn, "a")
    cluster.set_state("100", "COMPLETED")
    job_wrote(record, "a", "100", "succeeded", "driver finished")
    expected = [(t, r) for t in range(13) for r in range(2)]  # 26 pairs
    samples(record, "a", expected, expected[:4])
    [run] = library.info([record], connect=conn.connect)
    [bench] = run.benchmarks
    assert bench.status.state == "incomplete"
    missing = tuple(expected[4:24])
    assert bench.samples is not None and bench.samples.first_missing == missing  # twenty named, not status's five
    assert bench.plan.remedy == Remedy.GENERATE_MISSING and bench.plan.missing == missing
    assert bench.plan.text.startswith("generate the 22 missing of 26 samples: task 2 rollout 0, task 2 rollout 1, ")
    assert bench.plan.text.endswith("task 11 rollout 1 and 2 more")
    doc = json.loads(library.info_json([run]))["runs"][0]["benchmarks"][0]
    assert doc["samples"]["missing_named"] == [list(p) for p in missing] and doc["samples"]["missing_not_named"] == 2
    assert doc["resubmit"]["remedy"] == "generate-missing" and doc["resubmit"]["missing"] == [list(p) for p in missing]
    assert "missing: task 2 rollout 0" in info_text([run]) and "and 2 more" in info_text([run])


def test_the_driver_s_own_failure_is_requeued_once_naming_what_to_fix_should_it_repeat(
    base, tmp_path, conn, cluster
) -> None:
    record = submitted(base, tmp_path, conn, "a")
    cluster.set_state("100", "FAILED")
    job_wrote(record, "a", "100", "failed", "the driver exited with status 1")
    recorded_cause(record, "a", "100", "driver-failed")
    [bench] = library.info([record], connect=conn.connect)[0].benchmarks
    assert [a.attempt.cause for a in bench.attempts] == ["driver-failed"]
    assert bench.plan.remedy == Remedy.REQUEUE and "gym eval logs RUN BENCHMARK --driver" in bench.plan.text


def test_a_spent_budget_stops_with_the_flag_that_extends_it(base, tmp_path, conn, cluster) -> None:
    record = submitted(base, tmp_path, conn, "a")
    cluster.set_state("100", "TIMEOUT", time_limit="00:10:00")
    job_wrote(record, "a", "100", "failed", "stopped by its walltime")
    recorded_cause(record, "a", "100", "walltime")
    [bench] = library.info([record], connect=conn.connect)[0].benchmarks
    assert bench.plan.remedy == Remedy.REQUEUE
    [bench] = library.info([record], max_attempts=1, connect=conn.connect)[0].benchmarks
    assert bench.plan.text == "stop: 1 of 1 attempts made; to allow another, pass --max-attempts 2"


def test_hostile_names_details_and_causes_are_escaped(base, tmp_path, conn, cluster) -> None:
    record = submitted(base, tmp_path, conn, "a")
    cluster.set_state("100", "FAILED")
    job_wrote(record, "a", "100", "failed", "boom\x1b]0;owned\x07 \u202eevil")
    recorded_cause(record, "a", "100", "\x1b[31mnot-a-cause")
    hostile = record.model_copy(
        update={"benchmarks": [record.benchmarks[0].model_copy(update={"benchmark": "a\x1b[2J\u202eb"})]}
    )
    [run] = library.info([hostile], connect=conn.connect)
    [bench] = run.benchmarks
    assert bench.attempts[0].attempt.cause is None  # no word this version knows
    text = info_text([run])
    assert "\x1b" not in text and "\u202e" not in text and "\x07" not in text
    assert "  a\\x1b[2J\\u202eb: failed (boom" in text
    assert "boom\\x1b]0;owned\\x07 \\u202eevil" in text


def test_a_benchmark_the_run_lacks_is_refused_before_connecting(base, tmp_path, conn, cluster) -> None:
    record = submitted(base, tmp_path, conn, "a", "b")
    before = len(conn.plan.scripts)
    with pytest.raises(UserError, match="has no benchmark 'c'"):
        library.info([record], ["c"], connect=conn.connect)
    assert len(conn.plan.scripts) == before
    assert [b.status.benchmark for b in library.info([record], ["b"], connect=conn.connect)[0].benchmarks] == ["b"]


def test_the_verb_takes_a_run_benchmarks_the_budget_and_json() -> None:
    args = build_parser().parse_args(["eval", "info", "run-1", "a", "b", "--max-attempts", "5", "--json"])
    assert (args.run, args.benchmarks, args.max_attempts, args.json) == ("run-1", ["a", "b"], 5, True)
    assert build_parser().parse_args(["eval", "info"]).max_attempts is None  # the library's default, then
    assert MAX_ATTEMPTS_SHOWN == library.DEFAULT_MAX_ATTEMPTS  # as --help says it


README_START = 1767261600  # 2026-01-01T10:00:00Z


def test_readme_example(base, tmp_path, conn, cluster) -> None:
    """The README's example of gym eval info is this run's output (its directory shortened there):
    a benchmark resumed after its service died, and one that ended with samples missing."""
    base["compute"]["cluster"]["node_pools"] = {"gpu": {"partition": "debug", "nodes": 1, "gpus_per_node": 8}}
    record = submitted(base, tmp_path, conn, "math", "code", math={"resumable": True})
    t0, successor = README_START, cluster.add_job("gym-math", "COMPLETED")
    job_file(
        record,
        "math",
        contract.CHAIN_FILE,
        "".join(
            [
                chain_record("start", "100", t0, 0),
                chain_record("successor", successor, "100"),
                chain_record(
                    "verdict",
                    "100",
                    "service-died",
                    1800,
                    40,
                    "retry",
                    "a service died while the driver ran after 1800s, 40 new rollout(s)",
                ),
                chain_record("start", successor, t0 + 1900, 40),
            ]
        ),
    )
    cluster.set_state("100", "FAILED")
    job_wrote(record, "math", "100", "failed", "service policy died on node n1 (exit status 137)")
    recorded_cause(record, "math", "100", "service-died")
    job_events(record, "math", "100", f"{t0} job-start", f"{t0 + 1800} job-end 1")
    job_wrote(record, "math", successor, "succeeded", "driver finished")
    job_events(record, "math", successor, f"{t0 + 1900} job-start", f"{t0 + 3700} job-end 0")
    pairs = [(t, r) for t in range(16) for r in range(4)]
    samples(record, "math", pairs, pairs)
    # What each job ran, as its nodes saw it (the job's lib.sh writes these lines).
    job_file(record, "math", contract.PROVENANCE_FILE, "gym_version=NeMo Gym v0.7.0\nvllm_version.policy=0.32.0\n")
    cluster.set_state("101", "COMPLETED")
    job_wrote(record, "code", "101", "succeeded", "driver finished")
    job_events(record, "code", "101", f"{t0} job-start", f"{t0 + 2700} job-end 0")
    samples(record, "code", pairs, [p for p in pairs if p not in ((3, 1), (7, 0), (12, 3))])
    text = info_text(library.info([record], connect=conn.connect)).replace(str(tmp_path / "runs"), "/scratch/evals")
    readme = documentation.page("watching-runs.md")
    shown = text.replace(record.gym_job_id, "gym-job-20260101T095500Z-3f2a1c")
    assert shown in readme, shown
    assert "ran:      gym_version NeMo Gym v0.7.0, vllm_version.policy 0.32.0" in shown
