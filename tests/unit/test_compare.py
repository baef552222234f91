"""`gym eval compare`: on the real quickstart run with known flipped tasks (exact delta, flips, a
significant verdict, a gate that fails the reverse comparison), and on generated runs against an
independent computation with scipy.stats (ties, all-equal runs, single-task benchmarks)."""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import random
import shutil
from pathlib import Path

import documentation
import numpy as np
import pytest
from scipy import stats as scipy_stats

from nemo_gym.orchestration import contract, library
from nemo_gym.orchestration.cli.main import main
from nemo_gym.orchestration.comparison import Blocker, compare_runs
from nemo_gym.orchestration.record import run_in_directory
from nemo_gym.orchestration.results import BenchmarkResult, RunResults
from nemo_gym.orchestration.stats import IMPROVED, NO_SIGNIFICANT_CHANGE, REGRESSED
from nemo_gym.orchestration.verbs.compare.command import EXIT_UNCOMPARABLE, gate

REAL_RUN = Path(__file__).resolve().parents[1] / "data" / "quickstart-run"
BENCH = "answer-judge"
FLIPPED = (1, 2, 4, 5, 8, 9, 11)  # answer-judge tasks whose reward goes 0 -> 1 in the candidate


def cli(capsys, *args: str) -> tuple[int, str, str]:
    code = main(["eval", *args])
    out, err = capsys.readouterr()
    return code, out, err


def real_rows(run_dir: Path, benchmark: str = BENCH) -> list[dict]:
    path = run_dir / benchmark / contract.ROLLOUTS_FILE
    return [json.loads(line) for line in path.read_text().splitlines()]


def write_rows(run_dir: Path, rows: list[dict], benchmark: str = BENCH) -> None:
    (run_dir / benchmark / contract.ROLLOUTS_FILE).write_text("".join(json.dumps(r) + "\n" for r in rows))


def real_pair(tmp_path: Path) -> tuple[Path, Path]:
    """The real run as base, and a copy whose FLIPPED tasks now score 1 as candidate."""
    base = tmp_path / "base"
    candidate = tmp_path / "candidate"
    shutil.copytree(REAL_RUN, base)
    shutil.copytree(REAL_RUN, candidate)
    write_rows(
        candidate,
        [{**r, "reward": 1.0 if r["_ng_task_index"] in FLIPPED else r["reward"]} for r in real_rows(candidate)],
    )
    return base, candidate


def test_known_flips_give_the_exact_delta_the_flips_and_a_significant_verdict(tmp_path, capsys) -> None:
    base, candidate = real_pair(tmp_path)
    code, out, _ = cli(capsys, "compare", str(base), str(candidate), "--json", "--fail-on-regression")
    assert code == 0
    doc = json.loads(out)
    assert doc["base_dir"] == str(base) and doc["candidate_dir"] == str(candidate)
    [b] = doc["benchmarks"]
    assert (b["benchmark"], b["metric"], b["base"], b["candidate"]) == (BENCH, "reward", 0.0, 7 / 12)
    assert b["delta"] == 7 / 12
    assert b["improved"] == list(FLIPPED) and b["regressed"] == [] and b["paired_tasks"] == 12
    assert b["p_value"] == 2 / 2**7  # McNemar exact: 7 discordant pairs, all one way
    assert b["test"] == "mcnemar-exact" and b["verdict"] == IMPROVED
    lo, hi = b["ci95"]
    assert 0 < lo < 7 / 12 < hi <= 1
    assert doc["only_in_base"] == [] and doc["only_in_candidate"] == [] and b["flags"] == []


def test_the_gate_fails_the_reverse_comparison(tmp_path, capsys) -> None:
    base, candidate = real_pair(tmp_path)
    code, out, _ = cli(capsys, "compare", str(candidate), str(base), "--fail-on-regression")
    assert code == 1
    assert "regression gate: failed (answer-judge regressed)" in out
    assert "answer-judge: regressed tasks 1, 2, 4, 5, 8, 9, 11" in out
    row = next(line for line in out.splitlines() if line.startswith(BENCH + " "))
    assert row.split()[:5] == [BENCH, "12", "0.5833", "0.0000", "-0.5833"] and row.endswith("regressed")
    code, _, _ = cli(capsys, "compare", str(candidate), str(base))
    assert code == 0  # without the gate a regression is reported, not an error


