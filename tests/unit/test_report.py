"""`gym eval report`: the page is a view over the results `results` and `compare` show, with
nothing in it that loads from elsewhere; a sweep's numbers become a curve. Built from a real NeMo
Gym run (tests/data/quickstart-run) copied to checkpoint-like directories with changed rewards."""

from __future__ import annotations

import builtins
import json
import re
import sys

import pytest
from checkpoint_runs import checkpoint_runs

from nemo_gym.orchestration import contract, library
from nemo_gym.orchestration.cli.main import main
from nemo_gym.orchestration.errors import UserError
from nemo_gym.orchestration.record import run_in_directory
from nemo_gym.orchestration.usage import total, wall_text
from nemo_gym.orchestration.verbs.report.page import report_html


def test_the_page_holds_the_table_a_chart_per_benchmark_and_loads_nothing(tmp_path) -> None:
    runs = library.results([run_in_directory(str(d)) for d in checkpoint_runs(tmp_path)])
    html = report_html(runs, "reward")
    assert html.count("<svg") == 1 and 'data-benchmark="answer-judge"' in html
    # Nothing fetched: no script, stylesheet, image or font from anywhere (SVG's xmlns is a name, not a fetch).
    assert not re.search(r"<script|<link|<img|<iframe|@import|url\((?!#)", html)  # url(#id): a clip path in the SVG
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", html)
    rows = re.findall(
        r'<tr><td class="label">(step-\d+)</td><td class="(\w+)"[^>]*>([\d.]+)<span class="samples">([^<]*)', html
    )
    assert rows == [
        ("step-1000", "complete", "0.0000", "12/12 samples"),
        ("step-2000", "complete", "0.5000", "12/12 samples"),
        ("step-3000", "partial", "1.0000", "9/12 samples, incomplete"),
    ]
    assert "against" not in html  # three runs: no pairwise comparison
    assert "step-N" in html  # the checkpoints' step is the x axis


def test_the_total_row_sums_wall_and_the_title_says_when_runs_are_part_of_a_sweep(tmp_path) -> None:
    records = [
        run_in_directory(str(d)).model_copy(update={"sweep_id": "gym-sweep-x", "sweep_values": {"m": d.name}})
        for d in checkpoint_runs(tmp_path)
    ]
    runs = library.results(records[:2])
    walls = [run.usage.wall_seconds for run in runs]
    assert None not in walls  # the real run's own start/end records
    page = report_html(runs, "reward", sweep_size=3)
    assert "<h1>Sweep gym-sweep-x: 2 of its 3 runs</h1>" in page
    footer = page[page.index("<tfoot>") : page.index("</tfoot>")]
    assert re.findall(r"<th>([^<]*)</th></tr>", footer) == [wall_text(total(run.usage for run in runs))]
    assert "<h1>Sweep gym-sweep-x: 2 runs</h1>" in report_html(runs, "reward", sweep_size=2)
    assert "<h1>2 runs</h1>" in report_html(
        library.results([run_in_directory(str(tmp_path / "step-1000"))] * 2), "reward"
    )


def test_two_runs_add_their_comparison_with_the_tasks_that_flipped(tmp_path) -> None:
    base, candidate, _ = checkpoint_runs(tmp_path)
    html = report_html(
        library.results([run_in_directory(str(base)), run_in_directory(str(candidate))]),
        "reward",
        library.compare(run_in_directory(str(base)), run_in_directory(str(candidate))),
    )
    section = html[html.index('<table id="comparison">') :]
    assert "<h2>step-2000 against step-1000</h2>" in html
    assert "+0.5000" in section and 'class="improved">improved' in section and "improved: 0, 1, 2, 3, 4, 5" in section
    assert "regressed: none" in section and "adjusted p is below 0.05" in section


def test_labels_and_values_are_escaped(tmp_path) -> None:
    [run_dir, *_] = checkpoint_runs(tmp_path)
    record = run_in_directory(str(run_dir)).model_copy(update={"sweep_values": {"k": "<b>x</b>"}})
    html = report_html(library.results([record]), "reward")
    assert "&lt;b&gt;x&lt;/b&gt;" in html and "<b>x</b>" not in html


