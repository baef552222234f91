"""``gym eval history import DIR...`` and ``gym eval history`` on real run directories (the
quickstart's NeMo Gym run copied as a checkpoint sweep, read by the real results scripts), on
SQLite and on the real PostgreSQL server: the entries carry what the runs say (model, step,
sweep, weights, per-task scores); importing twice doubles nothing; a directory that cannot be
read is refused on one line and the others imported; the leaderboard, its best checkpoints,
--json and --csv."""

from __future__ import annotations

import csv
import io
import json
import os
import random
from pathlib import Path

import pytest
from sqlalchemy import text
from store_runs import run_directory, scoring

from nemo_gym.orchestration import contract
from nemo_gym.orchestration.cli.main import main
from nemo_gym.orchestration.store import open_store

SWEEP = "gym-sweep-20261201T000000Z-5eeb01"
CKPT = "/ckpt/run-a"


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["eval", "history", *args])
    out, err = capsys.readouterr()
    return code, out, err


def sweep_of_three(where: Path) -> list[Path]:
    """step-100, step-200, step-300 of one training run, two benchmarks each: alpha peaks at 200,
    beta rises to 300; over the suite 300 is best (0.625 against 0.5 and 0.25)."""
    where.mkdir(parents=True, exist_ok=True)
    ones = {100: (3, 3), 200: (9, 3), 300: (6, 9)}
    return [
        run_directory(
            where, i + 1, {"alpha": scoring(a), "beta": scoring(b)}, model=f"{CKPT}/step-{step}", sweep_id=SWEEP
        )
        for i, (step, (a, b)) in enumerate(ones.items())
    ]


def test_imported_runs_make_the_leaderboard_in_step_order_with_the_best(store_url, tmp_path, capsys) -> None:
    dirs = sweep_of_three(tmp_path / "runs")
    code, out, err = cli(capsys, "import", *map(str, reversed(dirs)), "--results-url", store_url)
    assert (code, err) == (0, "")
    assert out.splitlines()[-1].startswith("6 entries written to ")
    code, out, _ = cli(capsys, "--results-url", store_url)
    assert code == 0
    lines = out.splitlines()
    assert lines[1].split() == ["MODEL", "STEP", "alpha", "beta", "SUITE"]
    assert [line.split() for line in lines[2:5]] == [
        [f"{CKPT}/step-100", "100", "0.2500", "0.2500", "0.2500"],
        [f"{CKPT}/step-200", "200", "0.7500*", "0.2500", "0.5000"],
        [f"{CKPT}/step-300", "300", "0.5000", "0.7500*", "0.6250"],
    ]
    assert lines[5:] == [
        f"best alpha: {CKPT}/step-200 (0.7500)",
        f"best beta: {CKPT}/step-300 (0.7500)",
        f"best over the suite: {CKPT}/step-300 (mean 0.6250)",
        "regressions: none flagged (each checkpoint against the one before it, paired over tasks; every pair of "
        "the history judged together (Holm, alpha 0.05))",
        "  the data could show drops of 0.6667 or more on each of the 4 pair(s) tested, 0.6667 on the most "
        f"sensitive (alpha at {CKPT}/step-200); 80% of the time, at the history's level (alpha over every "
        "pair tested), as gym eval compare's DETECTABLE",
    ]


