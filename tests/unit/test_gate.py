"""gym eval gate: the policy's rules on generated run directories (as gym leaves them), through the
command line, and the pure rules alone."""

from __future__ import annotations

import json
from pathlib import Path

import documentation
import pytest
from test_compare import generated_run

from nemo_gym.orchestration.cli.main import main
from nemo_gym.orchestration.stats import paired_comparison
from nemo_gym.orchestration.verbs.gate import command as gate_cli
from nemo_gym.orchestration.verbs.gate import rules as gate_rules
from nemo_gym.orchestration.verbs.gate.rules import Finding, Tier, Verdict, judge_benchmark, load_policy, tolerated_drop

TASKS = 400


def scores(passed: int, tasks: int = TASKS) -> dict[int, list[float]]:
    """0/1 rewards: the first ``passed`` tasks pass."""
    return {t: [1.0 if t < passed else 0.0] for t in range(tasks)}


def policy_file(tmp_path: Path, policy: dict | list | str) -> str:
    path = tmp_path / "gate.yaml"
    path.write_text(policy if isinstance(policy, str) else json.dumps(policy))  # JSON is YAML
    return str(path)


def run_gate(capsys, base: Path, candidate: Path, policy: str, *extra: str) -> tuple[int, str, str]:
    code = main(["eval", "gate", str(base), str(candidate), "--policy", policy, *extra])
    out, err = capsys.readouterr()
    return code, out, err


CRITICAL_AND_ADVISORY = {
    "benchmarks": {
        "math": {"tier": "critical", "max_drop": 0.05},
        "chat": {"tier": "advisory", "max_drop": 0.05},
    }
}


def test_a_critical_benchmark_regressing_past_its_threshold_is_no_go(tmp_path, capsys) -> None:
    base = generated_run(tmp_path, "base", {"math": scores(300), "chat": scores(300)})
    candidate = generated_run(tmp_path, "cand", {"math": scores(150), "chat": scores(300)})
    code, out, _ = run_gate(capsys, base, candidate, policy_file(tmp_path, CRITICAL_AND_ADVISORY), "--json")
    outcome = json.loads(out)
    assert code == 1 and outcome["verdict"] == "NO-GO" and outcome["exit_code"] == 1
    found = {b["benchmark"]: b["finding"] for b in outcome["benchmarks"]}
    assert found == {"math": "breach", "chat": "pass"}
    math = outcome["benchmarks"][0]
    assert math["delta"] == pytest.approx(-150 / TASKS) and math["paired_tasks"] == TASKS and math["p_value"] < 0.05
    assert math["p_adjusted"] == math["p_value"] and math["correction"] == "holm"  # a family of one
    assert 0 < math["detectable_drop"] < 0.15


def test_only_the_advisory_benchmark_regressing_is_go(tmp_path, capsys) -> None:
    base = generated_run(tmp_path, "base", {"math": scores(300), "chat": scores(300)})
    candidate = generated_run(tmp_path, "cand", {"math": scores(300), "chat": scores(50)})
    code, out, _ = run_gate(capsys, base, candidate, policy_file(tmp_path, CRITICAL_AND_ADVISORY))
    assert code == 0, out
    assert "chat" in out and "breach" in out  # reported, not deciding
    assert out.strip().splitlines()[-1].startswith("Verdict: GO (")


def test_fewer_paired_tasks_than_the_minimum_is_inconclusive(tmp_path, capsys) -> None:
    base = generated_run(tmp_path, "base", {"math": scores(6, tasks=8)})
    candidate = generated_run(tmp_path, "cand", {"math": scores(0, tasks=8)})
    policy = policy_file(tmp_path, {"benchmarks": {"math": {"tier": "critical"}}})  # min_paired 10 by default
    code, out, _ = run_gate(capsys, base, candidate, policy)
    assert code == 3, out
    assert "math: 8 paired task(s); the policy asks at least 10" in out
    assert "Verdict: INCONCLUSIVE" in out


def test_a_drop_beyond_tolerance_that_is_not_established_is_inconclusive(tmp_path, capsys) -> None:
    base = generated_run(tmp_path, "base", {"math": scores(200)})
    candidate = generated_run(tmp_path, "cand", {"math": scores(150)})  # -0.125; the CI reaches 0.09
    limited = {"benchmarks": {"math": {"max_drop": 0.1}}}
    code, out, _ = run_gate(capsys, base, candidate, policy_file(tmp_path, limited))
    assert code == 3 and "the evidence does not establish it (p=" in out, out


