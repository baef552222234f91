"""Composing: a config file and its overrides made into validated configs, one or (``-m``) a sweep's
every combination, each bad one named; and the validated config as ``--resolve-only`` prints it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TypeVar

from nemo_gym.orchestration.api import SubmitConfig
from nemo_gym.orchestration.compose import SharedComposition, compose_config
from nemo_gym.orchestration.errors import UserError
from nemo_gym.orchestration.preflight import check_gym_keys
from nemo_gym.orchestration.record import values_label

T = TypeVar("T")


@dataclass(frozen=True)
class Combination:
    """One config to run, composed and validated: a sweep's combination, or the one config."""

    config: SubmitConfig
    values: tuple[tuple[str, str], ...] = ()  # (swept key, value as written), in the order of the sweep
    notes: tuple[str, ...] = ()  # validation's warnings

    def label(self) -> str:
        return values_label(dict(self.values))


@dataclass(frozen=True)
class Composition:
    """What a config file and its overrides make: one config, or (``sweep_id`` set) a sweep's combinations."""

    combinations: list[Combination]
    sweep_id: str | None = None
    config_path: str | None = None

    @property
    def warnings(self) -> list[str]:
        """Each combination's, once each."""
        return list(dict.fromkeys(note for c in self.combinations for note in c.notes))


def compose(config_path: str | Path, overrides: list[str], *, multirun: bool = False) -> Composition:
    """The config file with its Hydra overrides, validated; with ``multirun``, every combination of
    the overrides (Hydra's multirun grammar) as a sweep: a bad value in any combination is reported,
    naming the combination, and nothing is kept."""
    if not multirun:
        return Composition([_composed(config_path, overrides)], config_path=str(config_path))
    from nemo_gym.orchestration.sweep import expand, new_sweep_id  # a sweep's grammar: a lone config never reads it

    points = expand(config_path, overrides)
    shared = SharedComposition(config_path, _shared_overrides([point.overrides for point in points]))

    def combination(i: int) -> Combination:
        composed = replace(_composed(config_path, list(points[i].overrides), shared), values=points[i].values)
        # A sweep's gym keys are checked here, with its validation, unlike a lone config's (whose
        # --resolve-only prints the config as written, gym keys unchecked, by design): every
        # combination's problems, a config error in one and a bad gym key in another, are then told
        # together, each naming its combination. prepare checks them again (cheap) for a
        # Composition built by hand.
        check_gym_keys(composed.config)
        return composed

    combinations = each_combination([point.values for point in points], combination)
    return Composition(combinations, new_sweep_id(), str(Path(config_path).expanduser().resolve()))


def _composed(config_path: str | Path, overrides: list[str], shared: SharedComposition | None = None) -> Combination:
    from nemo_gym.orchestration.validate import validate_config

    config, notes = validate_config(compose_config(config_path, overrides, shared))
    return Combination(config, notes=tuple(notes))


def _shared_overrides(combinations: list[tuple[str, ...]]) -> list[str]:
    """The overrides every combination has."""
    first, *others = combinations
    return [o for o in first if all(o in other for other in others)]


def resolved_config(config: SubmitConfig) -> dict:
    """The validated config as ``--resolve-only --json`` prints it."""
    from nemo_gym.orchestration.resolved import resolved_config_dict

    return resolved_config_dict(config)


def resolved_yaml(config: SubmitConfig) -> str:
    """The validated config as ``--resolve-only`` prints it."""
    from nemo_gym.orchestration.yamlio import dump_yaml

    return dump_yaml(resolved_config(config))


def each_combination(labels: list[tuple[tuple[str, str], ...]], make: Callable[[int], T]) -> list[T]:
    """``make(i)`` for every combination; every combination's problems, each naming its
    combination, when any has one (one config's as they are)."""
    if len(labels) == 1 and not labels[0]:
        return [make(0)]
    made, problems = [], {}
    for i, values in enumerate(labels):
        try:
            made.append(make(i))
        except UserError as exc:
            problems[values_label(dict(values))] = exc.problems
    if problems:
        raise UserError(_sweep_problems(problems, len(labels)))
    return made


def _sweep_problems(problems: dict[str, list[str]], combinations: int) -> list[str]:
    """Each problem naming its combination; one every combination has, once and plainly."""
    everywhere = set.intersection(*(set(p) for p in problems.values())) if len(problems) == combinations else set()
    lines = [p for p in next(iter(problems.values())) if p in everywhere]
    for label, found in problems.items():
        lines += [f"combination {label or 'without swept values'}: {p}" for p in found if p not in everywhere]
    return lines