def test_none_flagged_says_the_drop_it_could_have_seen_as_compare_does(store_url, tmp_path, capsys) -> None:
    """Seeded per-task rewards (quarters) at two checkpoints, two benchmarks, no real change: none
    flagged, and the drops it could have seen are those gym eval compare reports for the same pair
    (its DETECTABLE, Holm over the same two benchmarks), the largest and the smallest."""
    rng = random.Random(20261206)
    where = tmp_path / "runs"
    where.mkdir()
    dirs = [
        run_directory(
            where,
            i + 1,
            {b: [rng.choice((0.0, 0.25, 0.5, 0.75, 1.0)) for _ in range(12)] for b in ("alpha", "beta")},
            model=f"{CKPT}/step-{100 * (i + 1)}",
        )
        for i in range(2)
    ]
    cli(capsys, "import", *map(str, dirs), "--results-url", store_url)
    code, out, _ = cli(capsys, "--results-url", store_url)
    assert code == 0
    assert main(["eval", "compare", str(dirs[0]), str(dirs[1]), "--json"]) == 0
    compared = {b["benchmark"]: b["detectable_drop"] for b in json.loads(capsys.readouterr().out)["benchmarks"]}
    least = min(compared, key=lambda b: compared[b])
    assert compared["alpha"] != compared["beta"]
    assert out.splitlines()[-2].startswith("regressions: none flagged (")
    assert out.splitlines()[-1] == (
        f"  the data could show drops of {max(compared.values()):.4f} or more on each of the 2 pair(s) tested, "
        f"{compared[least]:.4f} on the most sensitive ({least} at {CKPT}/step-200); 80% of the time, at the "
        "history's level (alpha over every pair tested), as gym eval compare's DETECTABLE"
    )
    _, out, _ = cli(capsys, "--results-url", store_url, "--json")
    seen = json.loads(out)["detectable_drop"]
    assert (seen["every_pair"], seen["smallest"], seen["pairs"]) == (max(compared.values()), compared[least], 2)


def test_one_checkpoint_has_nothing_to_pair_and_says_so(store_url, tmp_path, capsys) -> None:
    only = run_directory(tmp_path / "runs", 1, {"alpha": scoring(3)}, model=f"{CKPT}/step-1")
    cli(capsys, "import", str(only), "--results-url", store_url)
    _, out, _ = cli(capsys, "--results-url", store_url)
    assert out.splitlines()[-1] == "  no pair to test: no checkpoint has one before it scored on the same tasks"


def test_json_and_csv_carry_the_same_matrix(store_url, tmp_path, capsys) -> None:
    cli(capsys, "import", *map(str, sweep_of_three(tmp_path / "runs")), "--results-url", store_url)
    code, out, _ = cli(capsys, "--results-url", store_url, "--json")
    doc = json.loads(out)
    assert code == 0 and doc["benchmarks"] == ["alpha", "beta"]
    assert [(c["step"], c["values"], c["suite_mean"]) for c in doc["checkpoints"]] == [
        (100, {"alpha": 0.25, "beta": 0.25}, 0.25),
        (200, {"alpha": 0.75, "beta": 0.25}, 0.5),
        (300, {"alpha": 0.5, "beta": 0.75}, 0.625),
    ]
    assert doc["best"] == {"alpha": f"{CKPT}/step-200", "beta": f"{CKPT}/step-300"}
    assert doc["best_over_suite"] == f"{CKPT}/step-300"
    assert (doc["regressions"], doc["alpha"], doc["correction"]) == ([], 0.05, "holm")
    code, out, _ = cli(capsys, "--results-url", store_url, "--csv", "--benchmark", "beta")
    rows = list(csv.reader(io.StringIO(out)))
    assert rows == [
        ["model", "step", "beta", "suite_mean", "incomplete"],
        [f"{CKPT}/step-100", "100", "0.25", "0.25", ""],
        [f"{CKPT}/step-200", "200", "0.25", "0.25", ""],
        [f"{CKPT}/step-300", "300", "0.75", "0.75", ""],
    ]