def test_a_limit_below_what_the_pair_can_detect_is_inconclusive_not_go(tmp_path, capsys) -> None:
    base = generated_run(tmp_path, "base", {"math": scores(20, tasks=40)})
    candidate = generated_run(tmp_path, "cand", {"math": scores(20, tasks=40)})  # nothing moved, on 40 tasks
    limited = {"benchmarks": {"math": {"max_drop": 0.01}}}
    code, out, _ = run_gate(capsys, base, candidate, policy_file(tmp_path, limited))
    # 40 tasks cannot show a drop of 0.01: six tasks flipping one way is the least McNemar can call.
    assert code == 3 and "is below the smallest drop this pair can detect (0.1500)" in out, out
    loose = {"benchmarks": {"math": {"max_drop": 0.2}}}
    assert run_gate(capsys, base, candidate, policy_file(tmp_path, loose))[0] == 0


def test_without_a_limit_only_a_significant_drop_counts(tmp_path, capsys) -> None:
    base = generated_run(tmp_path, "base", {"math": scores(20)})
    noise = generated_run(tmp_path, "noise", {"math": scores(17)})  # p = 0.25
    worse = generated_run(tmp_path, "worse", {"math": scores(8)})  # 12 flips: p < 0.001
    policy = policy_file(tmp_path, {"benchmarks": {"math": None}})  # a bare name: every default
    code, out, _ = run_gate(capsys, base, noise, policy)
    assert code == 0 and "no significant drop (p=0.25)" in out, out
    code, out, _ = run_gate(capsys, base, worse, policy)
    assert code == 1 and "breach" in out, out


def test_the_critical_and_supporting_benchmarks_are_one_family(tmp_path, capsys) -> None:
    # Three benchmarks each 6 tasks down of 400: p = 2/64 = 0.031 alone, 0.094 adjusted over three.
    names = ("a", "b", "c")
    base = generated_run(tmp_path, "base", {n: scores(400) for n in names})
    candidate = generated_run(tmp_path, "cand", {n: scores(394) for n in names})
    policy = policy_file(tmp_path, {"benchmarks": {"a": {}, "b": {"tier": "supporting"}, "c": {"tier": "supporting"}}})
    code, out, _ = run_gate(capsys, base, candidate, policy, "--json")
    found = json.loads(out)["benchmarks"]
    assert code == 0 and {b["finding"] for b in found} == {"pass"}, out
    assert [b["p_adjusted"] for b in found] == [pytest.approx(0.09375)] * 3
    code, out, _ = run_gate(capsys, base, candidate, policy, "--correction", "none")
    assert code == 1 and "NO-GO" in out, out
    # An advisory benchmark is not in the family: two gated ones are adjusted over two.
    advisory = {"benchmarks": {"a": {}, "b": {}, "c": {"tier": "advisory"}}}
    code, out, _ = run_gate(capsys, base, candidate, policy_file(tmp_path, advisory), "--json")
    found = json.loads(out)["benchmarks"]
    assert [b["p_adjusted"] for b in found[:2]] == [pytest.approx(0.0625)] * 2


def test_a_breach_needs_the_whole_interval_past_the_tolerance(tmp_path, capsys) -> None:
    base = generated_run(tmp_path, "base", {"math": scores(400)})
    candidate = generated_run(tmp_path, "cand", {"math": scores(330)})  # -0.175, significant
    near = {"benchmarks": {"math": {"max_drop": 0.15}}}  # the CI reaches back within 0.15
    far = {"benchmarks": {"math": {"max_drop": 0.02}}}
    code, out, _ = run_gate(capsys, base, candidate, policy_file(tmp_path, near))
    assert code == 3 and "the 95 % CI allows a drop of only" in out, out
    code, out, _ = run_gate(capsys, base, candidate, policy_file(tmp_path, far))
    assert code == 1 and "the 95 % CI puts the drop at" in out, out


def test_a_policy_benchmark_no_run_measured_is_missing_and_extra_ones_are_listed(tmp_path, capsys) -> None:
    base = generated_run(tmp_path, "base", {"math": scores(30), "code": scores(30)})
    candidate = generated_run(tmp_path, "cand", {"math": scores(30), "code": scores(30)})
    policy = policy_file(tmp_path, {"benchmarks": {"math": {}, "science": {"tier": "supporting"}}})
    code, out, _ = run_gate(capsys, base, candidate, policy)
    assert code == 4, out
    assert "science: in neither BASE nor CANDIDATE" in out
    assert "Not in the policy (not gated): code" in out


def test_a_critical_benchmark_not_complete_is_missing_not_a_pass(tmp_path, capsys) -> None:
    base = generated_run(tmp_path, "base", {"math": scores(30)})
    candidate = generated_run(tmp_path, "cand", {"math": scores(30)})
    rows = (candidate / "math" / "artifacts" / "rollouts.jsonl").read_text().splitlines()
    (candidate / "math" / "artifacts" / "rollouts.jsonl").write_text("\n".join(rows[:-5]) + "\n")
    code, out, _ = run_gate(capsys, base, candidate, policy_file(tmp_path, {"benchmarks": {"math": {}}}))
    assert code == 4 and "not complete" in out, out


