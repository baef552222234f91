"""One metric, one name: `gym eval results --json`, the table export and MLflow name the real
quickstart run's aggregate metrics (tests/data/quickstart-run) identically, each through the
package's own code path (results over the local connection, the job-side export record, the
MLflow REST exporter against the fake MLflow server)."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

from export_jobs import BENCHMARK, QUICKSTART_RUN, RUN_ID
from fakes.fake_mlflow import FakeMlflowServer

from nemo_gym.orchestration import library, results
from nemo_gym.orchestration.exporters import jobfiles, spec, table
from nemo_gym.orchestration.exporters.mlflow_rest import MlflowClient, export_to_mlflow
from nemo_gym.orchestration.record import run_in_directory


def export_record(run_dir: Path):
    exported = spec.ExportSpec(RUN_ID, None, BENCHMARK, "tiny", "policy", 4, {}, (), {})
    return jobfiles.read_record(str(run_dir / BENCHMARK), exported, now=0)


def names_in_results_json(run_dir: Path) -> list[str]:
    document = json.loads(results.results_json([library.results([run_in_directory(str(run_dir))])[0]]))
    [benchmark] = document["benchmarks"]
    return list(benchmark["metrics"])


def names_in_the_table(run_dir: Path, table_dir: Path) -> list[str]:
    table.export_to_table(export_record(run_dir), {"dir": str(table_dir)}, lambda _id: None, now=0)
    with open(table_dir / table.CSV_FILE, newline="") as fh:
        columns = next(csv.reader(fh))
    return [c for c in columns if c not in table.FIXED_COLUMNS and c != table.PARAMS_FIELD]


def names_in_mlflow(run_dir: Path) -> list[str]:
    record = export_record(run_dir)._replace(rollouts_path=None)  # the names, not the artifact
    with FakeMlflowServer() as server:
        export_to_mlflow(record, {"experiment": "exp"}, lambda _id: None, client=MlflowClient(server.url), now=1000)
        [run] = server.state.runs.values()
    return [name for name in run["metrics"] if name not in record.summary_metrics()]


def test_results_json_the_table_and_mlflow_name_the_quickstarts_metrics_identically(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    shutil.copytree(QUICKSTART_RUN, run_dir)
    in_results = names_in_results_json(run_dir)
    in_table = names_in_the_table(run_dir, tmp_path / "table")
    in_mlflow = names_in_mlflow(run_dir)
    assert sorted(in_results) == sorted(in_table) == sorted(in_mlflow)
    assert in_results == in_table  # and in gym's order
    assert {"mean/reward", "majority_1/accuracy", "pass_1/accuracy", "pass_1_avg-of-1_/f1"} <= set(in_results)
    assert not any("@" in name or "[" in name for name in in_results)  # MLflow-illegal, mapped for all
