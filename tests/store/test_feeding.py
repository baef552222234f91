"""The store fed without asking (#41): ``gym eval results`` and ``gym eval status`` write a final
run's entries once, again only when its results changed, never a running run's; a store that
cannot be reached (or fails otherwise) changes neither the output nor the exit code: one warning
line naming it (password masked) and the fix, and the next read tries again; GYM_RESULTS_URL=off
writes nothing. On real run directories (tests/data/quickstart-run copied), SQLite and PostgreSQL."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from sqlalchemy import delete
from store_runs import run_directory, scoring

from nemo_gym.orchestration import contract
from nemo_gym.orchestration.cli.main import main
from nemo_gym.orchestration.store import default_url, open_store
from nemo_gym.orchestration.store.schema import entries

CKPT = "/ckpt/feed"
UNREACHABLE = "postgresql+psycopg://ada:s3cret-pw@127.0.0.1:9/history"


def gym(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["eval", *args])
    out, err = capsys.readouterr()
    return code, out, err


def stored(url: str) -> list[tuple[str, str, float | None]]:
    store = open_store(url)
    try:
        return sorted((e.run_id, e.benchmark, e.value) for e in store.entries())
    finally:
        store.close()


def emptied(url: str) -> None:
    store = open_store(url)
    with store.engine.begin() as conn:
        conn.execute(delete(entries))
    store.close()


def a_run(tmp_path: Path, number: int = 1) -> Path:
    return run_directory(
        tmp_path / "runs", number, {"alpha": scoring(3), "beta": scoring(6)}, model=f"{CKPT}/step-{number}"
    )


@pytest.mark.parametrize("verb", [["results"], ["status"], ["status", "--watch", "--json"]])
def test_a_final_run_read_is_written_once_and_again_only_when_its_results_change(
    verb, store_url, tmp_path, capsys, monkeypatch
) -> None:
    run = a_run(tmp_path)
    monkeypatch.setenv("GYM_RESULTS_URL", store_url)
    code, out, err = gym(capsys, *verb, str(run))
    assert err == ""
    run_id = run.name
    assert stored(store_url) == [(run_id, "alpha", 0.25), (run_id, "beta", 0.5)]
    emptied(store_url)
    assert gym(capsys, *verb, str(run)) == (code, out, "")  # the same output, and nothing written again
    assert stored(store_url) == []
    (run / "alpha" / contract.ROLLOUTS_FILE).write_text(
        (run / "alpha" / contract.ROLLOUTS_FILE).read_text().replace('"reward": 0.0', '"reward": 1.0')
    )
    gym(capsys, "results", str(run))  # its results changed: written again
    assert stored(store_url) == [(run_id, "alpha", 1.0), (run_id, "beta", 0.5)]


def test_a_run_still_running_is_not_written(store_url, tmp_path, capsys, monkeypatch) -> None:
    run = a_run(tmp_path)
    going = run / "beta" / ".gym" / "local-000001-2"
    (going / "events").unlink()  # no job-end: its driver still runs, under a runner that is alive (this test)
    (going / contract.STATE_FILE).write_text("phase=running\ndetail=driver\n")
    (run / contract.RUNNER_PID_FILE).write_text(str(os.getpid()))
    monkeypatch.setenv("GYM_RESULTS_URL", store_url)
    for verb in ("results", "status"):
        _, _, err = gym(capsys, verb, str(run))
        assert err == ""
    assert stored(store_url) == []


@pytest.mark.parametrize("verb", ["results", "status"])
def test_a_store_that_cannot_be_reached_changes_nothing_but_one_warning_and_is_tried_again(
    verb, tmp_path, capsys, monkeypatch
) -> None:
    run = a_run(tmp_path)
    monkeypatch.setenv("GYM_RESULTS_URL", "off")
    expected = gym(capsys, verb, str(run))
    monkeypatch.setenv("GYM_RESULTS_URL", UNREACHABLE)
    for _ in range(2):  # nothing was remembered: the next read tries again
        code, out, err = gym(capsys, verb, str(run))
        assert (code, out) == expected[:2]
        [line] = err.splitlines()
        assert line.startswith(
            "warning: cannot reach the results store postgresql+psycopg://ada:***@127.0.0.1:9/history ("
        )
        assert "--results-url or GYM_RESULTS_URL" in line and "the next status or results read tries again" in line
        assert "s3cret-pw" not in line


def test_any_other_fault_of_the_store_is_one_warning_too(tmp_path, capsys, monkeypatch) -> None:
    """A store whose folder cannot be made (a file stands where it would be): not a refusal the
    store words itself, and still one line naming the store and the fix."""
    run = a_run(tmp_path)
    (tmp_path / "a-file").write_text("")
    url = f"sqlite:///{tmp_path / 'a-file' / 'results.sqlite'}"
    monkeypatch.setenv("GYM_RESULTS_URL", url)
    code, out, err = gym(capsys, "results", str(run))
    assert code == 0 and out.startswith(f"Run {run.name}: ")
    [line] = err.splitlines()
    assert line.startswith(f"warning: results not written to the results store {url} (")
    assert "name another with --results-url or GYM_RESULTS_URL" in line


def test_the_default_store_is_fed_and_off_turns_it_off(tmp_path, capsys, monkeypatch) -> None:
    run = a_run(tmp_path)
    monkeypatch.setenv("GYM_RESULTS_URL", "off")
    assert gym(capsys, "results", str(run))[2] == ""
    assert not Path(default_url().removeprefix("sqlite:///")).exists()
    code, out, err = gym(capsys, "history")
    assert (code, out) == (1, "")
    assert err == (
        "error: GYM_RESULTS_URL=off: the results store is turned off; give --results-url URL, or unset "
        "GYM_RESULTS_URL for the SQLite file beside the local index\n"
    )
    monkeypatch.delenv("GYM_RESULTS_URL")
    gym(capsys, "status", str(run))
    assert [benchmark for _, benchmark, _ in stored(default_url())] == ["alpha", "beta"]


# An observation in the local index as the version before the store wrote it (record.py before
# 48974d1: state, when, what the run's jobs cost; no ``stored`` marks).
OBSERVATION_BEFORE_THE_STORE = Path(__file__).resolve().parents[1] / "data" / "index-before-store" / "observation.json"


def test_an_index_written_by_the_version_before_the_store_is_read_and_its_runs_fed(
    store_url, tmp_path, capsys, monkeypatch
) -> None:
    """The index's run and its observation as the previous version left them: list shows the state
    observed, the run (never given to a store) is written on its first read, and its observation keeps
    the older facts beside the store's marks, so estimates still find what its jobs cost."""
    import json

    from nemo_gym.orchestration.record import index_dir, load_record, spent_history, write_local_index

    run = a_run(tmp_path)
    write_local_index(load_record((run / contract.RECORD_FILE).read_text()))
    observed = index_dir() / "observed" / f"{run.name}.json"
    observed.parent.mkdir(parents=True, exist_ok=True)
    observed.write_text(OBSERVATION_BEFORE_THE_STORE.read_text())
    code, out, err = gym(capsys, "list")
    assert (code, err) == (0, "") and run.name in out and "2 succeeded" in out
    monkeypatch.setenv("GYM_RESULTS_URL", store_url)
    assert gym(capsys, "results", run.name)[2] == ""
    assert stored(store_url) == [(run.name, "alpha", 0.25), (run.name, "beta", 0.5)]
    kept = json.loads(observed.read_text())
    assert kept["state"] == "2 succeeded" and kept["stored"]
    assert sorted(s.gpu_hours for s in spent_history()) == [0.25, 0.5]
