"""The exporters' core without a real backend: params fit for MLflow, what a job's files say, the
shared table (two processes at once included), receipts and the runner's rules, and the MLflow REST
client against an in-process stand-in for its error paths and its idempotence. The real MLflow
server and the real wandb library: tests/exporters/test_real_backends.py."""

from __future__ import annotations

import ast
import csv
import io
import json
import multiprocessing
import os
import posixpath
import re
import shutil
import socket
import subprocess
import sys
import types
from pathlib import Path
from typing import Any

import pytest
from export_jobs import BENCHMARK, QUICKSTART_RUN, RUN_ID, receipt, run_staged, staged_job
from fakes.fake_mlflow import FakeMlflowServer
from hypothesis import given, settings
from hypothesis import strategies as st

from nemo_gym.orchestration import contract, facts, shipping, untrusted, usage
from nemo_gym.orchestration.contract import Phase, Status
from nemo_gym.orchestration.exporters import jobfiles, mlflow_rest, receipts, spec, table, wandb_export
from nemo_gym.orchestration.exporters import record as rec
from nemo_gym.orchestration.exporters.mlflow_rest import MlflowClient, MlflowError, export_to_mlflow
from nemo_gym.orchestration.exporters.run_exports import Runner, main, scrub
from nemo_gym.orchestration.shipping import Program

PY38 = "/root/.pyenv/versions/3.8.18/bin/python3.8"
# MLflow's own rule for param, metric and tag names (mlflow/utils/validation.py, non-Windows).
MLFLOW_NAME = re.compile(r"^[/\w.\- :]*$")


def record(**changes: Any) -> rec.ExportRecord:
    base = rec.ExportRecord(
        run_id=RUN_ID,
        sweep_id=None,
        benchmark=BENCHMARK,
        model="tiny",
        served_name="policy",
        params={"services.policy.model": "tiny"},
        metrics={"mean/reward": 0.5, "pass@1/accuracy": 0.25},
        written=12,
        expected=12,
        gpu_hours=0.5,
        wall_seconds=1800.0,
        state="succeeded",
        rollouts_path=None,
    )
    return base._replace(**changes)


def no_op(_: str) -> None:
    pass


# -- params fit for MLflow ---------------------------------------------------------------------------


def test_flatten_joins_keys_indexes_lists_and_stringifies_values() -> None:
    config = {"a": {"b": [1, {"c": True}], "d": None, "e": 2.5, "f": "host:TOKEN"}, "g": {}, "h": []}
    params, notes = rec.flatten_config(config)
    assert params == {
        "a.b.0": "1",
        "a.b.1.c": "true",
        "a.d": "null",
        "a.e": "2.5",
        "a.f": "host:TOKEN",
        "g": "{}",
        "h": "[]",
    }
    assert notes == []


def test_flatten_cuts_long_values_and_says_which() -> None:
    params, notes = rec.flatten_config({"prompt": "x" * 2000, "short": "y"})
    assert len(params["prompt"]) == rec.PARAM_VALUE_LIMIT and params["prompt"].endswith(rec.CUT_MARK)
    assert params["short"] == "y"
    assert notes == ["cut 1 param value(s) to 500 characters: prompt"]


def test_flatten_renames_keys_mlflow_refuses_keeping_them_distinct() -> None:
    params, notes = rec.flatten_config({"env": {"a@b": "1", "a_b": "2", "../x": "3"}})
    assert params == {"env.a_b": "1", "env.a_b_2": "2", "env.../x": "3"}
    assert all(MLFLOW_NAME.match(k) and posixpath.normpath(k) == k for k in params)
    assert len(notes) == 1 and notes[0].startswith("renamed 2 param name(s) MLflow refuses: 'env.a@b' -> 'env.a_b'")


def test_long_keys_are_shortened_with_a_hash_so_that_two_stay_two() -> None:
    a, b = "k" * 300 + "a", "k" * 300 + "b"
    names = rec.mlflow_safe_names([a, b])
    assert len(names[a]) <= rec.KEY_LIMIT and len(names[b]) <= rec.KEY_LIMIT and names[a] != names[b]


@pytest.mark.parametrize(
    ("name", "safe"),
    [
        ("pass@1[avg-of-1]/accuracy", "pass_1_avg-of-1_/accuracy"),
        ("mean/reward", "mean/reward"),
        ("/lead//double/trail/", "lead/double/trail"),
        ("a/./b/../c", "a/_/b/__/c"),
        ("..0/x", "_.0/x"),  # found by hypothesis: MLflow refuses any name that begins with ".."
        ("", "_"),
    ],
)
def test_mlflow_safe_key(name: str, safe: str) -> None:
    assert rec.mlflow_safe_key(name) == safe


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=400))
def test_every_safe_key_passes_mlflows_own_name_rules(name: str) -> None:
    key = rec.mlflow_safe_key(name)
    assert MLFLOW_NAME.match(key) and len(key) <= rec.KEY_LIMIT
    norm = posixpath.normpath(key)
    assert norm == key and norm != "." and not norm.startswith("..") and not norm.startswith("/")


def test_fingerprint_ignores_cost_but_not_results() -> None:
    base = record()
    assert base.fingerprint() == record(wall_seconds=9.0, gpu_hours=1.0).fingerprint()
    assert base.fingerprint() != record(written=11).fingerprint()
    assert base.fingerprint() != record(state="failed").fingerprint()
    assert base.fingerprint() != record(metrics={"mean/reward": 0.6}).fingerprint()


# -- the spec ------------------------------------------------------------------------------------------


def test_benchmark_export_overrides_setting_by_setting_and_null_drops_an_exporter() -> None:
    defaults = {
        "mlflow": {"tracking_uri": "http://m", "experiment": "e", "tags": {"a": 1}},
        "table": {"dir": "/t"},
        "wandb": {"project": "p"},
    }
    merged = spec.merge_exporters(defaults, {"mlflow": {"experiment": "mine", "tags": {"b": 2}}, "wandb": None})
    assert merged == {
        "mlflow": {"tracking_uri": "http://m", "experiment": "mine", "tags": {"b": 2}},
        "table": {"dir": "/t"},
    }
    assert spec.merge_exporters(defaults, None) == {
        "mlflow": defaults["mlflow"],
        "wandb": {"project": "p"},
        "table": {"dir": "/t"},
    }
    assert spec.merge_exporters(None, {"table": {"dir": "/x"}}) == {"table": {"dir": "/x"}}
    assert list(spec.merge_exporters({"table": {}, "mlflow": {}}, {})) == ["mlflow", "table"]


