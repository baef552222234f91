"""GPU-hours and wall time from the scheduler's accounting or the jobs' own records (usage.py), and
the GPUs a local job holds (what this machine shows at submit)."""

from __future__ import annotations

import pytest

from nemo_gym.orchestration import contract
from nemo_gym.orchestration.backends.local import visible_gpus
from nemo_gym.orchestration.usage import (
    NO_USAGE,
    SOURCE_ACCOUNTING,
    SOURCE_JOB_RECORD,
    AccountingRow,
    OwnRecord,
    Usage,
    chain_usage,
    gpus_in_tres,
    hours_text,
    job_usage,
    own_record,
    parse_accounting_row,
    total,
    wall_text,
)


@pytest.mark.parametrize(
    ("tres", "gpus"),
    [
        ("billing=8,cpu=8,gres/gpu=4,mem=64G,node=1", 4),
        ("cpu=2,mem=1G,node=1", 0),
        ("cpu=8,gres/gpu:a100=2,gres/gpu:h100=6", 8),
        ("gres/gpu=8,gres/gpu:a100=8", 8),  # the untyped total, not twice
        ("", 0),
    ],
)
def test_gpus_in_tres(tres: str, gpus: int) -> None:
    assert gpus_in_tres(tres) == gpus


def test_accounting_rows_and_what_is_not_one() -> None:
    assert parse_accounting_row(["101", "3600", "gres/gpu=8"]) == AccountingRow("101", 3600, 8)
    assert parse_accounting_row(["101", "", ""]) == AccountingRow("101", 0, 0)  # pending: nothing yet
    assert parse_accounting_row(["101+1", "60", "gres/gpu=1"]) == AccountingRow("101", 60, 1, component=1)
    assert parse_accounting_row(["101.batch", "3600", "cpu=1"]) is None
    assert parse_accounting_row(["101+x", "3600", "cpu=1"]) is None
    assert parse_accounting_row(["sacct: error"]) is None


def test_the_components_of_a_heterogeneous_job_run_together_and_their_gpus_add_up() -> None:
    rows = {"9": [AccountingRow("9", 3600, 8, 0), AccountingRow("9", 3600, 1, 1), AccountingRow("9", 3600, 0, 2)]}
    assert job_usage("9", rows, {}, 0, None, False) == Usage(3600.0, 9.0, 9, SOURCE_ACCOUNTING)


def test_accounting_is_the_first_source_and_every_run_of_a_requeued_job_counts() -> None:
    rows = {"7": [AccountingRow("7", 600, 8), AccountingRow("7", 1200, 8)]}
    own = {"7": [OwnRecord("7", 0.0, 99.0, None, True)]}
    assert job_usage("7", rows, own, 4, None, False) == Usage(1800.0, 1800 * 8 / 3600, 8, SOURCE_ACCOUNTING)


def test_without_accounting_the_jobs_own_record_times_the_planned_gpus() -> None:
    own = {"7": [own_record("7", "1000.5", "1900.5", "1900.5", [], contract.REQUEUED_RUN_SUFFIX)]}
    assert job_usage("7", {}, own, 4, None, False) == Usage(900.0, 1.0, 4, SOURCE_JOB_RECORD)
    assert job_usage("7", {}, own, None, None, False) == Usage(900.0, None, None, SOURCE_JOB_RECORD)


def test_a_running_job_counts_to_the_probes_clock_and_an_ended_one_without_its_end_to_its_last_sign() -> None:
    record = own_record("7", "1000", "", "1100", [1500.0, 1200.0], contract.REQUEUED_RUN_SUFFIX)
    assert record == OwnRecord("7", 1000.0, None, 1500.0, True)
    assert job_usage("7", {}, {"7": [record]}, 2, 4600.0, True) == Usage(3600.0, 2.0, 2, SOURCE_JOB_RECORD)
    killed = job_usage("7", {}, {"7": [record]}, 2, 4600.0, False)
    assert killed == Usage(500.0, 1000 / 3600, 2, SOURCE_JOB_RECORD, approximate=True)
    assert hours_text(killed) == "~0.28" and wall_text(killed) == "~8m20s"


def test_an_earlier_attempt_of_a_requeued_job_adds_to_it_and_never_counts_to_now() -> None:
    earlier = own_record("7.attempt-1", "0", "", "50", [100.0], contract.REQUEUED_RUN_SUFFIX)
    current = own_record("7", "200", "", "", [], contract.REQUEUED_RUN_SUFFIX)
    assert (earlier.job_id, earlier.current, current.current) == ("7", False, True)
    used = job_usage("7", {}, {"7": [earlier, current]}, 1, 500.0, True)
    assert used.wall_seconds == 100 + 300 and used.approximate


def test_a_job_that_never_started_costs_nothing_known() -> None:
    assert job_usage("7", {}, {}, 4, None, False) == NO_USAGE
    assert job_usage("7", {}, {"7": [OwnRecord("7", None, None, None, True)]}, 4, None, False) == NO_USAGE


def test_a_chain_sums_its_jobs_whatever_source_each_has() -> None:
    rows = {"1": [AccountingRow("1", 3600, 8)]}
    own = {"2": [OwnRecord("2", 0.0, 1800.0, None, True)]}
    used = chain_usage(["1", "2", "3"], rows, own, 8, None, None)
    assert used.wall_seconds == 5400 and used.gpu_hours == pytest.approx(12.0)
    assert used.source == "accounting+job record"


def test_totals() -> None:
    assert total([]) == NO_USAGE and total([NO_USAGE]) == NO_USAGE
    assert total([Usage(10.0, None, None, SOURCE_JOB_RECORD), Usage(20.0, 1.0, 4, SOURCE_JOB_RECORD)]) == Usage(
        30.0, 1.0, 4, SOURCE_JOB_RECORD
    )


@pytest.mark.parametrize(
    ("seconds", "text"), [(59.4, "59s"), (61, "1m01s"), (3600, "1h00m"), (3725, "1h02m"), (None, "-")]
)
def test_wall_text(seconds: float | None, text: str) -> None:
    assert wall_text(Usage(seconds, None, None, SOURCE_JOB_RECORD)) == text


# -- the GPUs of a local job -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("listed", "gpus"), [("0,1,2,3", 4), ("", 0), ("2", 1), ("0,-1,1", 1), ("NoDevFiles", 0), ("GPU-ab12,GPU-cd34", 2)]
)
def test_visible_gpus_follow_cuda_visible_devices(listed: str, gpus: int) -> None:
    assert visible_gpus({"CUDA_VISIBLE_DEVICES": listed, "PATH": "/nonexistent"}) == gpus


def test_visible_gpus_count_nvidia_smis_list_and_are_0_without_it(tmp_path) -> None:
    assert visible_gpus({"PATH": str(tmp_path)}) == 0
    smi = tmp_path / "nvidia-smi"
    smi.write_text(
        "#!/bin/sh\necho 'GPU 0: A100 (UUID: GPU-1)'\necho 'GPU 1: A100 (UUID: GPU-2)'\necho '  MIG 1g.5gb'\n"
    )
    smi.chmod(0o755)
    assert visible_gpus({"PATH": str(tmp_path)}) == 2
