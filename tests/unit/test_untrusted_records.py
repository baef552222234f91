"""Records and the index are data anyone may have written: an entry that is not a record is
skipped with one warning line naming its file, never a traceback, and never breaks the others; a
benchmark named like a path (``../other/x``) is refused, never read outside its run directory."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from checkpoint_runs import BENCH, REAL_RUN
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nemo_gym.orchestration import contract, untrusted
from nemo_gym.orchestration.cli.main import main
from nemo_gym.orchestration.errors import UserError
from nemo_gym.orchestration.library import select
from nemo_gym.orchestration.record import (
    BenchmarkJob,
    SubmissionRecord,
    all_records,
    all_sweeps,
    index_dir,
    load_record,
    run_in_directory,
    write_local_index,
)
from nemo_gym.orchestration.untrusted import Unreadable


def a_record(run_id: str = "gym-job-20250101T000000Z-aaaaaa", **fields) -> SubmissionRecord:
    """A run none of whose jobs could be queued: its status needs no cluster."""
    values = dict(
        gym_job_id=run_id,
        submitted_at="2025-01-01T00:00:00.000Z",
        run_dir=f"/runs/{run_id}",
        cluster="here",
        executor="local",
        submitted_by="me",
        benchmarks=[BenchmarkJob(benchmark="b", job_dir=f"/runs/{run_id}/b", job_id=None, error="refused")],
    )
    return SubmissionRecord(**{**values, **fields})


def record_doc(**changes) -> dict:
    return {**json.loads(a_record().dumps()), **changes}


# What an index entry (or a run's record) may hold instead of a record, and why each is refused.
HOSTILE = {
    "array": (b"[1, 2]", "a JSON array where an object was expected"),
    "null": (b"null", "a JSON null where an object was expected"),
    "truncated": (a_record().dumps().encode()[:40], "not JSON"),
    "not utf-8": (b'{"gym_job_id": "\xff\xfe"}', "not UTF-8 text"),
    "too deep": (b"[" * 200_000 + b"]" * 200_000, "nested deeper than"),
    "benchmarks not a list": (
        json.dumps(record_doc(benchmarks="b")).encode(),
        "benchmarks: Input should be a valid list",
    ),
    "run id a number": (json.dumps(record_doc(gym_job_id=7)).encode(), "gym_job_id: Input should be a valid string"),
    "swept value a list": (json.dumps(record_doc(sweep_values={"k": [1, 2]})).encode(), "sweep_values.k"),
    "unknown executor": (json.dumps(record_doc(executor="pbs")).encode(), "no backend 'pbs'"),
    "ssh option as host": (
        json.dumps(record_doc(hostname="-oProxyCommand=touch /tmp/x")).encode(),
        "is not a host name",
    ),
    "no schema": (
        json.dumps({k: v for k, v in record_doc().items() if k != "schema_version"}).encode(),
        "no usable schema_version",
    ),
}


def plant(name: str, data: bytes) -> Path:
    path = index_dir() / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


@pytest.mark.parametrize("case", HOSTILE)
def test_a_record_that_is_not_one_is_unreadable_in_one_line(case) -> None:
    data, why = HOSTILE[case]
    with pytest.raises(Unreadable) as err:
        load_record(data, "/runs/x/gym-job.json")
    assert str(err.value).startswith("/runs/x/gym-job.json: ") and why in str(err.value)
    assert "\n" not in str(err.value)


def test_one_unreadable_index_entry_per_kind_leaves_every_verb_working_with_one_warning_each(capsys) -> None:
    good = a_record()
    write_local_index(good)
    planted = [plant(f"gym-job-{i:02d}.json", data) for i, (data, _) in enumerate(HOSTILE.values())]
    assert main(["eval", "list"]) == 0
    out, err = capsys.readouterr()
    assert good.gym_job_id in out
    warnings = err.splitlines()
    assert len(warnings) == len(planted)
    for path, line, (_, why) in zip(planted, warnings, HOSTILE.values()):
        assert line.startswith(f"warning: {path}: ") and why in line and line.endswith("; skipped")
    for verb in (["status", "--last"], ["status", good.gym_job_id], ["results", "--last"], ["list", "--json"]):
        code = main(["eval", *verb])
        out, err = capsys.readouterr()
        assert "Traceback" not in err and "internal error" not in err, verb
        assert code in (0, 1) and len(err.splitlines()) >= len(planted), verb


def test_a_sweep_index_entry_that_is_not_one_is_skipped_with_a_warning(capsys) -> None:
    path = plant("gym-sweep-x.sweep.json", b'{"sweep_id": []')
    assert all_sweeps() == []
    assert (
        capsys.readouterr().err
        == f"warning: {path}: not JSON (Expecting ',' delimiter: line 1 column 16 (char 15)); skipped\n"
    )


def test_an_index_entry_larger_than_the_bound_is_skipped_unread(capsys) -> None:
    path = plant("gym-job-big.json", b" " * (untrusted.MAX_DOCUMENT_BYTES + 1))
    assert all_records() == []
    assert capsys.readouterr().err == f"warning: {path}: larger than {untrusted.MAX_DOCUMENT_BYTES} bytes; skipped\n"


def test_an_unreadable_record_in_a_run_directory_is_one_error_naming_it(tmp_path) -> None:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / contract.RECORD_FILE).write_bytes(b"null")
    with pytest.raises(UserError, match=f"cannot read the run's record: {run_dir}/gym-job.json: a JSON null"):
        run_in_directory(str(run_dir))


def copied_run(tmp_path: Path, benchmarks: list[str]) -> Path:
    """The real quickstart run, its record naming ``benchmarks`` besides its own."""
    run_dir = tmp_path / "run"
    shutil.copytree(REAL_RUN, run_dir)
    record = json.loads((run_dir / contract.RECORD_FILE).read_text())
    [own] = record["benchmarks"]
    record["benchmarks"] = [own, *({**own, "benchmark": name, "job_dir": name} for name in benchmarks)]
    (run_dir / contract.RECORD_FILE).write_text(json.dumps(record))
    return run_dir


BAD_NAMES = ["../other/x", "[/bad]", "/etc", "..", ".", "a/../../b", "x\x1b]0;owned\x07"]


def test_a_benchmark_named_like_a_path_is_refused_and_nothing_outside_the_run_is_read(tmp_path, capsys) -> None:
    run_dir = copied_run(tmp_path, BAD_NAMES)
    # What a record's "../other/x" would have reached: a benchmark's files beside the run.
    shutil.copytree(run_dir / BENCH, tmp_path / "other" / "x")
    record = run_in_directory(str(run_dir))
    assert [b.benchmark for b in record.benchmarks] == [BENCH]
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == len(BAD_NAMES)
    assert all(
        f"{run_dir}/gym-job.json: benchmark " in line and "refused: not a directory name" in line for line in lines
    )
    assert "\x1b" not in "".join(lines) and "\\x1b]0;owned\\x07" in lines[-1]
    assert main(["eval", "results", str(run_dir), "--json"]) in (0, 1)
    out = capsys.readouterr().out
    assert [b["benchmark"] for b in json.loads(out)["benchmarks"]] == [BENCH]


def test_a_recorded_job_dir_is_never_trusted_over_the_run_directory() -> None:
    doc = record_doc(benchmarks=[{"benchmark": "b", "job_dir": "/etc", "job_id": "1"}])
    [job] = load_record(json.dumps(doc)).benchmarks
    assert job.job_dir == f"{doc['run_dir']}/b"


def test_last_still_finds_the_newest_readable_run(capsys) -> None:
    from nemo_gym.orchestration.record import current_user

    write_local_index(a_record("gym-job-20250101T000000Z-aaaaaa", submitted_by=current_user()))  # --last is yours
    plant("gym-job-20990101T000000Z-zzzzzz.json", b"[1, 2]")
    assert select([], last=True).records[0].gym_job_id == "gym-job-20250101T000000Z-aaaaaa"
    assert capsys.readouterr().err.count("warning: ") == 1


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=150, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    data=st.binary(max_size=400)
    | json_values.map(lambda v: json.dumps(v).encode())
    | st.dictionaries(st.sampled_from(sorted(record_doc())), json_values, max_size=6).map(
        lambda patch: json.dumps(record_doc(**patch)).encode()
    )
)
def test_any_index_entry_is_a_record_or_one_warning_line(data, capsys) -> None:
    path = plant("gym-job-hostile.json", data)
    records = all_records()
    err = capsys.readouterr().err
    if records:
        assert err == "" or "benchmark" in err
    else:
        assert err.startswith(f"warning: {path}: ") and err.count("\n") == 1 and err.endswith("; skipped\n")


@settings(max_examples=40, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(depth=st.integers(1, 300_000), opener=st.sampled_from(["[", '{"a":']))
def test_any_depth_is_a_record_or_one_warning_line(depth, opener, capsys) -> None:
    closer = "]" if opener == "[" else "}"
    plant("gym-job-deep.json", (opener * depth + "1" + closer * depth).encode())
    assert all_records() == []
    assert capsys.readouterr().err.count("\n") == 1