def test_an_entry_keeps_what_the_run_says_and_its_per_task_scores(store_url, tmp_path, capsys) -> None:
    run_dir = run_directory(
        tmp_path / "runs",
        7,
        {"answer-judge": scoring(5)},
        model="/ckpt/hf-export",  # no number in its name: the step is job.training_step's
        training_step=4200,
        provenance="weights=/ckpt/hf-export\nweights.fingerprint=sha256:0badc0de\n",
    )
    assert cli(capsys, "import", str(run_dir), "--results-url", store_url)[0] == 0
    store = open_store(store_url)
    [entry] = store.entries()
    store.close()
    assert (entry.model, entry.step, entry.weights_fingerprint) == ("/ckpt/hf-export", 4200, "sha256:0badc0de")
    assert (entry.state, entry.complete, entry.samples, entry.expected_samples, entry.attempt) == (
        "succeeded",
        True,
        12,
        12,
        1,
    )
    assert entry.task_scores == {task: 1.0 if task < 5 else 0.0 for task in range(12)}
    assert entry.value == pytest.approx(5 / 12)
    assert entry.submitted_by == "root" and entry.metrics["mean/reward"] == 0.0  # gym's own aggregate, as written
    from nemo_gym.orchestration import library
    from nemo_gym.orchestration.record import run_in_directory

    [result] = library.results([run_in_directory(str(run_dir))])[0].benchmarks  # what gym eval results says
    assert entry.wall_seconds is not None and entry.wall_seconds == result.usage.wall_seconds
    assert entry.gpu_hours == result.usage.gpu_hours
    assert (entry.inputs_digest, entry.results_fingerprint) == (result.inputs_digest, result.results_fingerprint)
    assert entry.inputs_digest and entry.results_fingerprint


def test_a_resubmitted_run_is_stored_at_the_attempt_that_ended_it(store_url, tmp_path, capsys) -> None:
    """Its first job failed half-way; the one gym eval resubmit queued ended it: one entry, attempt
    2, succeeded and whole, as gym eval status tells it."""
    run_dir = run_directory(
        tmp_path / "runs", 9, {"answer-judge": scoring(7)}, model=f"{CKPT}/step-10", resubmitted=True
    )
    from nemo_gym.orchestration import library
    from nemo_gym.orchestration.record import run_in_directory

    [status] = library.status([run_in_directory(str(run_dir))])[0].jobs
    assert (status.state, status.resubmits) == ("succeeded", 1), status
    assert cli(capsys, "import", str(run_dir), "--results-url", store_url)[0] == 0
    store = open_store(store_url)
    [entry] = store.entries()
    store.close()
    assert (entry.attempt, entry.state, entry.complete, entry.value) == (2, "succeeded", True, pytest.approx(7 / 12))


def test_importing_again_doubles_nothing_and_a_changed_run_replaces_its_entry(store_url, tmp_path, capsys) -> None:
    [run_dir] = [run_directory(tmp_path / "runs", 1, {"answer-judge": scoring(2)}, model=f"{CKPT}/step-10")]
    cli(capsys, "import", str(run_dir), "--results-url", store_url)
    run_directory(tmp_path / "again", 1, {"answer-judge": scoring(8)}, model=f"{CKPT}/step-10")
    code, out, _ = cli(
        capsys, "import", str(tmp_path / "again" / run_dir.name), str(run_dir), "--results-url", store_url
    )
    assert code == 0
    store = open_store(store_url)
    [entry] = store.entries()
    store.close()
    assert entry.value == pytest.approx(2 / 12)  # the last write of the key wins


def test_a_directory_that_cannot_be_read_is_refused_on_one_line_and_the_rest_imported(
    store_url, tmp_path, capsys
) -> None:
    good = run_directory(tmp_path / "runs", 1, {"answer-judge": scoring(1)}, model=f"{CKPT}/step-1")
    broken = run_directory(tmp_path / "runs", 2, {"answer-judge": scoring(1)})
    (broken / contract.RECORD_FILE).write_text('{"schema_version": 1, "gym_job_id": "\\u001b]0;x\\u0007"' + " " * 100)
    huge = run_directory(tmp_path / "runs", 3, {"answer-judge": scoring(1)})
    (huge / contract.RECORD_FILE).write_bytes(b"{" + b" " * (17 * 1024 * 1024))
    code, out, err = cli(
        capsys, "import", str(broken), str(good), str(tmp_path / "nothing"), str(huge), "--results-url", store_url
    )
    assert code == 1
    assert "Traceback" not in err
    refused = err.splitlines()
    assert len(refused) == 3
    assert refused[0].startswith(
        f"refused {broken}: cannot read the run's record: {broken / contract.RECORD_FILE}: not JSON"
    )
    assert (
        refused[1]
        == f"refused {tmp_path / 'nothing'}: no such directory; give a run's directory (<output_path>/<run id>)"
    )
    assert (
        refused[2]
        == f"refused {huge}: cannot read the run's record: {huge / contract.RECORD_FILE}: larger than 16777216 bytes"
    )
    assert out.splitlines() == [
        f"imported {good}: run {good.name}, 1 benchmark(s): answer-judge",
        f"1 entry written to {out.split(' to ')[-1].strip()}",
    ]