def test_spec_round_trip_carries_flat_params_and_identity(tmp_path: Path) -> None:
    doc = spec.make_spec(
        "run-1", "bench", "m", "policy", {"a": {"b": "x" * 600}}, {"table": {"dir": "/t"}}, sweep_id="sweep-1", gpus=8
    )
    spec.write_spec(str(tmp_path / "s.json"), doc)
    read = spec.read_spec(str(tmp_path / "s.json"))
    assert (read.run_id, read.sweep_id, read.benchmark, read.model, read.served_name, read.gpus) == (
        "run-1",
        "sweep-1",
        "bench",
        "m",
        "policy",
        8,
    )
    assert read.params["a.b"].endswith(rec.CUT_MARK) and read.params_notes[0].startswith("cut 1 param value")
    assert read.exporters == {"table": {"dir": "/t"}}
    with pytest.raises(ValueError, match="unknown exporter"):
        spec.make_spec("r", "b", "m", "s", {}, {"neptune": {}})


def test_settings_problems_name_the_setting_and_refuse_credentials_in_the_config() -> None:
    problems = spec.settings_problems(
        {
            "mlflow": {"tracking_uri": "https://me:secret@mlflow.example", "tags": ["x"], "experimnet": "e"},
            "wandb": {"mode": "sometimes"},
            "table": {},
            "neptune": {},
        }
    )
    assert problems == [
        "export.mlflow.experimnet: unknown setting; known: tracking_uri, experiment, run_name, tags",
        "export.mlflow.tracking_uri: holds credentials; remove them and set MLFLOW_TRACKING_TOKEN "
        "(or MLFLOW_TRACKING_USERNAME/MLFLOW_TRACKING_PASSWORD) in the environment instead",
        "export.mlflow.tags: must be a mapping of tag name to value",
        "export.wandb.mode: must be one of online, offline, got 'sometimes'",
        "export.table.dir: required: the directory of results.csv and results.json",
        "export.neptune: unknown exporter; known: mlflow, wandb, table",
    ]
    assert spec.settings_problems({"mlflow": {"tracking_uri": "http://127.0.0.1:5000"}, "table": {"dir": "/t"}}) == []


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ([], "not a JSON object"),
        ({"version": 9, "run_id": "r", "benchmark": "b"}, "version 9"),
        ({"version": 1, "benchmark": "b"}, "no run_id"),
        ({"version": 1, "run_id": "r", "benchmark": "b", "exporters": {"table": "x"}}, "map each name"),
    ],
)
def test_a_bad_spec_is_one_clear_error(data: Any, message: str) -> None:
    with pytest.raises(rec.ExportError, match=message):
        spec.parse_spec(data)


# -- what a job's files say ----------------------------------------------------------------------------


def quickstart_job(tmp_path: Path) -> Path:
    job = tmp_path / "answer-judge"
    shutil.copytree(QUICKSTART_RUN / "answer-judge", job)
    return job


def quickstart_spec(**changes: Any) -> spec.ExportSpec:
    base = spec.ExportSpec(RUN_ID, None, BENCHMARK, "tiny", "policy", 4, {"a": "1"}, ("a note",), {})
    return base._replace(**changes)


def test_record_of_the_real_quickstart_job(tmp_path: Path) -> None:
    job = quickstart_job(tmp_path)
    got = jobfiles.read_record(str(job), quickstart_spec(), now=0)
    assert (got.state, got.written, got.expected, got.complete) == ("succeeded", 12, 12, True)
    # The one name of each metric (facts.mlflow_safe_key), the same in every exporter and in results.
    assert got.metrics["mean/reward"] == 0.0 and got.metrics["pass_1_avg-of-1_/accuracy"] == 0.0
    assert not any(k.startswith("group_level_metrics") or "_ng_task_index" in k for k in got.metrics)
    assert got.wall_seconds == pytest.approx(1796075518.870642642 - 1796075459.238335542)
    assert got.gpu_hours == pytest.approx(got.wall_seconds * 4 / 3600)
    assert got.rollouts_path == str(job / "artifacts" / "rollouts.jsonl")
    assert got.notes == ("a note",)


def test_missing_rows_make_a_succeeded_job_incomplete(tmp_path: Path) -> None:
    job = quickstart_job(tmp_path)
    rollouts = job / "artifacts" / "rollouts.jsonl"
    lines = rollouts.read_text().splitlines(keepends=True)
    rollouts.write_text(
        "".join(lines[:9]) + lines[0] + '{"_ng_task_index": 11, "_ng_rol'
    )  # a duplicate and a torn line
    got = jobfiles.read_record(str(job), quickstart_spec(), now=0)
    assert (got.state, got.written, got.expected, got.complete) == ("incomplete", 9, 12, False)


def test_completeness_counts_expected_pairs_only() -> None:
    rows = [
        b'{"_ng_task_index": 0, "_ng_rollout_index": 0}',
        b'{"_ng_task_index": 0, "_ng_rollout_index": 0}',
        b'{"_ng_task_index": 9, "_ng_rollout_index": 0}',
        b'{"_ng_task_index": true, "_ng_rollout_index": 1}',
        b"not json",
        b"",
    ]
    assert facts.written_pairs(rows) == facts.Written(frozenset({(0, 0), (9, 0)}), duplicates=1, unreadable=2)
    assert facts.expected_pairs([b'{"_ng_task_index": 0, "_ng_rollout_index": 0}', b""]) == {(0, 0)}
    with pytest.raises(untrusted.Unreadable, match="line 2 of the materialized inputs"):
        facts.expected_pairs([b'{"_ng_task_index": 0, "_ng_rollout_index": 0}', b"{"])


def test_no_list_of_expected_samples_leaves_completeness_unknown(tmp_path: Path) -> None:
    job = quickstart_job(tmp_path)
    (job / "artifacts" / "rollouts_materialized_inputs.jsonl").unlink()
    got = jobfiles.read_record(str(job), quickstart_spec(), now=0)
    assert (got.state, got.written, got.expected, got.complete) == ("succeeded", 12, None, False)
    assert "completeness unknown" in got.notes[-1]


