"""Labels read back are shown as written, on each surface's terms: escaped control characters and
bidi controls on the terminal, no markup for rich, no mathtext for matplotlib."""

from __future__ import annotations

import io
import json
import shutil
import unicodedata

import pytest
from checkpoint_runs import REAL_RUN, checkpoint_runs
from hypothesis import given
from hypothesis import strategies as st
from rich.console import Console

from nemo_gym.orchestration import contract, display, library
from nemo_gym.orchestration.cli.common import table
from nemo_gym.orchestration.cli.main import main
from nemo_gym.orchestration.library import RunStatus, Selection
from nemo_gym.orchestration.observe import JobStatus
from nemo_gym.orchestration.record import SweepRecord, run_in_directory
from nemo_gym.orchestration.verbs.report.page import report_html
from nemo_gym.orchestration.verbs.status.command import rich_table

BIDI = {
    "\u061c",
    "\u200e",
    "\u200f",
    "\u2028",
    "\u2029",
    *map(chr, range(0x202A, 0x202F)),
    *map(chr, range(0x2066, 0x206A)),
}


@pytest.mark.parametrize(
    "label, shown",
    [
        ("\x1b]0;owned\x07step", "\\x1b]0;owned\\x07step"),
        ("\x1b[31mred", "\\x1b[31mred"),
        ("abc\u202edef", "abc\\u202edef"),
        ("two\nlines\r", "two\\x0alines\\x0d"),
        ("caf\udce9", "caf\\xe9"),  # a byte that was not UTF-8, as surrogateescape keeps it
        ("\x9b31m", "\\x9b31m"),  # the one-character CSI
        ("/ckpt/exp_$a_$/step-1000 ü 日本", "/ckpt/exp_$a_$/step-1000 ü 日本"),
    ],
)
def test_the_terminal_sees_control_characters_escaped(label, shown) -> None:
    assert display.terminal(label) == shown


def test_text_keeps_its_lines_but_not_its_escapes() -> None:
    assert display.terminal_text("a\tb\nc\x1b[2J") == "a\tb\nc\\x1b[2J"


def rendered(renderable) -> str:
    out = io.StringIO()
    Console(file=out, width=200, color_system=None).print(renderable)
    return out.getvalue()


def test_rich_shows_markup_as_written() -> None:
    for label in ("[/bad]", "[a,b]", "[bold]x[/bold]", "[link=http://x]y", "\\[x]"):
        assert rendered(display.rich(label)).rstrip("\n") == label


def test_status_watch_shows_a_swept_list_and_markup_in_its_cells(tmp_path) -> None:
    run_dir = tmp_path / "run"
    shutil.copytree(REAL_RUN, run_dir)
    record = run_in_directory(str(run_dir)).model_copy(
        update={"sweep_values": {"m": "[a,b]"}, "sweep_id": "gym-sweep-20260101T000000Z-000000"}
    )
    job = JobStatus("b", "1", "failed", "[/bad] \x1b[31mdied", 0, str(run_dir), ["1"])
    other = record.model_copy(update={"sweep_values": {"m": "[c]"}, "gym_job_id": "other"})
    sweep = SweepRecord(
        sweep_id="gym-sweep-20260101T000000Z-000000",
        submitted_at="",
        submitted_by="",
        config="",
        swept=["m"],
        executor="local",
        hostname=None,
        runs=[],
    )
    text = rendered(rich_table(Selection([record, other], sweep), [RunStatus(record, [job]), RunStatus(other, [job])]))
    assert "[a,b]" in text and "[c]" in text and "[/bad] \\x1b[31mdied" in text and "\x1b" not in text


def test_tables_escape_every_cell() -> None:
    assert table(["A"], [["x\x1b[31m"]]) == "A\nx\\x1b[31m"


def test_a_report_draws_labels_with_dollars_and_escapes(tmp_path) -> None:
    dirs = checkpoint_runs(tmp_path)
    labels = ["/ckpt/exp_$a_$/step-1000", "/ckpt/exp_$a_$/step-2000\x1b]0;x\x07", "$\\frac{$"]
    records = [
        run_in_directory(str(d)).model_copy(update={"sweep_values": {"m": label}}) for d, label in zip(dirs, labels)
    ]
    html = report_html(library.results(records), "reward")
    assert "/ckpt/exp_$a_$/step-1000" in html[html.index("<svg") :] and "\x1b" not in html


def test_a_page_s_values_lose_their_controls_but_keep_their_lines_and_its_own_markup() -> None:
    import markupsafe

    assert display.html("a\x1b[31m\u202eb\nc\td") == "a\\x1b[31m\\u202eb\nc\td"
    chart = markupsafe.Markup("<svg>\x1b</svg>")
    assert display.html(chart) is chart and display.html(3) == 3


@given(st.text())
def test_any_label_is_one_safe_line_on_the_terminal(label) -> None:
    shown = display.terminal(label)
    shown.encode("utf-8")  # strict: no lone surrogate reaches the terminal
    assert not any(unicodedata.category(c) in ("Cc", "Cs") or c in BIDI for c in shown)


@given(st.text())
def test_any_label_reaches_rich_as_written(label) -> None:
    assert rendered(display.rich(label)).rstrip() == display.terminal(label).rstrip()


@pytest.mark.filterwarnings("ignore:Glyph")
@given(st.text(max_size=30))
def test_any_label_draws(label) -> None:
    from matplotlib.figure import Figure

    fig = Figure()
    ax = fig.subplots()
    ax.set_title(display.matplotlib(label))
    ax.set_xticks([0, 1], [display.matplotlib(label), display.matplotlib(label + "$x$")])
    fig.savefig(io.StringIO(), format="svg")


def test_status_of_a_run_dir_whose_record_names_hostile_things_is_escaped(tmp_path, capsys) -> None:
    run_dir = tmp_path / "run"
    shutil.copytree(REAL_RUN, run_dir)
    path = run_dir / contract.RECORD_FILE
    record = json.loads(path.read_text())
    path.write_text(json.dumps({**record, "sweep_values": {"k\x1b[31m": "v\u202e"}}))
    for verb in ("status", "results"):
        main(["eval", verb, str(run_dir)])
        out, err = capsys.readouterr()
        assert "\x1b" not in out + err and "\u202e" not in out + err
    # A run id that is no run id is refused (it becomes a file name in the index), and said escaped.
    path.write_text(json.dumps({**record, "gym_job_id": "r\x1b]0;x\x07\u202e"}))
    for verb in ("status", "results"):
        assert main(["eval", verb, str(run_dir)]) == 1
        out, err = capsys.readouterr()
        assert "\x1b" not in out + err and "\u202e" not in out + err and "is not a run id" in err
        assert "r\\x1b]0;x\\x07\\u202e" in err and len(err.splitlines()) == 1