def test_a_store_that_cannot_be_reached_is_one_error_line_with_the_fix(tmp_path, capsys) -> None:
    url = "postgresql+psycopg://ada:s3cret-pw@127.0.0.1:9/history"
    for args in (["--results-url", url], ["import", str(tmp_path), "--results-url", url]):
        code, out, err = cli(capsys, *args)
        assert (code, out) == (1, "")
        [line] = err.splitlines()
        assert line.startswith(
            "error: cannot reach the results store postgresql+psycopg://ada:***@127.0.0.1:9/history ("
        )
        assert "s3cret-pw" not in line


def test_the_selection_options_pick_the_sweep_and_the_model_family(store_url, tmp_path, capsys) -> None:
    sweep_of_three(tmp_path / "runs")
    dirs = sorted((tmp_path / "runs").iterdir())
    other = run_directory(tmp_path / "runs", 9, {"alpha": scoring(12)}, model="/ckpt/run-b/step-100")
    cli(capsys, "import", *map(str, dirs), str(other), "--results-url", store_url)
    _, out, _ = cli(capsys, "--results-url", store_url, "--json", "--sweep", SWEEP)
    assert [c["model"] for c in json.loads(out)["checkpoints"]] == [f"{CKPT}/step-{s}" for s in (100, 200, 300)]
    _, out, _ = cli(capsys, "--results-url", store_url, "--json", "--model-prefix", "/ckpt/run-b/")
    doc = json.loads(out)
    assert [c["model"] for c in doc["checkpoints"]] == ["/ckpt/run-b/step-100"] and doc["benchmarks"] == ["alpha"]
    _, out, _ = cli(capsys, "--results-url", store_url, "--model-prefix", "/nowhere")
    assert out.startswith("The store holds no entry of this selection")


def test_a_benchmark_no_database_keeps_as_it_is_is_refused_and_its_run_s_others_imported(
    store_url, tmp_path, capsys
) -> None:
    long_model = run_directory(tmp_path / "runs", 1, {"answer-judge": scoring(1)}, model="/ckpt/" + "x" * 5000)
    nul_model = run_directory(tmp_path / "runs", 2, {"answer-judge": scoring(1)}, model="/ckpt/a\x00b/step-2")
    good = run_directory(tmp_path / "runs", 3, {"answer-judge": scoring(1)}, model="/ckpt/step-3")
    code, out, err = cli(capsys, "import", str(long_model), str(nul_model), str(good), "--results-url", store_url)
    assert code == 1
    assert err.splitlines() == [
        f"refused {long_model}: benchmark answer-judge: its model is 5006 characters long, over the store's 4096",
        f"refused {nul_model}: benchmark answer-judge: its model holds a NUL or bytes that were not UTF-8",
    ]
    store = open_store(store_url)
    assert [e.model for e in store.entries()] == ["/ckpt/step-3"]
    store.close()


def test_the_planted_regression_is_flagged_and_nothing_else(store_url, tmp_path, capsys) -> None:
    """alpha: 6, 12, 0, 12 tasks right at steps 100-400; beta: 6 everywhere. Step 300's alpha drops
    all 12 tasks against step 200 (the one before it): flagged. Step 400 against step 300 rose,
    step 200 improved, beta never moves: nothing else."""
    where = tmp_path / "runs"
    where.mkdir()
    dirs = [
        run_directory(where, i + 1, {"alpha": scoring(a), "beta": scoring(6)}, model=f"{CKPT}/step-{100 * (i + 1)}")
        for i, a in enumerate((6, 12, 0, 12))
    ]
    cli(capsys, "import", *map(str, dirs), "--results-url", store_url)
    code, out, _ = cli(capsys, "--results-url", store_url)
    assert code == 0
    assert out.splitlines()[-2:] == [
        "regressions (each checkpoint against the one before it, paired over tasks; every pair of the "
        "history judged together (Holm, alpha 0.05)):",
        f"  alpha at {CKPT}/step-300: -1.0000 against {CKPT}/step-200 (p 0.000488, adjusted 0.00293 over 6 pair(s))",
    ]
    _, out, _ = cli(capsys, "--results-url", store_url, "--json")
    [flagged] = json.loads(out)["regressions"]
    assert (flagged["benchmark"], flagged["step"], flagged["against_step"], flagged["family"]) == ("alpha", 300, 200, 6)