def test_a_relative_tolerance_scales_with_the_base_value(tmp_path, capsys) -> None:
    base = generated_run(tmp_path, "base", {"math": scores(400)})
    candidate = generated_run(tmp_path, "cand", {"math": scores(370)})  # -0.075 of 1.0
    loose = {"benchmarks": {"math": {"max_relative_drop": 0.1}}}
    tight = {"benchmarks": {"math": {"max_relative_drop": 0.1, "max_drop": 0.05}}}  # the tighter wins
    assert run_gate(capsys, base, candidate, policy_file(tmp_path, loose))[0] == 0
    code, out, _ = run_gate(capsys, base, candidate, policy_file(tmp_path, tight))
    assert code == 3 and "beyond the tolerated 0.0500" in out, out


def test_supporting_breaches_are_no_go_past_what_the_policy_allows(tmp_path, capsys) -> None:
    base = generated_run(tmp_path, "base", {"a": scores(30), "b": scores(30)})
    candidate = generated_run(tmp_path, "cand", {"a": scores(10), "b": scores(30)})
    strict = {"benchmarks": {"a": {"tier": "supporting"}, "b": {}}}
    lenient = {**strict, "supporting_breaches_allowed": 1}
    assert run_gate(capsys, base, candidate, policy_file(tmp_path, strict))[0] == 1
    assert run_gate(capsys, base, candidate, policy_file(tmp_path, lenient))[0] == 0


def test_a_lower_is_better_metric_breaches_when_it_rises(tmp_path, capsys) -> None:
    base = generated_run(tmp_path, "base", {"errors": scores(50)})
    candidate = generated_run(tmp_path, "cand", {"errors": scores(250)})
    policy = {"benchmarks": {"errors": {"direction": "lower", "max_drop": 0.1}}}
    code, out, _ = run_gate(capsys, base, candidate, policy_file(tmp_path, policy))
    assert code == 1 and "breach" in out, out


@pytest.mark.parametrize(
    ("policy", "said"),
    [
        ({"benchmarks": {"math": {"tier": "crtical"}}}, "benchmarks.math.tier"),
        ({"benchmarks": {"math": {"max_dorp": 0.1}}}, "did you mean 'max_drop'"),
        ({"benchmarks": {"math": {"max_relative_drop": 2}}}, "benchmarks.math.max_relative_drop"),
        ({"benchmarks": {}}, "names no benchmark"),
        (["math"], "a gate policy is a mapping"),
        ("benchmarks: {math: [", "not YAML"),
    ],
)
def test_a_bad_policy_is_one_line_naming_the_field_and_exit_2_never_no_go(tmp_path, capsys, policy, said) -> None:
    base = generated_run(tmp_path, "base", {"math": scores(30)})
    code, out, err = run_gate(capsys, base, base, policy_file(tmp_path, policy))
    assert code == gate_cli.EXIT_CANNOT_RUN == 2 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and said in lines[0] and "gate.yaml" in lines[0], err


def test_an_unreadable_or_oversized_policy_is_named(tmp_path, capsys) -> None:
    base = generated_run(tmp_path, "base", {"math": scores(30)})
    code, _, err = run_gate(capsys, base, base, str(tmp_path / "nope.yaml"))
    assert code == 2 and "cannot be read (No such file or directory)" in err
    big = tmp_path / "big.yaml"
    big.write_text("#" * (gate_cli.POLICY_MAX_BYTES + 1))
    code, _, err = run_gate(capsys, base, base, str(big))
    assert code == 2 and "a policy is a short YAML file" in err


def test_a_policy_that_is_a_fifo_or_a_device_is_refused_never_waited_on(tmp_path, capsys) -> None:
    import os

    base = generated_run(tmp_path, "base", {"math": scores(30)})
    fifo = tmp_path / "policy.fifo"
    os.mkfifo(fifo)  # no writer: opening it to read would block for ever
    zero = tmp_path / "zero.yaml"
    zero.symlink_to("/dev/zero")  # never ends
    for path, kind in ((fifo, "a FIFO"), (zero, "a character device")):
        code, out, err = run_gate(capsys, base, base, str(path))
        assert code == 2 and out == "" and f"not a regular file ({kind})" in err, err