def test_an_incomplete_candidate_is_compared_on_common_tasks_and_flagged(tmp_path, capsys) -> None:
    base, candidate = real_pair(tmp_path)
    write_rows(candidate, [r for r in real_rows(candidate) if r["_ng_task_index"] not in (0, 1)])
    result = library.compare(run_in_directory(str(base)), run_in_directory(str(candidate)))
    [b] = result.benchmarks
    assert b.paired.n == 10 and b.paired.only_in_base == 2
    assert b.paired.improved_tasks == (2, 4, 5, 8, 9, 11) and b.paired.delta == pytest.approx(6 / 10)
    assert b.flags == (
        "candidate incomplete (10/12 samples)",
        "compared on the 10 task(s) both have (2 only in base, 0 only in candidate)",
    )
    code, out, _ = cli(capsys, "compare", str(base), str(candidate))
    assert "answer-judge: candidate incomplete (10/12 samples)" in out


def test_benchmarks_of_one_run_only_are_listed_not_dropped(tmp_path, capsys) -> None:
    base, candidate = real_pair(tmp_path)
    record = json.loads((candidate / contract.RECORD_FILE).read_text())
    record["benchmarks"][0]["benchmark"] = "answer-judge-v2"
    (candidate / contract.RECORD_FILE).write_text(json.dumps(record))
    (candidate / BENCH).rename(candidate / "answer-judge-v2")
    code, out, _ = cli(capsys, "compare", str(base), str(candidate), "--json")
    doc = json.loads(out)
    assert (
        doc["benchmarks"] == [] and doc["only_in_base"] == [BENCH] and doc["only_in_candidate"] == ["answer-judge-v2"]
    )
    code, out, _ = cli(capsys, "compare", str(base), str(candidate))
    assert "Only in base (not compared): answer-judge" in out
    assert "Only in candidate (not compared): answer-judge-v2" in out


def test_compare_needs_two_runs_and_a_metric_the_rows_carry(tmp_path, capsys) -> None:
    base, candidate = real_pair(tmp_path)
    code, _, err = cli(capsys, "compare", str(base))
    assert (
        code == 1
        and err == "error: compare needs two runs: gym eval compare BASE CANDIDATE, or gym eval compare BASE --last\n"
    )
    code, _, err = cli(capsys, "compare", str(base), str(candidate), "--metric", "acc")
    assert code == 1 and err.startswith("error: no rollout carries a numeric 'acc'; the rows have: ")


# -- against an independent computation (scipy.stats) on generated runs -----------------------------


def generated_run(root: Path, name: str, scores: dict[str, dict[int, list[float]]]) -> Path:
    """A run directory as gym leaves it: per benchmark, rollouts (shuffled, as gym writes them in
    completion order) and the materialized inputs; the job succeeded."""
    run_dir = root / name
    record = {
        "gym_job_id": f"gym-job-20260101T000000Z-{hashlib.sha256(name.encode()).hexdigest()[:6]}",
        "submitted_at": "2026-01-01T00:00:00Z",
        "run_dir": "/elsewhere",
        "cluster": "c",
        "executor": "local",
        "submitted_by": "me",
        "schema_version": 1,
        "benchmarks": [
            {"benchmark": b, "job_dir": f"/elsewhere/{b}", "job_id": f"local-{name}-{i}"} for i, b in enumerate(scores)
        ],
    }
    run_dir.mkdir(parents=True)
    (run_dir / contract.RECORD_FILE).write_text(json.dumps(record))
    rng = random.Random(name)
    for i, (bench, tasks) in enumerate(scores.items()):
        job = run_dir / bench
        (job / "artifacts").mkdir(parents=True)
        (job / ".gym" / f"local-{name}-{i}").mkdir(parents=True)
        (job / ".gym" / f"local-{name}-{i}" / "state").write_text("phase=succeeded\ndetail=driver finished\n")
        (job / "artifacts" / "m_aggregate_metrics.json").write_text("{}")
        pairs = [(t, r, v) for t, values in tasks.items() for r, v in enumerate(values)]
        (job / contract.MATERIALIZED_INPUTS_FILE).write_text(
            "".join(
                json.dumps({"_ng_task_index": t, "_ng_rollout_index": r, "prompt": "x"}) + "\n" for t, r, _ in pairs
            )
        )
        rng.shuffle(pairs)
        (job / contract.ROLLOUTS_FILE).write_text(
            "".join(json.dumps({"reward": v, "_ng_task_index": t, "_ng_rollout_index": r}) + "\n" for t, r, v in pairs)
        )
    return run_dir