def test_metrics_of_several_agents_are_prefixed_and_other_shapes_give_their_numbers() -> None:
    doc = [
        {"agent_ref": {"name": "a"}, "agent_metrics": {"mean/reward": 1}, "key_metrics": {"acc": 0.5}},
        {"agent_ref": {"name": "b"}, "agent_metrics": {"mean/reward": 0}, "group_level_metrics": [{"x": 1}]},
    ]
    got = facts.benchmark_metrics([doc])
    assert got.values == {"a/mean/reward": 1.0, "a/acc": 0.5, "b/mean/reward": 0.0} and got.key_names == ("a/acc",)
    other = {
        "score": 3,
        "nested": {"f1": 0.5, "nan": float("nan"), "flag": True},
        "rows": [1, 2],
        "group_level_metrics": {"x": 1},
    }
    assert facts.benchmark_metrics([other]).values == {"score": 3.0, "nested/f1": 0.5}


def test_metric_names_are_made_mlflow_safe_once_and_a_collision_keeps_gyms_order() -> None:
    doc = [
        {"agent_metrics": {"pass@1": {"accuracy": 1}, "pass_1": {"accuracy": 2}}, "key_metrics": {"pass@1/accuracy": 1}}
    ]
    got = facts.benchmark_metrics([doc])
    assert got.values == {"pass_1/accuracy": 1.0, "pass_1/accuracy_2": 2.0} and got.key_names == ("pass_1/accuracy",)


def state_dirs_with(job: Path, events: dict[str, str], mtimes: dict[str, float]) -> dict[str, str]:
    """State directories with these events; each file's mtime set to the given time (or long ago)."""
    for name, text in events.items():
        state_dir = job / contract.MARKERS_DIR / name
        state_dir.mkdir(parents=True)
        (state_dir / contract.EVENTS_FILE).write_text(text)
        os.utime(state_dir / contract.EVENTS_FILE, (0, 0))
    for rel, mtime in mtimes.items():
        (job / rel).write_text("")
        os.utime(job / rel, (mtime, mtime))
    return jobfiles.state_dirs(str(job))


def test_a_merged_sharded_benchmark_exports_as_succeeded_timed_by_every_shard_s_jobs(tmp_path: Path) -> None:
    """A sharded benchmark's directory holds no job of its own: its shards' jobs time it, their
    merge says it succeeded."""
    job = quickstart_job(tmp_path)
    for state in (job / contract.MARKERS_DIR).iterdir():
        if state.is_dir():
            shutil.rmtree(state)
    state_dirs_with(Path(contract.shard_dir(str(job), 1)), {"100_0": "1000 job-start\n1100 job-end 0\n"}, {})
    state_dirs_with(Path(contract.shard_dir(str(job), 2)), {"100_1": "1010 job-start\n1060 job-end 0\n"}, {})
    assert jobfiles.read_record(str(job), quickstart_spec(), now=0).state != "succeeded"  # not merged yet
    (job / contract.SHARDS_MERGED_FILE).parent.mkdir(parents=True, exist_ok=True)
    (job / contract.SHARDS_MERGED_FILE).write_text("1\t100_0 1100\n2\t100_1 1060\n")
    got = jobfiles.read_record(str(job), quickstart_spec(), now=0)
    assert (got.state, got.wall_seconds, got.started_at, got.ended_at) == ("succeeded", 150.0, 1000.0, 1100.0)
    assert got.gpu_hours == pytest.approx(150 * 4 / 3600)


def test_wall_time_adds_up_attempts_and_counts_the_running_job_to_now(tmp_path: Path) -> None:
    events = {
        "100.attempt-1": "10 job-start\n50 launched x\n",  # died with its node: counts to its last event
        "100": "100 job-start\n160 job-end 0\n",
        "200": "300 job-start\n310 driver-start\n",  # the job running the export
        "300": "garbage\n",
    }
    dirs = state_dirs_with(tmp_path, events, {})
    wall, started, ended = jobfiles.job_times(str(tmp_path), dirs, events, current="200", now=400.0)
    assert wall == 40 + 60 + 100 and started == 10 and ended == 400


def test_a_job_without_job_end_counts_to_its_last_sign_of_life_as_status_counts_it(tmp_path: Path) -> None:
    """Start 1000, last event 1100, heartbeat 1500: 500 s in the exports, as in status and results
    (once the exports counted to the last event: 100 s)."""
    events = {"7": "1000 job-start\n1100 launched x\n"}
    heartbeat = f"{contract.MARKERS_DIR}/7/{contract.HEARTBEAT_FILE}"
    dirs = state_dirs_with(tmp_path, events, {heartbeat: 1500.0})
    wall, _started, ended = jobfiles.job_times(str(tmp_path), dirs, events, current=None, now=9999.0)
    status_side = usage.job_usage(
        "7",
        {},
        {"7": [usage.own_record("7", "1000", "", "1100", [1500.0], contract.REQUEUED_RUN_SUFFIX)]},
        2,
        9999.0,
        running=False,
    )
    assert wall == status_side.wall_seconds == 500.0 and ended == 1500.0 and status_side.approximate


@pytest.mark.parametrize(
    ("text", "exit_status"),
    [
        ("1 driver-end 0\n", 0),
        ("1 driver-end 3\n", 3),
        ("1 driver-end other 1\n2 driver-end answer-judge 0\n", 0),
        ("1 driver-end other 1\n", None),
        ("1 job-start\n", None),
    ],
)
def test_driver_exit_plain_and_shared(text: str, exit_status: int | None) -> None:
    assert jobfiles.driver_exit(text, "answer-judge") == exit_status


@pytest.mark.parametrize(
    ("explicit", "phase", "exit_status", "written", "state"),
    [
        ("failed", "succeeded", 0, 12, "failed"),
        (None, "succeeded", None, 12, "succeeded"),
        (None, "succeeded", None, 5, "incomplete"),
        (None, "running", 0, 12, "succeeded"),  # exporting after the driver, before the job ends
        (None, "running", 2, 12, "failed"),
        (None, "running", None, 12, "running"),
        (None, None, None, 0, "unknown"),
    ],
)
def test_benchmark_state(explicit, phase, exit_status, written, state) -> None:
    explicit, phase = Status.from_word(explicit), Phase.from_word(phase)
    assert jobfiles.benchmark_state(explicit, phase, exit_status, written, 12) is Status(state)


