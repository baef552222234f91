"""Numbers are checked for range where they are read (issue 38): what a scheduler or a tracker
stores in 32 or 64 bits, a count given as true, a budget of 0 attempts, a job id 20 MB long in
a chain file. Each is refused in one line naming the field, or passed over, never carried on."""

from __future__ import annotations

import warnings

import pytest
import yaml
from render_helpers import GOLDEN_DIR

from nemo_gym.orchestration.chain import chain_record, parse_chain
from nemo_gym.orchestration.cli.main import main
from nemo_gym.orchestration.errors import UserError
from nemo_gym.orchestration.validate import validate_config

KUBERNETES = GOLDEN_DIR / "configs" / "kubernetes.yaml"


def kubernetes_with(**compute) -> dict:
    data = yaml.safe_load(KUBERNETES.read_text())
    [name] = data["compute"]
    data["compute"][name].update(compute)
    return data


def problems(data: dict) -> str:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(UserError) as err:
            validate_config(data)
    return " | ".join(err.value.problems)


@pytest.mark.parametrize(
    ("field", "value", "said"),
    [
        ("ttl_seconds_after_finished", 2**31, "an int32 in the Job"),
        ("active_deadline_seconds", 2**63, "from 1 to 9223372036854775807"),
        ("memory_per_gpu", "99999999999Ei", "more memory than Kubernetes can count"),
    ],
)
def test_kubernetes_numbers_past_what_the_job_stores_are_refused(field, value, said) -> None:
    found = problems(kubernetes_with(**{field: value}))
    assert field in found and said in found, found


def test_kubernetes_numbers_within_range_are_taken() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        validate_config(kubernetes_with(ttl_seconds_after_finished=2**31 - 1, active_deadline_seconds=2**40))


def test_a_training_step_past_int64_is_refused(base) -> None:
    base["job"]["training_step"] = 2**63
    assert "job.training_step" in problems(base) and "int64" in problems(base)


@pytest.mark.parametrize("where", ["job", "benchmark"])
def test_shards_given_as_true_are_refused_not_read_as_one(base, where: str) -> None:
    owner = base["job"] if where == "job" else next(iter(base["driver"]["benchmarks"].values()))
    owner["shards"] = True
    assert "shards" in problems(base) and "not true" in problems(base)


def test_a_chain_file_s_enormous_or_strange_job_ids_are_passed_over() -> None:
    huge = "9" * 20_000_000
    text = chain_record("start", huge, "1", "0") + chain_record("start", "123", "1", "0")
    text += chain_record("successor", "456", huge) + "start\tbad id\t1\t0\n"
    chain = parse_chain(text)
    assert chain.started == ["123"] and chain.successors == {}


@pytest.mark.parametrize("verb", ["info", "resubmit"])
def test_a_budget_of_no_attempts_is_a_usage_error(verb, capsys) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["eval", verb, "some-run", "--max-attempts", "0"])
    assert exited.value.code == 2 and "argument --max-attempts" in capsys.readouterr().err