def independent(base: dict[int, list[float]], candidate: dict[int, list[float]]) -> dict:
    """The same comparison computed another way: numpy means, scipy's binomial test and bootstrap."""
    tasks = sorted(set(base) & set(candidate))
    b = np.array([np.mean(base[t]) for t in tasks])
    c = np.array([np.mean(candidate[t]) for t in tasks])
    d = c - b
    up, down = int((d > 0).sum()), int((d < 0).sum())
    binary = all(v in (0.0, 1.0) for v in [*b, *c])
    constant = bool(np.all(d == d[0]))
    if binary:
        p = scipy_stats.binomtest(min(up, down), up + down, 0.5).pvalue if up + down else 1.0
    elif len(d) < 30:  # every sign pattern, by itertools
        observed = abs(d.sum())
        flips = [abs(sum(s * x for s, x in zip(signs, d))) for signs in itertools.product((1, -1), repeat=len(d))]
        p = sum(f >= observed - 1e-12 for f in flips) / len(flips)
    else:
        p = 1.0 if constant and d[0] == 0 else float(scipy_stats.ttest_rel(c, b).pvalue)
    if constant:
        ci = (float(d[0]), float(d[0]))
    else:
        interval = scipy_stats.ttest_rel(c, b).confidence_interval(0.95)
        ci = (float(interval.low), float(interval.high))
    return {
        "base": float(b.mean()),
        "candidate": float(c.mean()),
        "delta": float(d.mean()),
        "p": p,
        "ci": ci,
        "se": float(d.std(ddof=1) / math.sqrt(len(d))) if len(d) > 1 else 0.0,
        "improved": [t for t, x in zip(tasks, d) if x > 0],
        "regressed": [t for t, x in zip(tasks, d) if x < 0],
    }