def test_a_shared_job_is_timed_by_the_shared_deployments_events(tmp_path: Path) -> None:
    run = tmp_path / "run"
    bench = run / "bench"
    (bench / ".gym" / "7").mkdir(parents=True)
    (bench / ".gym" / "7" / "state").write_text("phase=running\n")
    (run / "shared-deployment" / ".gym" / "7").mkdir(parents=True)
    (run / "shared-deployment" / ".gym" / "7" / "events").write_text("0 job-start\n90 driver-end bench 0\n")
    got = jobfiles.read_record(
        str(bench), quickstart_spec(benchmark="bench", usage_dir="../shared-deployment"), job_id="7", now=120.0
    )
    assert got.wall_seconds == 120 and got.gpu_hours == pytest.approx(120 * 4 / 3600)
    assert got.state == "succeeded" and got.rollouts_path is None and got.written == 0


# -- the table -----------------------------------------------------------------------------------------


def read_csv(directory: Path) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO((directory / "results.csv").read_text())))


def test_table_upserts_one_row_per_run_and_benchmark_and_keeps_history(tmp_path: Path) -> None:
    d = tmp_path / "t"
    table.export_to_table(record(), {"dir": str(d)}, no_op, now=0)
    table.export_to_table(record(run_id="run-2"), {"dir": str(d)}, no_op, now=0)
    table.export_to_table(record(state="failed"), {"dir": str(d)}, no_op, now=0)  # the first row, re-exported
    rows = read_csv(d)
    assert [(r["run_id"], r["state"]) for r in rows] == [(RUN_ID, "failed"), ("run-2", "succeeded")]
    doc = json.loads((d / "results.json").read_text())
    assert doc["rows"][0]["params"] == {"services.policy.model": "tiny"} and "params" not in doc["columns"]
    assert rows[1]["samples_written"] == "12" and rows[1]["complete"] == "true" and rows[1]["mean/reward"] == "0.5"


def test_new_metrics_add_columns_at_the_end_and_none_moves(tmp_path: Path) -> None:
    d = tmp_path / "t"
    table.export_to_table(record(), {"dir": str(d)}, no_op, now=0)
    before = (d / "results.csv").read_text().splitlines()[0].split(",")
    table.export_to_table(
        record(run_id="run-2", metrics={"new/metric": 1.0, "state": 3.0}), {"dir": str(d)}, no_op, now=0
    )
    after = (d / "results.csv").read_text().splitlines()[0].split(",")
    assert after[: len(before)] == before and after[len(before) :] == ["new/metric", "metric:state"]
    assert list(table.FIXED_COLUMNS) == before[: len(table.FIXED_COLUMNS)]
    first, second = read_csv(d)
    assert first["new/metric"] == "" and second["mean/reward"] == "" and second["metric:state"] == "3.0"
    assert second["state"] == "succeeded"


def test_a_file_that_is_not_our_table_is_never_overwritten(tmp_path: Path) -> None:
    d = tmp_path / "t"
    d.mkdir()
    (d / "results.json").write_text('{"somebody": "else"}')
    with pytest.raises(rec.ExportError, match="not a results table"):
        table.export_to_table(record(), {"dir": str(d)}, no_op)
    assert (d / "results.json").read_text() == '{"somebody": "else"}'
    with pytest.raises(rec.ExportError, match="needs a dir"):
        table.export_to_table(record(), {}, no_op)


def test_a_table_whose_json_was_deleted_is_rebuilt_from_its_csv(tmp_path: Path) -> None:
    d = tmp_path / "t"
    table.export_to_table(record(), {"dir": str(d)}, no_op, now=0)
    (d / "results.json").unlink()
    table.export_to_table(record(run_id="run-2"), {"dir": str(d)}, no_op, now=0)
    assert [r["run_id"] for r in read_csv(d)] == [RUN_ID, "run-2"]
    assert [r["run_id"] for r in json.loads((d / "results.json").read_text())["rows"]] == [RUN_ID, "run-2"]


def test_a_table_lock_held_elsewhere_ends_in_a_failure_not_a_hang(tmp_path: Path) -> None:
    ctx = multiprocessing.get_context("fork")
    ready, release = ctx.Event(), ctx.Event()
    holder = ctx.Process(target=_hold_table_lock, args=(str(tmp_path), ready, release))
    holder.start()
    try:
        assert ready.wait(30)
        with pytest.raises(rec.ExportError, match=r"results.lock stayed locked for 0.3s by another export"):
            table.upsert_row(str(tmp_path), table.table_row(record(), "t"), lock_timeout=0.3)
    finally:
        release.set()
        holder.join(30)
    assert table.upsert_row(str(tmp_path), table.table_row(record(), "t")) == 1


def _hold_table_lock(directory: str, ready: Any, release: Any) -> None:
    with table.TableLock(directory):
        ready.set()
        release.wait(30)


def _upsert_many(directory: str, worker: int, count: int) -> None:
    for i in range(count):
        table.upsert_row(directory, table.table_row(record(run_id=f"run-{worker}-{i}", metrics={f"m{worker}": i}), "t"))


def test_two_processes_upserting_at_once_lose_nothing(tmp_path: Path) -> None:
    d = str(tmp_path / "t")
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_upsert_many, args=(d, w, 25)) for w in (1, 2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    assert [p.exitcode for p in procs] == [0, 0]
    columns, rows = table.read_table(d)
    assert sorted(r["run_id"] for r in rows) == sorted(f"run-{w}-{i}" for w in (1, 2) for i in range(25))
    assert {"m1", "m2"} <= set(columns)
    assert len(read_csv(Path(d))) == 50
    assert not [f for f in os.listdir(d) if ".tmp-" in f]


# -- receipts and the runner -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("state", "fp", "force", "why"),
    [
        (None, "f", False, "first export"),
        ("done", "f", False, None),
        ("done", "f", True, "forced"),
        ("done", "other", False, "the results changed since the last export"),
        ("running", "f", False, "retrying an export that was cut short"),
        ("failed", "f", False, "retrying after a failure"),
    ],
)
def test_receipt_decides_whether_an_export_runs(state, fp, force, why) -> None:
    earlier = receipts.Receipt(state, "id", "", "t", "f") if state else None
    assert receipts.decide(earlier, fp, force) == why


