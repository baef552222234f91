"""Submission: each benchmark's sbatch result parsed on its own; secrets only on stdin."""

from __future__ import annotations

import subprocess
import warnings

import pytest

from nemo_gym.orchestration.api import SubmitConfig
from nemo_gym.orchestration.backends import backend_named
from nemo_gym.orchestration.plan.building import build_plan
from nemo_gym.orchestration.render import render_run
from nemo_gym.orchestration.submission import RunToSubmit, submission_script
from nemo_gym.orchestration.submission import parse_submission_output as parse_sbatch_results

SLURM = backend_named("slurm")


def test_each_benchmark_parsed_on_its_own() -> None:
    stdout = "\n".join(
        [
            "some login banner",
            "__GYM_JOB:a:1:sbatch: error: Batch job submission failed: Invalid partition name specified",
            "__GYM_JOB:b:0:sbatch: warning: this is a warning 123 1234",
            "__GYM_JOB:c:0:sbatch: Warning: x 4242;cluster2",
            "__GYM_JOB:d:0:sbatch: warning only",
            "__GYM_JOB:e:0:",
        ]
    )
    results = {r.benchmark: r for r in parse_sbatch_results(stdout, ["a", "b", "c", "d", "e", "f"], SLURM)}
    assert results["a"].job_id is None and "Invalid partition" in results["a"].error
    assert results["b"].job_id == "1234"
    assert results["c"].job_id == "4242"
    assert results["d"].job_id is None and results["d"].error == "sbatch: warning only"
    assert results["e"].error == "sbatch exited 0 with no job id"
    assert results["f"].error == "sbatch produced no result for this benchmark"


def test_a_failure_never_shifts_another_benchmarks_id() -> None:
    stdout = "__GYM_JOB:b:0:222\n__GYM_JOB:a:1:refused\n__GYM_JOB:c:0:333\n"
    ids = [r.job_id for r in parse_sbatch_results(stdout, ["a", "b", "c"], SLURM)]
    assert ids == [None, "222", "333"]


def test_secrets_are_in_the_script_on_stdin_not_in_staged_files(base, monkeypatch) -> None:
    monkeypatch.setenv("GYM_TEST_SECRET", "abc'def")
    base["services"]["policy"]["env"] = {"TOKEN": "host:GYM_TEST_SECRET"}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        config = SubmitConfig.model_validate(base)
    staged = render_run(build_plan(config, "gym-job-20260101T000000Z-abcdef"))
    carrier = next(iter(staged.plan.secrets))
    script = submission_script([RunToSubmit(staged, {carrier: "abc'def"})])
    [export] = [line for line in script.splitlines() if line.startswith(f"export {carrier}=")]
    said = subprocess.run(["bash", "-c", f'{export}; printf %s "${carrier}"'], capture_output=True, text=True)
    assert said.stdout == "abc'def"
    assert all("abc'def" not in f.content for f in staged.files.values())


def test_the_same_run_is_sent_as_the_same_bytes_whenever_it_is_rendered(base) -> None:
    """The staged files' tarball carries no clock (a gzip header's time once made two renders a
    second apart differ)."""
    from unittest import mock

    staged = render_run(build_plan(SubmitConfig.model_validate(base), "gym-job-20260101T000000Z-abcdef"))
    with mock.patch("time.time", return_value=1.0e9):
        early = submission_script([RunToSubmit(staged, {})])
    with mock.patch("time.time", return_value=2.0e9):
        late = submission_script([RunToSubmit(staged, {})])
    assert early == late


SETTLED_LOGS = [
    ("", False),  # the directory exists, nothing logged yet: the script may be running
    ("__GYM_JOB:a:0:101\n", False),  # some jobs logged, the script has not ended
    ("__GYM_JOB:a:0:101\n__GYM_SUBMISSION_ENDED\n", True),
    ("__GYM_SUBMISSION_ENDED\n", True),  # nothing to queue (a guest run)
    ("__GYM_ABSENT\n", True),  # never unpacked: the script never ran
    ("__GYM_SUBMISSION_ENDED\n__GYM_JOB:a:0:101\n", False),  # an end not last is no end
]


@pytest.mark.parametrize(("log", "settled"), SETTLED_LOGS)
def test_a_lost_submission_is_read_back_once_its_script_has_ended(log, settled) -> None:
    from nemo_gym.orchestration.submission import _settled

    assert _settled(log) is settled


def test_a_job_not_logged_by_a_submission_still_running_is_unknown_not_unsubmitted(base) -> None:
    from nemo_gym.orchestration.submission import QueuedJob, _lost_unless_queued, no_result

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        plan = build_plan(SubmitConfig.model_validate(base), "gym-job-20260101T000000Z-abcdef")
    silent = QueuedJob("b", None, no_result(SLURM))
    assert _lost_unless_queued(plan, silent, settled=True).error.startswith("not submitted: the connection was lost")
    unknown = _lost_unless_queued(plan, silent, settled=False).error
    assert unknown.startswith("unknown: its submission was still running") and plan.run_dir in unknown