def test_a_drop_the_suite_s_error_control_cannot_tell_from_chance_is_not_flagged(store_url, tmp_path, capsys) -> None:
    """alpha drops 6 of 12 tasks (McNemar p 0.031 alone): under 0.05 on its own, but not once
    adjusted over the checkpoint's two benchmarks (0.0625)."""
    where = tmp_path / "runs"
    where.mkdir()
    dirs = [
        run_directory(where, i + 1, {"alpha": scoring(a), "beta": scoring(6)}, model=f"{CKPT}/step-{100 * (i + 1)}")
        for i, a in enumerate((12, 6))
    ]
    cli(capsys, "import", *map(str, dirs), "--results-url", store_url)
    _, out, _ = cli(capsys, "--results-url", store_url, "--json")
    assert json.loads(out)["regressions"] == []
    _, out, _ = cli(capsys, "--results-url", store_url, "--json", "--benchmark", "alpha")
    [flagged] = json.loads(out)["regressions"]
    assert (flagged["step"], flagged["p_value"], flagged["family"]) == (200, 0.03125, 1)


def test_a_directory_named_by_100000_characters_is_named_by_its_two_ends(tmp_path, capsys) -> None:
    name = "x" * 100_000
    code, out, err = cli(capsys, "import", name, "--results-url", f"sqlite:///{tmp_path / 'r.sqlite'}")
    [line] = err.splitlines()
    assert code == 1 and len(line) < 400 and "...(100001 characters)..." in line  # the name and its colon


def test_write_results_writes_a_run_s_finished_benchmarks_and_waits_for_the_others(store_url, tmp_path) -> None:
    """What status or results would call once they see a run final: its results as they read them."""
    from nemo_gym import orchestration
    from nemo_gym.orchestration.record import run_in_directory
    from nemo_gym.orchestration.store import write_results

    run_dir = run_directory(tmp_path / "runs", 4, {"done": scoring(3), "going": scoring(1)}, model=f"{CKPT}/step-40")
    going = run_dir / "going" / ".gym" / "local-000004-2"
    (going / "events").unlink()  # no job-end: its driver still runs, under a runner that is alive (this test)
    (going / contract.STATE_FILE).write_text("phase=running\ndetail=driver\n")
    (run_dir / contract.RUNNER_PID_FILE).write_text(str(os.getpid()))
    runs = orchestration.library.results([run_in_directory(str(run_dir))])
    assert runs[0].states["going"] == "running"
    assert write_results(runs, store_url) == 1
    assert write_results(runs, store_url) == 1  # again: replaced, not doubled
    store = open_store(store_url)
    [entry] = store.entries()
    store.close()
    assert (entry.benchmark, entry.step, entry.value) == ("done", 40, 0.25)


def test_the_store_url_may_be_given_before_or_after_import(store_url, tmp_path, capsys) -> None:
    first = run_directory(tmp_path / "runs", 1, {"answer-judge": scoring(1)}, model=f"{CKPT}/step-1")
    second = run_directory(tmp_path / "runs", 2, {"answer-judge": scoring(1)}, model=f"{CKPT}/step-2")
    assert main(["eval", "history", "--results-url", store_url, "import", str(first)]) == 0
    assert main(["eval", "history", "import", str(second), "--results-url", store_url]) == 0
    store = open_store(store_url)
    assert [e.step for e in store.entries()] == [1, 2]
    store.close()