def test_the_command_writes_one_file(tmp_path, capsys) -> None:
    dirs = checkpoint_runs(tmp_path)
    out = tmp_path / "report.html"
    code = main(["eval", "report", *map(str, dirs), "-o", str(out)])
    assert code == 0 and capsys.readouterr().out == f"Report of 3 run(s): {out}\n"
    assert out.read_text().startswith("<!DOCTYPE html>")
    code = main(["eval", "report", str(dirs[0]), "-o", str(tmp_path / "no" / "r.html")])
    assert code == 1 and capsys.readouterr().err == (
        f"error: -o {tmp_path / 'no' / 'r.html'}: no directory {tmp_path / 'no'}; create it or write the report elsewhere\n"
    )


def test_without_matplotlib_the_command_says_what_to_install(tmp_path, capsys, monkeypatch) -> None:
    [run_dir, *_] = checkpoint_runs(tmp_path)
    real_import = builtins.__import__

    def no_matplotlib(name, *args, **kwargs):
        if name == "matplotlib" or name.startswith("matplotlib."):
            raise ImportError(f"No module named {name!r}")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_matplotlib)
    code = main(["eval", "report", str(run_dir), "-o", str(tmp_path / "r.html")])
    err = capsys.readouterr().err
    assert code == 1 and err.count("\n") == 1
    assert err.startswith(
        "error: gym eval report draws its charts with matplotlib, which is not installed; add it with: "
    )
    assert "'matplotlib>=3.7'" in err
    assert not (tmp_path / "r.html").exists()
    with pytest.raises(UserError):
        report_html([], "reward")


@pytest.mark.parametrize(
    ("marker", "expected"),
    [
        ("uv-receipt.toml", "uv tool install --with 'matplotlib>=3.7' gym-orchestration"),
        ("pipx_metadata.json", "pipx inject gym-orchestration 'matplotlib>=3.7'"),
        (None, "-m pip install 'matplotlib>=3.7'"),
    ],
)
def test_the_install_hint_fits_how_the_tool_was_installed(tmp_path, monkeypatch, marker, expected) -> None:
    from nemo_gym.orchestration.verbs.report.page import install_hint

    if marker:
        (tmp_path / marker).write_text("")
    monkeypatch.setattr(sys, "prefix", str(tmp_path))
    assert expected in install_hint("matplotlib>=3.7")


def test_in_an_environment_without_pip_the_hint_is_uvs_pip_for_this_interpreter(tmp_path, monkeypatch) -> None:
    import importlib.util

    from nemo_gym.orchestration.verbs.report.page import install_hint

    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "pip" else real_find_spec(name, *a)
    )
    monkeypatch.setattr(sys, "prefix", str(tmp_path))
    assert install_hint("x") == f"add it with: uv pip install --python {sys.executable} 'x'"


def test_a_value_over_unscoreable_rows_or_of_unknown_completeness_is_a_marked_partial_cell(tmp_path) -> None:
    base, candidate, _ = checkpoint_runs(tmp_path)
    rollouts = candidate / "answer-judge" / contract.ROLLOUTS_FILE
    rows = [json.loads(line) for line in rollouts.read_text().splitlines()]
    rows = [{**r, "reward": "NaN?" if r["_ng_task_index"] in (6, 7) else r["reward"]} for r in rows]
    rollouts.write_text("".join(json.dumps(r) + "\n" for r in rows))
    (base / "answer-judge" / contract.MATERIALIZED_INPUTS_FILE).unlink()
    html = report_html(library.results([run_in_directory(str(base)), run_in_directory(str(candidate))]), "reward")
    cells = re.findall(
        r'<tr><td class="label">(step-\d+)</td><td class="(\w+)"[^>]*>([\d.]+)<span class="samples">([^<]*)', html
    )
    assert cells == [
        ("step-1000", "partial", "0.0000", "12/? samples, completeness unknown"),
        ("step-2000", "partial", "0.6000", "12/12 samples, 2 unscored"),
    ]