def test_a_policy_naming_a_benchmark_twice_is_refused_naming_both_lines(tmp_path, capsys) -> None:
    """Last one wins, silently, in a plain YAML load: a critical benchmark would be advisory."""
    base = generated_run(tmp_path, "base", {"b": scores(30)})
    candidate = generated_run(tmp_path, "cand", {"b": scores(0)})
    policy = policy_file(tmp_path, "benchmarks:\n  b: {tier: critical, max_drop: 0}\n  b: {tier: advisory}\n")
    code, out, err = run_gate(capsys, base, candidate, policy)
    assert code == 2 and out == ""
    assert "gate.yaml:3: the key 'b' appears twice in the same mapping (lines 2 and 3); keep one" in err, err


def test_the_help_states_the_exit_codes_the_rules_use() -> None:
    assert {v.value: code for v, code in gate_rules.EXIT_CODES.items()} == gate_cli.EXIT_CODES_SHOWN


def judged(base: dict[int, float], candidate: dict[int, float], rule: dict, **policy) -> Finding:
    from nemo_gym.orchestration.comparison import BenchmarkComparison

    loaded = load_policy({"benchmarks": {"b": rule}, **policy}, "p.yaml")
    comparison = BenchmarkComparison("b", "reward", paired_comparison(base, candidate), ())
    return judge_benchmark("b", loaded, comparison, None).finding


def test_the_rules_alone() -> None:
    same = dict.fromkeys(range(20), 1.0)
    assert judged(same, same, {}) is Finding.PASS
    worse = {t: (0.0 if t < 10 else 1.0) for t in range(20)}
    assert judged(same, worse, {}) is Finding.BREACH
    assert judged(same, worse, {"max_drop": 0.5}) is Finding.PASS
    assert judged(same, worse, {}, min_paired=30) is Finding.INSUFFICIENT
    slightly = {t: (0.0 if t < 2 else 1.0) for t in range(20)}  # 2 flips: not significant
    assert judged(same, slightly, {}) is Finding.PASS
    assert judged(same, slightly, {"max_drop": 0.05}) is Finding.INSUFFICIENT
    assert judged(worse, same, {"direction": "lower"}) is Finding.BREACH
    policy = load_policy({"benchmarks": {"b": {"tier": "advisory"}}}, "p.yaml")
    assert judge_benchmark("b", policy, None, "not in BASE").finding is Finding.MISSING
    assert policy.benchmarks["b"].tier is Tier.ADVISORY


def test_a_tolerance_is_the_tighter_limit_and_zero_without_one() -> None:
    rule = load_policy({"benchmarks": {"b": {"max_drop": 0.1, "max_relative_drop": 0.5}}}, "p").benchmarks["b"]
    assert tolerated_drop(rule, 0.1) == pytest.approx(0.05)
    assert tolerated_drop(rule, 0.9) == pytest.approx(0.1)
    assert tolerated_drop(load_policy({"benchmarks": {"b": {}}}, "p").benchmarks["b"], 0.7) == 0.0


def test_the_verdict_order_no_go_then_missing_then_inconclusive() -> None:
    policy = load_policy({"benchmarks": {"a": {}, "b": {}, "c": {"tier": "advisory"}}}, "p")

    def gate_of(*findings: Finding) -> Verdict:
        judged = [
            gate_rules.BenchmarkGate(name, policy.benchmarks[name].tier, "reward", f, "", None, None)
            for name, f in zip("abc", findings)
        ]
        return gate_rules.decide(policy, judged, []).verdict

    assert gate_of(Finding.BREACH, Finding.MISSING, Finding.PASS) is Verdict.NO_GO
    assert gate_of(Finding.INSUFFICIENT, Finding.MISSING, Finding.PASS) is Verdict.MISSING
    assert gate_of(Finding.INSUFFICIENT, Finding.PASS, Finding.MISSING) is Verdict.INCONCLUSIVE
    assert gate_of(Finding.PASS, Finding.PASS, Finding.BREACH) is Verdict.GO


def test_the_readme_example_is_what_the_gate_prints(tmp_path, capsys, monkeypatch) -> None:
    generated_run(tmp_path, "base", {"math": scores(30, 40), "chat": scores(30, 40), "code": scores(20, 40)})
    generated_run(tmp_path, "cand", {"math": scores(15, 40), "chat": scores(30, 40), "code": scores(20, 40)})
    (tmp_path / "gate.yaml").write_text(
        "benchmarks:\n  math: {tier: critical, max_drop: 0.05}\n  chat: {tier: advisory}\n  science: {tier: supporting}\n"
    )
    monkeypatch.chdir(tmp_path)
    code = main(["eval", "gate", "base/", "cand/", "--policy", "gate.yaml"])
    out = capsys.readouterr().out
    readme = documentation.page("statistics.md")
    assert code == 1 and f"$ gym eval gate base/ cand/ --policy gate.yaml\n{out}```" in readme, out