def test_two_imports_at_once_write_every_entry_once(store_url, tmp_path) -> None:
    """Two shells import overlapping run directories into one store at the same time."""
    import subprocess
    import sys

    where = tmp_path / "runs"
    where.mkdir()
    dirs = [
        str(run_directory(where, i, {"alpha": scoring(i % 12), "beta": scoring(3)}, model=f"{CKPT}/step-{i}"))
        for i in range(1, 11)
    ]
    command = [sys.executable, "-m", "nemo_gym.orchestration.cli.main", "eval", "history", "import"]
    shells = [
        subprocess.Popen([*command, *part, "--results-url", store_url], stderr=subprocess.PIPE, text=True)
        for part in (dirs[:7], dirs[3:])
    ]
    for shell in shells:
        _, err = shell.communicate(timeout=300)
        assert shell.returncode == 0, err
    store = open_store(store_url)
    found = store.entries()
    with store.engine.connect() as conn:
        rows = conn.execute(text("SELECT count(*) FROM entries")).scalar()
    store.close()
    assert rows == len(found) == 20
    assert sorted((e.step, e.benchmark) for e in found) == [(i, b) for i in range(1, 11) for b in ("alpha", "beta")]


@pytest.mark.parametrize("option", ["--model-prefix", "--sweep", "--benchmark"])
def test_a_filter_no_database_can_compare_is_refused_naming_the_option(option, store_url, capsys) -> None:
    code, out, err = cli(capsys, "--results-url", store_url, option, "/ckpt/a\x00b")
    assert (code, out) == (1, "")
    assert err == f"error: {option}: no store holds a NUL or bytes that were not UTF-8; give the name as written\n"


def test_a_long_model_path_is_shown_by_its_two_ends_and_json_keeps_it_whole(store_url, tmp_path, capsys) -> None:
    model = "/ckpt/" + "x" * 300 + "/step-1"
    run = run_directory(tmp_path / "runs", 1, {"alpha": scoring(3)}, model=model)
    cli(capsys, "import", str(run), "--results-url", store_url)
    _, out, _ = cli(capsys, "--results-url", store_url)
    assert f"best alpha: {model[:40]}...({len(model)} characters)...{model[-20:]} (0.2500)" in out.splitlines()
    assert model not in out
    _, out, _ = cli(capsys, "--results-url", store_url, "--json")
    assert json.loads(out)["best"] == {"alpha": model}


def test_a_benchmark_that_did_not_write_every_sample_is_stored_flagged_shown_marked_and_never_a_regression(
    store_url, tmp_path, capsys
) -> None:
    """Step 200's alpha wrote 9 of its 12 samples, every one 0 against step 100's 1s: complete, a
    drop like that is flagged (p 0.0039 on the 9 tasks both have); partial, it is stored as such,
    shown with its 9/12, never the best, and not flagged."""
    where = tmp_path / "runs"
    where.mkdir()
    first = run_directory(where, 1, {"alpha": scoring(12), "beta": scoring(6)}, model=f"{CKPT}/step-100")
    second = run_directory(where, 2, {"alpha": scoring(0), "beta": scoring(6)}, model=f"{CKPT}/step-200")
    rollouts = second / "alpha" / contract.ROLLOUTS_FILE
    rows = [row for row in rollouts.read_text().splitlines() if json.loads(row)["_ng_task_index"] < 9]
    rollouts.write_text("".join(row + "\n" for row in rows))
    code, _, err = cli(capsys, "import", str(first), str(second), "--results-url", store_url)
    assert (code, err) == (0, "")
    store = open_store(store_url)
    flags = {(e.step, e.benchmark): (e.complete, e.samples, e.expected_samples) for e in store.entries()}
    store.close()
    assert flags[(200, "alpha")] == (False, 9, 12) and flags[(100, "alpha")] == (True, 12, 12)
    _, out, _ = cli(capsys, "--results-url", store_url)
    lines = out.splitlines()
    assert lines[1].startswith("(k/n): samples written of those expected, where a benchmark did not write them all")
    assert lines[4].split() == [f"{CKPT}/step-200", "200", "0.0000", "(9/12)", "0.5000", "0.2500"]
    assert f"best alpha: {CKPT}/step-100 (1.0000)" in lines
    assert lines[-2].startswith("regressions: none flagged (")
    _, out, _ = cli(capsys, "--results-url", store_url, "--json")
    doc = json.loads(out)
    assert doc["regressions"] == [] and doc["checkpoints"][1]["complete"] == {"alpha": False, "beta": True}
    _, out, _ = cli(capsys, "--results-url", store_url, "--csv")
    rows = list(csv.reader(io.StringIO(out)))
    assert [row[-1] for row in rows] == ["incomplete", "", "alpha"]


