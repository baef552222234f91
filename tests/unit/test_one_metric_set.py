"""One metric set (issue 38): the table export of a run carries exactly the metrics ``results --json``
shows for it (gym's aggregates under their one name, ``facts.benchmark_metrics``), num_repeats and
total_positives among them."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

from nemo_gym.orchestration.cli.main import main
from nemo_gym.orchestration.exporters.table import FIXED_COLUMNS, PARAMS_FIELD

REAL_RUN = Path(__file__).resolve().parents[1] / "data" / "quickstart-run"


def test_the_table_export_has_every_metric_results_shows(tmp_path, capsys) -> None:
    run = tmp_path / "run"
    shutil.copytree(REAL_RUN, run)
    main(["eval", "results", str(run), "--json"])
    [bench] = json.loads(capsys.readouterr().out)["benchmarks"]
    assert main(["eval", "export", str(run), "--to", "table", "--dir", str(tmp_path / "t")]) == 0
    with (tmp_path / "t" / "results.csv").open(newline="") as fh:
        [row] = list(csv.DictReader(fh))
    exported = {k for k in row if k not in FIXED_COLUMNS and k != PARAMS_FIELD}
    assert exported == set(bench["metrics"]) and {"num_repeats", "total_positives"} <= exported
    assert all(float(row[name]) == bench["metrics"][name] for name in exported)