def scenario_scores(seed: int) -> tuple[dict, dict]:
    rng = random.Random(seed)
    binary_base = {t: [float(rng.random() < 0.5) for _ in range(1)] for t in range(200)}
    binary_candidate = {t: [float(rng.random() < (0.65 if t % 3 else 0.5)) for _ in range(1)] for t in range(200)}
    # Repeats averaged per task, with many exact ties (quarter steps).
    repeats_base = {t: [float(rng.random() < 0.4) for _ in range(4)] for t in range(150)}
    repeats_candidate = {t: [float(rng.random() < 0.35) for _ in range(4)] for t in range(150)}
    # Continuous scores with a small shift; one task only in base, one only in candidate.
    cont_base = {t: [rng.gauss(0.5, 0.2) for _ in range(2)] for t in range(120)}
    cont_candidate = {t: [v + rng.gauss(0.02, 0.05) for v in cont_base.get(t, [0.5, 0.5])] for t in range(1, 121)}
    same = {t: [0.5, 1.0] for t in range(30)}
    base = {
        "binary": binary_base,
        "repeats": repeats_base,
        "continuous": cont_base,
        "all-equal": same,
        "single-task": {7: [0.0, 1.0, 1.0]},
        "single-task-tie": {3: [1.0]},
    }
    candidate = {
        "binary": binary_candidate,
        "repeats": repeats_candidate,
        "continuous": cont_candidate,
        "all-equal": same,
        "single-task": {7: [1.0, 1.0, 1.0]},
        "single-task-tie": {3: [1.0]},
    }
    return base, candidate


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_statistics_agree_with_scipy_on_generated_runs(tmp_path, seed: int) -> None:
    base_scores, candidate_scores = scenario_scores(seed)
    base = generated_run(tmp_path, f"base{seed}", base_scores)
    candidate = generated_run(tmp_path, f"cand{seed}", candidate_scores)
    result = library.compare(run_in_directory(str(base)), run_in_directory(str(candidate)))
    assert [b.benchmark for b in result.benchmarks] == list(base_scores)
    verdicts: list[str] = []
    for b in result.benchmarks:
        ref = independent(base_scores[b.benchmark], candidate_scores[b.benchmark])
        p = b.paired
        assert p.base_mean == pytest.approx(ref["base"], abs=1e-12)
        assert p.candidate_mean == pytest.approx(ref["candidate"], abs=1e-12)
        assert p.delta == pytest.approx(ref["delta"], abs=1e-12)
        assert list(p.improved_tasks) == ref["improved"] and list(p.regressed_tasks) == ref["regressed"]
        assert p.p_value == pytest.approx(ref["p"], rel=1e-9), b.benchmark
        tolerance = 1e-9
        assert p.ci[0] == pytest.approx(ref["ci"][0], abs=tolerance), b.benchmark
        assert p.ci[1] == pytest.approx(ref["ci"][1], abs=tolerance), b.benchmark
        clearly_up = ref["p"] < 0.01 and ref["ci"][0] > tolerance and len(ref["improved"]) > len(ref["regressed"])
        clearly_down = ref["p"] < 0.01 and ref["ci"][1] < -tolerance and len(ref["regressed"]) > len(ref["improved"])
        if clearly_up or clearly_down:
            assert p.verdict == (IMPROVED if clearly_up else REGRESSED), b.benchmark
            verdicts.append(p.verdict)
        elif ref["p"] >= 0.05 or ref["ci"][0] <= 0 <= ref["ci"][1]:
            assert p.verdict == NO_SIGNIFICANT_CHANGE, b.benchmark
        # The comparison's verdict is read off the p adjusted over the six benchmarks (Holm's).
        assert b.correction.value == "holm" and b.family == 6 and b.p_for_verdict >= p.p_value
    by_name = {b.benchmark: b.paired for b in result.benchmarks}
    assert by_name["all-equal"].ci == (0.0, 0.0) and by_name["all-equal"].p_value == 1.0
    assert by_name["all-equal"].verdict == NO_SIGNIFICANT_CHANGE
    single = by_name["single-task"]
    assert single.n == 1 and single.delta == pytest.approx(1 / 3) and single.ci == (single.delta, single.delta)
    assert by_name["single-task"].p_value == 1.0 and by_name["single-task"].verdict == NO_SIGNIFICANT_CHANGE
    assert by_name["single-task-tie"].delta == 0.0 and by_name["single-task-tie"].unchanged == 1
    assert by_name["continuous"].only_in_base == 1 and by_name["continuous"].only_in_candidate == 1
    assert by_name["binary"].test == "mcnemar-exact" and by_name["repeats"].test == "paired-t"
    assert by_name["single-task"].test == "sign-flip permutation"
    assert verdicts  # the generated shifts are large enough that some verdict is a clear one


def test_a_clear_regression_in_generated_runs_is_regressed_like_scipy_says(tmp_path) -> None:
    rng = random.Random(5)
    base_scores = {"b": {t: [1.0 if rng.random() < 0.7 else 0.0] for t in range(300)}}
    candidate_scores = {"b": {t: [v[0] if rng.random() < 0.8 else 0.0] for t, v in base_scores["b"].items()}}
    base = generated_run(tmp_path, "base", base_scores)
    candidate = generated_run(tmp_path, "cand", candidate_scores)
    [b] = library.compare(run_in_directory(str(base)), run_in_directory(str(candidate))).benchmarks
    ref = independent(base_scores["b"], candidate_scores["b"])
    assert ref["p"] < 1e-6 and ref["ci"][1] < 0
    assert b.paired.verdict == REGRESSED and b.paired.p_value == pytest.approx(ref["p"], rel=1e-9)


# -- the gate fails closed ---------------------------------------------------------------------------


def not_started(run_dir: Path) -> None:
    """The job has written nothing: no rows, no metrics, no state (a run copied before it began)."""
    for path in (run_dir / BENCH / "artifacts").iterdir():
        path.unlink()
    shutil.rmtree(run_dir / BENCH / contract.MARKERS_DIR)


def test_the_gate_fails_closed_with_its_own_exit_code_when_the_candidate_has_no_results(tmp_path, capsys) -> None:
    base, candidate = real_pair(tmp_path)
    not_started(candidate)
    code, out, _ = cli(capsys, "compare", str(base), str(candidate), "--fail-on-regression")
    assert code == 3
    assert "Cannot be compared: answer-judge: the candidate run is not complete: the job is unknown" in out
    assert "Cannot be compared: answer-judge: no task is scored in both runs" in out
    assert out.rstrip().endswith("regression gate: cannot decide (answer-judge cannot be compared; see above)")
    code, out, _ = cli(capsys, "compare", str(base), str(candidate), "--fail-on-regression", "--json")
    doc = json.loads(out)
    assert code == 3 and [u["why"] for u in doc["uncomparable"]] == ["not complete", "no common tasks"]
    assert doc["benchmarks"][0]["comparable"] is False
    code, _, _ = cli(capsys, "compare", str(base), str(candidate))
    assert code == 0  # without the gate, a comparison is a report