def test_an_unreadable_receipt_is_no_receipt(tmp_path: Path) -> None:
    receipts.write_receipt(str(tmp_path), "mlflow", receipts.Receipt("done", "r1", "d", "t", "f", 2))
    assert receipts.read_receipt(str(tmp_path), "mlflow") == receipts.Receipt("done", "r1", "d", "t", "f", 2)
    Path(receipts.receipt_path(str(tmp_path), "mlflow")).write_text("{half")
    assert receipts.read_receipt(str(tmp_path), "mlflow") is None


class Calls:
    """Fake exporters that record their calls and do what a test says."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.behaviour: dict[str, Any] = {}

    def exporter(self, name: str):
        def export(record_: rec.ExportRecord, settings_: dict, on_run_id, job_dir: str) -> rec.ExportOutcome:
            self.calls.append(name)
            on_run_id(f"{name}-run")
            action = self.behaviour.get(name)
            if isinstance(action, BaseException):
                raise action
            return rec.ExportOutcome(f"{name}-run", f"{name} exported")

        return export


def runner_for(job: Path, names=("mlflow", "wandb", "table")) -> tuple[Runner, Calls, list[str]]:
    calls = Calls()
    lines: list[str] = []
    the_spec = quickstart_spec(exporters={n: {} for n in names})
    runner = Runner(str(job), the_spec, {n: calls.exporter(n) for n in names}, lambda n, m: lines.append(f"{n}: {m}"))
    return runner, calls, lines


def test_a_failure_is_recorded_and_the_other_exports_still_run(tmp_path: Path) -> None:
    runner, calls, lines = runner_for(tmp_path)
    calls.behaviour["mlflow"] = rec.ExportError("MLflow at http://h is not reachable: connection refused")
    calls.behaviour["wandb"] = KeyError("surprise")
    assert runner.run(record()) == {"mlflow": "failed", "wandb": "failed", "table": "done"}
    mlflow_receipt = receipt(tmp_path, "mlflow")
    assert (
        mlflow_receipt is not None
        and mlflow_receipt.state == "failed"
        and mlflow_receipt.backend_run_id == "mlflow-run"
    )
    assert mlflow_receipt.detail == "MLflow at http://h is not reachable: connection refused"
    wandb_receipt = receipt(tmp_path, "wandb")
    assert wandb_receipt is not None and wandb_receipt.detail == "KeyError: 'surprise'"
    assert (
        len(lines) == 3
        and lines[0].startswith("mlflow: FAILED: MLflow at http://h")
        and lines[2].startswith("table: done")
    )


def test_done_exports_are_skipped_interrupted_and_failed_ones_retried(tmp_path: Path) -> None:
    runner, calls, lines = runner_for(tmp_path)
    calls.behaviour["wandb"] = rec.ExportError("down")
    calls.behaviour["table"] = SystemExit(137)  # killed mid-way: nothing catches it, the receipt stays running
    with pytest.raises(SystemExit):
        runner.run(record())
    interrupted = receipt(tmp_path, "table")
    assert interrupted is not None and interrupted.state == "running" and interrupted.backend_run_id == "table-run"
    calls.behaviour.clear()
    calls.calls.clear()
    assert runner.run(record()) == {"mlflow": "skipped", "wandb": "done", "table": "done"}
    assert calls.calls == ["wandb", "table"]
    assert receipt(tmp_path, "table").attempts == 2  # type: ignore[union-attr]
    assert "retrying an export that was cut short" in lines[-1]
    calls.calls.clear()
    runner.run(record(), only=["mlflow"], force=True)
    assert calls.calls == ["mlflow"]
    runner.run(record(written=13))  # a resumed job wrote more: every export again, same backend runs
    assert calls.calls == ["mlflow", "mlflow", "wandb", "table"]


def test_only_names_an_exporter_the_benchmark_lacks(tmp_path: Path) -> None:
    runner, calls, lines = runner_for(tmp_path, names=("table",))
    assert runner.run(record(), only=["mlflow"]) == {"mlflow": "skipped"}
    assert calls.calls == [] and lines == ["mlflow: not configured for this benchmark (configured: table)"]


def _hold_lock(job_dir: str, ready: Any, release: Any) -> None:
    lock = receipts.ExporterLock(job_dir, "mlflow")
    assert lock.acquire()
    ready.set()
    release.wait(30)
    lock.release()


def test_an_export_another_process_is_running_is_left_to_it(tmp_path: Path) -> None:
    ctx = multiprocessing.get_context("fork")
    ready, release = ctx.Event(), ctx.Event()
    holder = ctx.Process(target=_hold_lock, args=(str(tmp_path), ready, release))
    holder.start()
    try:
        assert ready.wait(30)
        runner, calls, lines = runner_for(tmp_path, names=("mlflow",))
        assert runner.run(record()) == {"mlflow": "skipped"} and calls.calls == []
        assert "another process is exporting" in lines[0]
    finally:
        release.set()
        holder.join(30)
    assert runner.run(record()) == {"mlflow": "done"}


def test_credentials_are_scrubbed_from_receipts_and_lines(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MLFLOW_TRACKING_TOKEN", "tok-123-secret")
    monkeypatch.setenv("WANDB_API_KEY", "wandb-key-456")
    runner, calls, lines = runner_for(tmp_path, names=("mlflow",))
    calls.behaviour["mlflow"] = rec.ExportError("server said: bad token tok-123-secret\nand key wandb-key-456")
    runner.run(record())
    text = Path(receipts.receipt_path(str(tmp_path), "mlflow")).read_text()
    assert "tok-123-secret" not in text and "wandb-key-456" not in text and "bad token ***" in text
    assert "tok-123-secret" not in lines[0] and "\n" not in lines[0]
    assert scrub("a\nb  tok-123-secret", {"MLFLOW_TRACKING_TOKEN": "tok-123-secret"}) == "a b ***"


def test_a_job_directory_that_cannot_keep_receipts_fails_the_export_not_the_runner(tmp_path: Path) -> None:
    (tmp_path / ".gym").mkdir()
    (tmp_path / ".gym" / "exports").write_text("a file where the receipts' directory should be")
    runner, calls, lines = runner_for(tmp_path, names=("mlflow", "table"))
    assert runner.run(record()) == {"mlflow": "failed", "table": "failed"}
    assert calls.calls == [] and lines[0].startswith("mlflow: FAILED: cannot keep its receipt in .gym/exports")


def test_main_never_fails_the_job(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([str(tmp_path)]) == 0  # no spec staged
    assert "FAILED: cannot read the export spec" in capsys.readouterr().out
    assert main(["--bogus"]) == 2


# -- the MLflow REST client ---------------------------------------------------------------------------


def client_for(url: str, **kwargs: Any) -> MlflowClient:
    sleeps: list[float] = []
    kwargs.setdefault("sleep", sleeps.append)
    return MlflowClient(url, **kwargs)


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_server_down_is_one_line_after_retries() -> None:
    sleeps: list[float] = []
    client = MlflowClient(f"http://127.0.0.1:{closed_port()}/prefix/", token="tok-secret", sleep=sleeps.append)
    with pytest.raises(MlflowError) as err:
        client.get_or_create_experiment("e")
    message = str(err.value)
    assert re.fullmatch(
        r"MLflow at http://127\.0\.0\.1:\d+/prefix is not reachable: connection refused \(is the server running\?\)",
        message,
    )
    assert sleeps == [1.0, 2.0]


@pytest.mark.parametrize(
    ("token", "fix"),
    [
        (None, "it needs credentials: set MLFLOW_TRACKING_TOKEN"),
        ("tok-secret", "the credentials in the environment were not accepted"),
    ],
)
@pytest.mark.parametrize("status", [401, 403])
def test_refused_credentials_say_what_to_set_and_never_show_the_token(status: int, token: str | None, fix: str) -> None:
    with FakeMlflowServer() as server:
        # A server that echoes the request's headers (the Authorization one too) into its error.
        server.state.fail("/mlflow/experiments/get-by-name", status, "denied {headers}", content_type="text/plain")
        with pytest.raises(MlflowError) as err:
            client_for(server.url, token=token).get_experiment_id("e")
    message = str(err.value)
    assert message.startswith(
        f"MLflow at {server.url} refused /api/2.0/mlflow/experiments/get-by-name (HTTP {status}): {fix}"
    )
    assert err.value.status == status and "tok-secret" not in message


def test_mlflows_host_guard_is_named_as_such_not_as_bad_credentials() -> None:
    # What mlflow server 3.x answers a Host outside --allowed-hosts (seen from the real server here).
    with FakeMlflowServer() as server:
        server.state.fail(
            "/mlflow/experiments/get-by-name",
            403,
            "Invalid Host header - possible DNS rebinding attack detected",
            content_type="text/plain",
        )
        with pytest.raises(MlflowError) as err:
            client_for(server.url, token="tok-secret").get_experiment_id("e")
    host = server.url.split("//", 1)[1]
    assert str(err.value).endswith(
        f"(HTTP 403): the server does not accept the host name {host}: start it with --allowed-hosts listing {host}"
    )


def test_a_404_that_is_not_mlflow_says_check_the_uri_and_mlflows_own_404_is_not_found() -> None:
    with FakeMlflowServer() as server:
        server.state.fail("/mlflow/experiments/get-by-name", 404, "<html>nginx</html>", content_type="text/html")
        with pytest.raises(
            MlflowError,
            match=r"^no MLflow REST API at http://127.0.0.1:\d+ \(HTTP 404 on "
            r"/api/2.0/mlflow/experiments/get-by-name\): check tracking_uri$",
        ):
            client_for(server.url).get_experiment_id("e")
        assert client_for(server.url).get_experiment_id("e") is None  # MLflow's own RESOURCE_DOES_NOT_EXIST


def test_other_errors_carry_mlflows_code_and_message_scrubbed_and_short() -> None:
    with FakeMlflowServer() as server:
        server.state.fail(
            "/mlflow/runs/get",
            400,
            {"error_code": "INVALID_PARAMETER_VALUE", "message": "bad Bearer tok-secret " + "x" * 500},
        )
        with pytest.raises(MlflowError) as err:
            client_for(server.url, token="tok-secret").get_run("r")
    message = str(err.value)
    assert message.startswith(
        f"MLflow at {server.url} answered HTTP 400 to GET /api/2.0/mlflow/runs/get: "
        "INVALID_PARAMETER_VALUE: bad Bearer ***"
    )
    assert len(message) < 400 and "tok-secret" not in message


def test_server_errors_are_retried_and_the_bearer_token_is_sent() -> None:
    with FakeMlflowServer() as server:
        server.state.fail("/mlflow/experiments/get-by-name", 503, "busy", times=2)
        client = client_for(server.url, token="tok-secret")
        assert client.get_or_create_experiment("e") == "1"
        auth = {h.get("Authorization") for _, _, h, _ in server.state.requests}
    assert auth == {"Bearer tok-secret"}


def test_a_redirect_is_refused_so_that_the_token_stays_home() -> None:
    with FakeMlflowServer() as server:
        server.state.fail(
            "/mlflow/experiments/get-by-name", 302, "", headers={"Location": "http://elsewhere.example/x?t=1"}
        )
        with pytest.raises(
            MlflowError, match=r"redirects to http://elsewhere.example/x: set tracking_uri to that address"
        ):
            client_for(server.url, token="tok-secret").get_experiment_id("e")
        assert len(server.state.requests) == 1


def test_log_batch_respects_mlflows_limits() -> None:
    with FakeMlflowServer() as server:
        client = client_for(server.url)
        run = client.create_run(client.get_or_create_experiment("e"), "n", {}, 0)
        run_id = run["info"]["run_id"]
        metrics = {f"m{i}": float(i) for i in range(2500)}
        params = {f"p{i}": "v" for i in range(250)}
        tags = {f"t{i}": "v" for i in range(150)}
        assert client.log_batch(run_id, metrics, params, tags, 0) == 3 + 2 + 3
        batches = server.state.calls("/runs/log-batch")
        stored = server.state.runs[run_id]
    assert all(
        len(b.get("params", [])) <= 100
        and len(b.get("tags", [])) <= 100
        and len(b.get("metrics", [])) <= 1000
        and sum(len(b.get(k, [])) for k in ("params", "tags", "metrics")) <= 1000
        for b in batches
    )
    assert len(stored["metrics"]) == 2500 and len(stored["params"]) == 250 and len(stored["tags"]) == 150


@pytest.mark.parametrize(
    ("uri", "directory"),
    [
        ("mlflow-artifacts:/1/abc/artifacts", "1/abc/artifacts"),
        ("mlflow-artifacts://host:5000/1/abc/artifacts", "1/abc/artifacts"),
        ("http://host:5000/api/2.0/mlflow-artifacts/artifacts/1/abc/artifacts", "1/abc/artifacts"),
        ("s3://bucket/1/abc/artifacts", None),
        ("/var/mlruns/1/abc/artifacts", None),
    ],
)
def test_which_artifact_locations_the_proxy_serves(uri: str, directory: str | None) -> None:
    assert mlflow_rest.proxied_artifact_dir(uri) == directory


def test_run_name_fills_known_fields_only() -> None:
    assert mlflow_rest.run_name("{benchmark} of {run_id} {other}", record()) == f"{BENCHMARK} of {RUN_ID} {{other}}"


def mlflow_export(server: FakeMlflowServer, rec_: rec.ExportRecord, **settings_: Any) -> rec.ExportOutcome:
    seen: list[str] = []
    outcome = export_to_mlflow(
        rec_, {"experiment": "exp", **settings_}, seen.append, client=client_for(server.url), now=1000
    )
    assert seen == [outcome.backend_run_id]
    return outcome


def test_metrics_are_logged_at_the_checkpoint_s_training_step() -> None:
    """job.training_step (gym eval watch sets it): MLflow draws a sweep's runs as one curve."""
    with FakeMlflowServer() as server:
        stepped = server.state.runs[mlflow_export(server, record(step=1500)).backend_run_id]
        plain = server.state.runs[mlflow_export(server, record(run_id="other-run")).backend_run_id]
    assert set(stepped["metric_steps"]["mean/reward"]) == {1500}
    assert set(plain["metric_steps"]["mean/reward"]) == {0}


