"""``gym eval submit -m key=a,b,c ...``: a sweep, one run per combination of the swept values.

Hydra's multirun grammar: a comma list (``a,b,c``), ``choice(a,b)``, ``range(start,stop[,step])``
and, for a config group next to the config file, ``glob(pattern)``; the combinations are the
cartesian product, in the order the keys were written. Each combination is composed and validated
like any config (``key=value`` overrides), and runs under its own run id; the sweep id groups them.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING

from nemo_gym.orchestration.errors import UserError

if TYPE_CHECKING:
    from nemo_gym.orchestration.record import SubmissionRecord

# A sweep this large is almost certainly a typo (a range without a step, say): ask for it explicitly.
MAX_COMBINATIONS = 500


@dataclass(frozen=True)
class SweepPoint:
    """One combination: the overrides that make it, and the swept values that label its run."""

    overrides: tuple[str, ...]
    values: tuple[tuple[str, str], ...]  # (swept key, value as written), in the order of the sweep

    def label(self) -> str:
        from nemo_gym.orchestration.record import values_label

        return values_label(dict(self.values))


def new_sweep_id(now: datetime | None = None) -> str:
    moment = (now or datetime.now(timezone.utc)).astimezone(timezone.utc)
    return f"gym-sweep-{moment:%Y%m%dT%H%M%SZ}-{secrets.token_hex(3)}"


def expand(config_path: str | Path, swept: list[str]) -> list[SweepPoint]:
    """Every combination of ``swept`` (``key=a,b`` and the like; plain ``key=value`` items apply to
    every combination), or a one-line error naming the override and the fix."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    parser = OverridesParser.create()
    try:
        parsed = parser.parse_overrides(list(swept))
    except HydraException as exc:
        raise UserError(f"-m: {_first_line(exc)}; write key=a,b,c (quote values with commas: key='a,b',c)") from None
    axes: list[tuple[str, list[str]]] = []
    for override in parsed:
        key = override.get_key_element()
        values = _values_of(override, Path(config_path)) if override.is_sweep_override() else [override.get_value_element_as_str()]
        if not values:
            raise UserError(f"-m {override.input_line}: sweeps over no value; give at least one")
        axes.append((key, values))
    points: list[list[tuple[str, str]]] = [[]]
    for key, values in axes:
        points = [point + [(key, value)] for point in points for value in values]
        if len(points) > MAX_COMBINATIONS:
            raise UserError(
                f"-m: {len(points)}+ combinations (more than {MAX_COMBINATIONS}); sweep fewer values at once"
            )
    swept_keys = {key for key, values in axes if len(values) > 1 or _is_sweep(parsed, key)}
    return [
        SweepPoint(
            overrides=tuple(f"{key}={value}" for key, value in point),
            values=tuple((key.lstrip("+~"), value) for key, value in point if key in swept_keys),
        )
        for point in points
    ]


def _is_sweep(parsed: list, key: str) -> bool:
    return any(o.get_key_element() == key and o.is_sweep_override() for o in parsed)


def _values_of(override: object, config_path: Path) -> list[str]:
    """The values of one swept key, as override text."""
    from hydra.core.override_parser.types import Glob

    value = override.value()  # type: ignore[attr-defined]
    if isinstance(value, Glob):
        group = override.key_or_group  # type: ignore[attr-defined]
        options = sorted(p.stem for p in (config_path.parent / group).glob("*.yaml"))
        if not options:
            raise UserError(
                f"-m {override.input_line}: glob() picks among a config group's files, and "  # type: ignore[attr-defined]
                f"{config_path.parent / group} holds none; list the values instead: key=a,b"
            )
        return list(value.filter(options))
    try:
        return list(override.sweep_string_iterator())  # type: ignore[attr-defined]
    except Exception as exc:  # noqa: BLE001 - Hydra raises several kinds; each is the user's input
        raise UserError(f"-m {override.input_line}: {_first_line(exc)}") from None  # type: ignore[attr-defined]


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


@dataclass(frozen=True)
class RunLabels:
    """What to call each of several runs in a table, and what the column of those names is called."""

    header: str
    labels: list[str]


def run_labels(records: Sequence[SubmissionRecord]) -> RunLabels:
    """The swept values where the runs are combinations of a sweep (just the values when they
    share their keys: the header names the keys); otherwise each run's id, or its directory's name
    where copies of one run share an id."""
    from nemo_gym.orchestration.record import values_label

    keys = {tuple(r.sweep_values) for r in records}
    if len(keys) == 1 and () not in keys:
        labels = [", ".join(r.sweep_values.values()) for r in records]
        if len(set(labels)) == len(labels):
            return RunLabels(", ".join(next(iter(keys))), labels)
    labels = [values_label(r.sweep_values) or r.gym_job_id for r in records]
    if len(set(labels)) < len(labels):
        labels = [os.path.basename(r.run_dir.rstrip("/")) if labels.count(label) > 1 else label
                  for label, r in zip(labels, records)]  # fmt: skip
    return RunLabels("RUN", labels)