def test_a_candidate_of_unknown_completeness_cannot_pass_the_gate(tmp_path, capsys) -> None:
    base, candidate = real_pair(tmp_path)
    (candidate / BENCH / contract.MATERIALIZED_INPUTS_FILE).unlink()
    code, out, _ = cli(capsys, "compare", str(base), str(candidate), "--fail-on-regression")
    assert code == 3 and "the candidate run is not complete: no rollouts_materialized_inputs.jsonl" in out


def test_a_regression_is_exit_1_even_where_something_else_cannot_be_compared(tmp_path, capsys) -> None:
    base, candidate = real_pair(tmp_path)
    (base / BENCH / contract.MATERIALIZED_INPUTS_FILE).unlink()
    code, out, _ = cli(capsys, "compare", str(candidate), str(base), "--fail-on-regression")
    assert code == 1 and "regression gate: failed (answer-judge regressed)" in out
    assert "Cannot be compared: answer-judge: the candidate run is not complete" in out


def benchmark(
    name: str, state: str = "succeeded", complete: bool | None = True, means: dict[int, float] | None = None
) -> BenchmarkResult:
    means = dict.fromkeys(range(4), 1.0) if means is None else means
    return BenchmarkResult(
        benchmark=name,
        state=state,
        samples=len(means),
        expected_samples=4,
        complete=complete,
        completeness_reason=None if complete else f"the job is {state}",
        task_means=means,
        scored_tasks=len(means),
    )


def run_of(*results: BenchmarkResult) -> RunResults:
    return RunResults(run_in_directory(str(REAL_RUN)), [], list(results))


@pytest.mark.parametrize(
    ("base", "candidate", "blockers"),
    [
        ([benchmark("a"), benchmark("b")], [benchmark("a")], [("b", Blocker.MISSING)]),
        ([benchmark("a")], [benchmark("a"), benchmark("c")], [("c", Blocker.MISSING)]),
        (
            [benchmark("a")],
            [benchmark("a", "queued", False, {})],
            [("a", Blocker.NOT_STARTED), ("a", Blocker.NO_COMMON_TASKS)],
        ),
        (
            [benchmark("a", "starting", False, {})],
            [benchmark("a")],
            [("a", Blocker.NOT_STARTED), ("a", Blocker.NO_COMMON_TASKS)],
        ),
        ([benchmark("a")], [benchmark("a", "incomplete", False, {0: 1.0})], [("a", Blocker.NOT_COMPLETE)]),
        ([benchmark("a")], [benchmark("a", complete=None)], [("a", Blocker.NOT_COMPLETE)]),
        ([benchmark("a", means={0: 1.0})], [benchmark("a", means={1: 1.0})], [("a", Blocker.NO_COMMON_TASKS)]),
        ([], [], [("-", Blocker.NOTHING)]),
        ([benchmark("a")], [benchmark("a")], []),
    ],
    ids=[
        "candidate-missing",
        "base-missing",
        "candidate-queued",
        "base-starting",
        "incomplete",
        "unknown",
        "no-common-tasks",
        "no-benchmarks",
        "comparable",
    ],
)
def test_every_benchmark_that_cannot_decide_the_gate_says_why(base, candidate, blockers) -> None:
    outcome = compare_runs(run_of(*base), run_of(*candidate), "reward")
    assert [(u.benchmark, u.blocker) for u in outcome.uncomparable] == blockers
    assert gate(outcome)[0] == (EXIT_UNCOMPARABLE if blockers else 0)


def test_unscoreable_rows_are_flagged_by_name_and_block_the_gate(tmp_path, capsys) -> None:
    base, candidate = real_pair(tmp_path)
    write_rows(
        candidate,
        [{**r, "reward": float("nan") if r["_ng_task_index"] == 4 else r["reward"]} for r in real_rows(candidate)],
    )
    code, out, _ = cli(capsys, "compare", str(base), str(candidate), "--fail-on-regression")
    assert code == 3
    assert (
        "answer-judge: candidate has 1 row(s) without a 'reward' score, left out: task 4 rollout 0 (NaN or infinite)"
        in out
    )
    assert "answer-judge: compared on the 11 task(s) both have (1 only in base, 0 only in candidate)" in out