def test_runs_tagged_in_their_config_are_selected_by_tag_and_a_tag_is_matched_whole(
    store_url, tmp_path, capsys
) -> None:
    """job.tags go with each entry; --tag keeps the runs with every tag given, each matched whole:
    a_b is not a pattern that also finds axb, nor does exp find exp-a."""
    where = tmp_path / "runs"
    where.mkdir()
    tagged = {1: ["exp-a", "a_b"], 2: ["exp-a"], 3: ["axb", "exp"], 4: None}
    dirs = [
        str(run_directory(where, n, {"alpha": scoring(n)}, model=f"{CKPT}/step-{n}", tags=tags))
        for n, tags in tagged.items()
    ]
    assert cli(capsys, "import", *dirs, "--results-url", store_url)[0] == 0
    store = open_store(store_url)
    assert {e.step: e.tags for e in store.entries()} == {1: ("exp-a", "a_b"), 2: ("exp-a",), 3: ("axb", "exp"), 4: ()}
    store.close()

    def steps(*tags: str) -> list[int]:
        args = [arg for tag in tags for arg in ("--tag", tag)]
        code, out, err = cli(capsys, "--results-url", store_url, "--json", *args)
        assert (code, err) == (0, "")
        return [c["step"] for c in json.loads(out)["checkpoints"]]

    assert steps("exp-a") == [1, 2]
    assert steps("a_b") == [1]
    assert steps("exp") == [3]
    assert steps("exp-a", "a_b") == [1]
    assert steps("nowhere") == []
    code, out, err = cli(capsys, "--results-url", store_url, "--tag", "a b")
    assert (code, out) == (1, "") and err.startswith("error: --tag 'a b': no run is tagged so")


def test_models_without_a_step_read_in_the_order_first_submitted_named_time(store_url, tmp_path, capsys) -> None:
    """Nightly models with no number in their paths and no job.training_step, submitted c, a, b
    (imported in another order): the rows, --json and --csv in submission order, the axis named time."""
    where = tmp_path / "runs"
    where.mkdir()
    dirs = [
        run_directory(where, i, {"alpha": scoring(3 * i)}, model=f"/models/nightly-{m}") for i, m in enumerate("cab", 1)
    ]
    cli(capsys, "import", *map(str, reversed(dirs)), "--results-url", store_url)
    code, out, _ = cli(capsys, "--results-url", store_url)
    lines = out.splitlines()
    assert code == 0 and lines[1] == (
        "axis: time (no checkpoint has a step number: each in the order it was first submitted, UTC)"
    )
    assert [line.split()[:2] for line in lines[2:6]] == [
        ["MODEL", "TIME"],
        ["/models/nightly-c", "2026-12-01T00:00:01Z"],
        ["/models/nightly-a", "2026-12-01T00:00:02Z"],
        ["/models/nightly-b", "2026-12-01T00:00:03Z"],
    ]
    doc = json.loads(cli(capsys, "--results-url", store_url, "--json")[1])
    assert doc["axis"] == "time" and [c["time"] for c in doc["checkpoints"]] == [
        "2026-12-01T00:00:01Z",
        "2026-12-01T00:00:02Z",
        "2026-12-01T00:00:03Z",
    ]
    rows = list(csv.reader(io.StringIO(cli(capsys, "--results-url", store_url, "--csv")[1])))
    assert rows[0][:2] == ["model", "time"] and [row[0] for row in rows[1:]] == [
        "/models/nightly-c",
        "/models/nightly-a",
        "/models/nightly-b",
    ]