def test_an_export_creates_one_tagged_run_with_everything(tmp_path: Path) -> None:
    rollouts = tmp_path / "rollouts.jsonl"
    rollouts.write_text('{"x": 1}\n')
    with FakeMlflowServer() as server:
        outcome = mlflow_export(
            server,
            record(rollouts_path=str(rollouts), started_at=10.0, ended_at=20.0),
            tags={"team": "eval"},
            run_name="{benchmark}",
        )
        run = server.state.runs[outcome.backend_run_id]
        artifacts = dict(server.state.artifacts)
    assert run["run_name"] == BENCHMARK and run["status"] == "FINISHED"
    assert (run["start_time"], run["end_time"]) == (10000, 20000)
    assert run["tags"]["gym.export_key"] == f"{RUN_ID}/{BENCHMARK}" and run["tags"]["team"] == "eval"
    assert run["tags"]["gym.samples"] == "12/12" and run["tags"]["gym.complete"] == "true"
    assert run["params"] == {"services.policy.model": "tiny"}
    assert run["metrics"]["mean/reward"] == [0.5] and run["metrics"]["pass_1/accuracy"] == [0.25]
    assert run["metrics"]["gym/samples_expected"] == [12.0] and run["metrics"]["gym/gpu_hours"] == [0.5]
    assert artifacts == {f"1/{outcome.backend_run_id}/artifacts/rollouts.jsonl": b'{"x": 1}\n'}
    assert "renamed 1 metric name(s) MLflow refuses: 'pass@1/accuracy' -> 'pass_1/accuracy'" in outcome.detail
    assert "rollouts.jsonl uploaded (9 bytes)" in outcome.detail