def suite_example(tmp_path: Path) -> tuple[Path, Path]:
    """The README's suite: math loses 18 net tasks of 200, chat 6 of 200 (significant alone, not
    over the suite), code (4 repeats, graded) moves by noise only."""

    def passes(first: int, tasks: int, flipped_down: range = range(0), flipped_up: range = range(0)) -> dict:
        rows = {t: [1.0 if t < first else 0.0] for t in range(tasks)}
        rows.update({t: [0.0] for t in flipped_down})
        rows.update({t: [1.0] for t in flipped_up})
        return rows

    rng = random.Random(5)
    rates = [rng.betavariate(0.8, 0.8) for _ in range(100)]
    code_base = {t: [float(rng.random() < p) for _ in range(4)] for t, p in enumerate(rates)}
    code_candidate = {t: [float(rng.random() < p) for _ in range(4)] for t, p in enumerate(rates)}
    base = generated_run(tmp_path, "base", {"math": passes(150, 200), "chat": passes(100, 200), "code": code_base})
    candidate = generated_run(
        tmp_path,
        "cand",
        {
            "math": passes(150, 200, range(20), range(150, 152)),
            "chat": passes(100, 200, range(6)),
            "code": code_candidate,
        },
    )
    return base, candidate


def test_the_readme_suite_example_is_what_compare_prints(tmp_path, capsys, monkeypatch) -> None:
    suite_example(tmp_path)
    monkeypatch.chdir(tmp_path)
    code = main(["eval", "compare", "base/", "cand/", "--fail-on-regression"])
    out = capsys.readouterr().out
    readme = documentation.page("statistics.md")
    shown = "\n".join(line for line in out.splitlines() if not line.startswith(("Base:", "Candidate:")))
    assert code == 1 and f"$ gym eval compare base/ cand/ --fail-on-regression\n...\n{shown}\n```" in readme, out
    code = main(["eval", "plan", "base/", "cand/", "--detect", "0.05"])
    out = capsys.readouterr().out
    assert code == 0 and f"$ gym eval plan base/ cand/ --detect 0.05\n{out}```" in readme, out


def test_a_group_key_clusters_the_evidence_by_group(tmp_path, capsys) -> None:
    """200 questions on 40 passages, each passage's five moving together: 40 units of evidence, not
    200. Through the real projection (--group-key names the rows' field), the standard error and
    the interval widen and the test is the clustered one."""
    rng = random.Random(3)
    shift = {g: rng.choice([-1.0, 0.0, 0.0, 1.0]) for g in range(40)}
    base = {t: [0.0 if shift[t // 5] > 0 else 1.0 if shift[t // 5] < 0 else float(t % 2)] for t in range(200)}
    candidate = {t: [min(1.0, max(0.0, base[t][0] + shift[t // 5]))] for t in range(200)}
    runs = [generated_run(tmp_path, name, {"reading": scores}) for name, scores in (("b", base), ("c", candidate))]
    for run in runs:
        rows_file = run / "reading" / contract.ROLLOUTS_FILE
        rows = [json.loads(line) for line in rows_file.read_text().splitlines()]
        rows_file.write_text("".join(json.dumps({**r, "passage": f"p{r['_ng_task_index'] // 5}"}) + "\n" for r in rows))
    plain = main(["eval", "compare", str(runs[0]), str(runs[1]), "--json"])
    alone = json.loads(capsys.readouterr().out)["benchmarks"][0]
    grouped = main(["eval", "compare", str(runs[0]), str(runs[1]), "--json", "--group-key", "passage"])
    together = json.loads(capsys.readouterr().out)["benchmarks"][0]
    assert plain == grouped == 0
    assert (alone["test"], together["test"]) == ("mcnemar-exact", "clustered-t")
    assert together["delta"] == alone["delta"]
    assert together["standard_error"] > 1.5 * alone["standard_error"]
    assert together["ci95"][1] - together["ci95"][0] > 1.5 * (alone["ci95"][1] - alone["ci95"][0])
