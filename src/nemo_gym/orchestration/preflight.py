"""The submit path's own checks, run by ``library.prepare`` so that ``--dry-run`` and submit both
see them: what gym will make of a valid config. ``SubmitConfig`` and ``--resolve-only`` accept
what the spec and NeMo Gym 0.7.0 accept; these are about the run that would be staged.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from functools import cache
from typing import Any

from nemo_gym.orchestration.api import BenchmarkRunConfig, SubmitConfig
from nemo_gym.orchestration.backends import backend_named
from nemo_gym.orchestration.errors import UserError, closest_name, describe_value
from nemo_gym.orchestration.gym_eval_keys import PREPARE_KEYS, RESPONSES_CREATE_PARAMS_KEYS, RUN_KEYS, GymKey, Kind

# How alike a key must be to one gym reads to be taken for its misspelling (difflib's ratio):
# 'num_repeat', 'limt', 'temprature' are; a server's own setting seldom is.
NEAR_KEY_CUTOFF = 0.8
RUN_COMMAND = "gym eval run"
PREPARE_COMMAND = "gym eval prepare"
# The one mapping of run whose keys gym checks as well: every request's parameters.
NESTED_KEYS = {"responses_create_params": RESPONSES_CREATE_PARAMS_KEYS}


def staging_warnings(config: SubmitConfig, environ: Mapping[str, str] = os.environ) -> list[str]:
    """One line each, for the CLI's ``warning:`` lines: gym's, then what the compute's backend says."""
    compute_name, compute = next(iter(config.compute.items()))
    backend = backend_named(compute.type).config_warnings(config, compute_name, environ)
    return [w for w in (_gym_telemetry_uninstalled(config),) if w] + backend


def check_gym_keys(config: SubmitConfig) -> None:
    """Refuse run/prepare keys gym would ignore or refuse: a near miss of a key it reads (gym's
    config is open, so it would be ignored and the run measure something else), or a key it reads
    given a value of the wrong kind (gym would fail once the job runs)."""
    problems = [line for name, bench in config.driver.benchmarks.items() for line in _benchmark_problems(name, bench)]
    if problems:
        raise UserError(problems)


def _benchmark_problems(name: str, bench: BenchmarkRunConfig) -> Iterator[str]:
    where = f"driver.benchmarks.{name}"
    unchecked = set(bench.unchecked_keys)
    if bench.command is None:  # a command replaces gym eval run; its run holds the policy wiring only
        yield from _key_problems(bench.run, RUN_KEYS, "run", RUN_COMMAND, where, unchecked)
    yield from _key_problems(bench.prepare, PREPARE_KEYS, "prepare", PREPARE_COMMAND, where, unchecked)


def _key_problems(
    mapping: dict[str, Any], known: dict[str, GymKey], section: str, command: str, where: str, unchecked: set[str]
) -> Iterator[str]:
    for name, value in mapping.items():
        key = str(name)  # a nested mapping's keys are the user's YAML: 1 is a key too
        dotted = f"{section}.{key}"
        if dotted in unchecked:
            continue
        spec = known.get(key)
        if spec is None:
            near = closest_name(key, known, cutoff=NEAR_KEY_CUTOFF)
            if near:
                yield (
                    f"{where}.{dotted}: {command} reads no such key; did you mean '{near}'? (to pass it as "
                    f"written, add '{dotted}' to {where}.unchecked_keys)"
                )
            continue
        expected = _expected(spec, value)
        if expected:
            yield f"{where}.{dotted}: {command} reads {expected} here, got {describe_value(value)}; give {expected}"
        elif key in NESTED_KEYS and isinstance(value, dict):
            yield from _key_problems(value, NESTED_KEYS[key], dotted, command, where, unchecked)


def _expected(spec: GymKey, value: Any) -> str | None:
    """What gym takes for this key, if ``value`` is not one of it (as gym's pydantic would coerce)."""
    if Kind.ANY in spec.kinds or (value is None and spec.nullable):
        return None
    if spec.choices:
        return None if value in spec.choices else "one of " + ", ".join(repr(c) for c in spec.choices)
    if any(_coerces(kind, value) for kind in spec.kinds):
        return None
    return " or ".join(kind.value for kind in spec.kinds)


def _coerces(kind: Kind, value: Any) -> bool:
    from pydantic import ValidationError

    try:
        _adapter(kind).validate_python(value)
    except ValidationError:
        return False
    return True


@cache
def _adapter(kind: Kind) -> Any:
    from pydantic import TypeAdapter

    python_type = {
        Kind.INTEGER: int,
        Kind.NUMBER: float,
        Kind.BOOLEAN: bool,
        Kind.STRING: str,
        Kind.LIST: list,
        Kind.MAPPING: dict,
    }[kind]
    return TypeAdapter(python_type)


def _gym_telemetry_uninstalled(config: SubmitConfig) -> str | None:
    """gym's telemetry extra comes only with driver.gym_install; 0.7.0 refuses to submit without it,
    but the driver's container may have it already, and the collector is worth running anyway."""
    if not (config.otel.enabled and config.otel.gym_telemetry) or config.driver.gym_install is not None:
        return None
    return (
        "otel.gym_telemetry: on, but without driver.gym_install nothing installs gym's telemetry extra, so "
        "gym's own spans and logs arrive only if the driver's container has it (the collector runs either "
        "way); set otel.gym_telemetry: false to silence this, or driver.gym_install to make it certain"
    )