def test_a_second_export_completes_the_same_run_without_repeating_itself(tmp_path: Path) -> None:
    rollouts = tmp_path / "rollouts.jsonl"
    rollouts.write_text('{"x": 1}\n')
    with FakeMlflowServer() as server:
        first = mlflow_export(server, record(rollouts_path=str(rollouts)))
        uploads = len([r for r in server.state.requests if r[0] == "PUT"])
        second = mlflow_export(
            server, record(rollouts_path=str(rollouts), metrics={"mean/reward": 0.75, "pass@1/accuracy": 0.25})
        )
        run = server.state.runs[first.backend_run_id]
        assert second.backend_run_id == first.backend_run_id and len(server.state.runs) == 1
        assert run["metrics"]["mean/reward"] == [0.5, 0.75] and run["metrics"]["pass_1/accuracy"] == [0.25]
        assert len([r for r in server.state.requests if r[0] == "PUT"]) == uploads == 1
        assert "uploaded already" in second.detail


def test_a_lost_answer_to_create_run_does_not_make_two_runs() -> None:
    with FakeMlflowServer() as server:
        server.state.fail("/mlflow/runs/create", 504, "gateway timeout", then_do_it=True)
        outcome = mlflow_export(server, record())
        assert list(server.state.runs) == [outcome.backend_run_id]
        assert len(server.state.calls("/runs/create")) == 1  # never retried blindly


def test_a_changed_param_keeps_its_first_value_and_says_so() -> None:
    with FakeMlflowServer() as server:
        mlflow_export(server, record())
        outcome = mlflow_export(server, record(params={"services.policy.model": "other"}))
        assert "kept the earlier value of 1 param(s) MLflow cannot change: services.policy.model" in outcome.detail


def test_a_server_that_keeps_artifacts_elsewhere_still_gets_the_metrics(tmp_path: Path) -> None:
    rollouts = tmp_path / "rollouts.jsonl"
    rollouts.write_text("{}\n")
    with FakeMlflowServer() as server:
        server.state.fail("/mlflow-artifacts/artifacts", 503, {"detail": "Artifact serving is disabled."}, times=10)
        outcome = mlflow_export(server, record(rollouts_path=str(rollouts)))
        assert server.state.runs[outcome.backend_run_id]["status"] == "FINISHED"
    assert "rollouts not uploaded: the server does not serve artifacts" in outcome.detail


def test_no_tracking_uri_is_a_clear_failure(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    with pytest.raises(
        MlflowError, match="no tracking_uri: set it in the mlflow exporter's settings or MLFLOW_TRACKING_URI"
    ):
        export_to_mlflow(record(), {}, no_op)
    with pytest.raises(MlflowError, match="is not the http"):
        MlflowClient("file:///tmp/mlruns")
    with pytest.raises(
        MlflowError, match=r"^tracking_uri 'https://host/x' holds credentials: set MLFLOW_TRACKING_TOKEN"
    ) as err:
        MlflowClient("https://me:pa55word@host/x")
    assert "pa55word" not in str(err.value)


# -- wandb -----------------------------------------------------------------------------------------------


def test_wandb_run_ids_are_deterministic_and_free_of_reserved_characters() -> None:
    assert wandb_export.wandb_run_id(f"{RUN_ID}/{BENCHMARK}") == f"{RUN_ID}--{BENCHMARK}"
    long_id = wandb_export.wandb_run_id("r" * 80 + "/b:c")
    assert len(long_id) <= 64 and long_id == wandb_export.wandb_run_id("r" * 80 + "/b:c")
    assert not set(":;,#?/'") & set(long_id)


def test_without_wandb_the_failure_says_what_to_install_where(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "wandb", None)  # import wandb -> ImportError
    with pytest.raises(
        rec.ExportError, match=rf"wandb library is not installed for {re.escape(sys.executable)}.*-m pip install"
    ):
        wandb_export.export_to_wandb(record(), {}, no_op, "/tmp")


def test_wandb_export_resumes_the_run_of_its_key(tmp_path: Path) -> None:
    seen: dict[str, Any] = {}

    class Run:
        summary: dict[str, Any] = {}
        dir = str(tmp_path / "wandb" / "offline-run-x" / "files")

        def log_artifact(self, artifact: Any) -> None:
            seen["artifact"] = artifact

        def finish(self) -> None:
            seen["finished"] = True

    class Artifact:
        def __init__(self, name: str, type: str) -> None:
            self.name, self.type, self.files = name, type, []

        def add_file(self, path: str, name: str) -> None:
            self.files.append((path, name))

    def init(**kwargs: Any) -> Run:
        seen["init"] = kwargs
        return Run()

    fake = types.SimpleNamespace(init=init, Artifact=Artifact, Settings=lambda **kw: kw)
    rollouts = tmp_path / "rollouts.jsonl"
    rollouts.write_text("{}\n")
    outcome = wandb_export.export_to_wandb(
        record(rollouts_path=str(rollouts)), {"mode": "offline", "project": "p"}, no_op, str(tmp_path), wandb=fake
    )
    init_args = seen["init"]
    assert (init_args["id"], init_args["resume"], init_args["mode"], init_args["dir"]) == (
        f"{RUN_ID}--{BENCHMARK}",
        "allow",
        "offline",
        str(tmp_path),
    )
    assert init_args["config"]["gym.run_id"] == RUN_ID and init_args["config"]["services.policy.model"] == "tiny"
    assert Run.summary["mean/reward"] == 0.5 and Run.summary["gym/samples_written"] == 12.0
    assert seen["artifact"].type == "rollouts" and seen["artifact"].files == [(str(rollouts), "rollouts.jsonl")]
    assert seen["finished"] and outcome.detail.startswith(
        f"offline run {RUN_ID}--{BENCHMARK} in {tmp_path}/wandb/offline-run-x"
    )
    with pytest.raises(rec.ExportError, match="wandb mode 'sometimes'"):
        wandb_export.export_to_wandb(record(), {"mode": "sometimes"}, no_op, "/tmp", wandb=fake)


# -- what the node must have ---------------------------------------------------------------------------

NODE_SIDE_STDLIB = {
    "__future__",
    "base64",
    "csv",
    "enum",
    "errno",
    "fcntl",
    "glob",
    "hashlib",
    "http",
    "io",
    "json",
    "math",
    "os",
    "re",
    "socket",
    "ssl",
    "stat",
    "sys",
    "time",
    "typing",
    "collections",
    "urllib",
}
# Our own modules (shipped with them: tests/unit/test_shipping.py), and wandb where the job has it.
SIBLINGS = {"nemo_gym", "wandb"}


@pytest.mark.parametrize("module", Program.EXPORTERS.modules)
def test_node_side_modules_parse_as_python_3_8_and_import_only_stdlib(module: str) -> None:
    source = shipping.module_source(module)
    ast.parse(source, feature_version=(3, 8))
    imported = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            imported |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            imported.add(node.module.split(".")[0])
    assert imported <= NODE_SIDE_STDLIB | SIBLINGS, imported - NODE_SIDE_STDLIB - SIBLINGS


@pytest.mark.skipif(not os.path.exists(PY38), reason="no Python 3.8 on this machine")
def test_the_staged_runner_works_under_python_3_8_without_our_package(tmp_path: Path) -> None:
    with FakeMlflowServer() as server:
        job = staged_job(
            tmp_path,
            {
                "mlflow": {"tracking_uri": server.url},
                "wandb": {"mode": "offline"},
                "table": {"dir": str(tmp_path / "shared")},
            },
        )
        done = run_staged(job, PY38, env={"MLFLOW_TRACKING_TOKEN": "tok-secret"})
        (run,) = server.state.runs.values()
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 3 and f"export mlflow: done (first export): run {run['run_id']}" in lines[0]
    assert "export wandb: FAILED: the wandb library is not installed for" in lines[1]
    assert "export table: done (first export): row" in lines[2]
    assert run["status"] == "FINISHED" and run["metrics"]["gym/samples_written"] == [12.0]
    rows = read_csv(tmp_path / "shared")
    assert [(r["run_id"], r["samples_written"], r["samples_expected"], r["state"]) for r in rows] == [
        (RUN_ID, "12", "12", "succeeded")
    ]
    assert subprocess.run([PY38, "-E", "-s", "-c", "import nemo_gym"], capture_output=True).returncode != 0


def test_a_state_leaves_for_the_backends_as_its_plain_word() -> None:
    """W&B writes an Enum by its member's name ('SUCCEEDED'): every exporter hands on the word."""
    shown = record(state=Status.SUCCEEDED)
    assert type(shown.identity()["state"]) is str and shown.identity()["state"] == "succeeded"
    assert shown.fingerprint() == record(state="succeeded").fingerprint()
    assert type(wandb_export.run_summary(shown)["gym/state"]) is str
