"""``gym eval submit -m key=a,b,c ...``: a sweep, one run per combination of the swept values.

Hydra's multirun grammar: a comma list (``a,b,c``), ``choice(a,b)``, ``range(start,stop[,step])``
and, for a config group next to the config file, ``glob(pattern)``; the combinations are the
cartesian product, in the order the keys were written. Each combination is composed and validated
like any config (``key=value`` overrides), and runs under its own run id; the sweep id groups them.
"""

from __future__ import annotations

import itertools
import math
import os
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from fractions import Fraction
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
    _refuse_repeated_keys(parsed)
    _refuse_too_many(parsed, Path(config_path))
    axes: list[tuple[str, list[str]]] = []
    for override in parsed:
        key = override.get_key_element()
        values = (
            _values_of(override, Path(config_path))
            if override.is_sweep_override()
            else [override.get_value_element_as_str()]
        )
        if not values:
            raise _no_value(override)
        axes.append((key, values))
    points: list[list[tuple[str, str]]] = [[]]
    for key, values in axes:
        points = [point + [(key, value)] for point in points for value in values]
    swept_keys = {key for key, values in axes if len(values) > 1 or _is_sweep(parsed, key)}
    return [
        SweepPoint(
            overrides=tuple(f"{key}={value}" for key, value in point),
            values=tuple((key.lstrip("+~"), value) for key, value in point if key in swept_keys),
        )
        for point in points
    ]


def _refuse_repeated_keys(parsed: list) -> None:
    """The same key twice would sweep it twice (or silently let the last win): one line, naming both."""
    seen: dict[str, str] = {}
    for override in parsed:
        key = override.get_key_element().lstrip("+~")
        if key in seen:
            raise UserError(
                f"-m: {key} is given twice ({seen[key]} and {override.input_line}); give each key once, with all its "
                f"values in one list (key=a,b,c)"
            )
        seen[key] = override.input_line


def _refuse_too_many(parsed: list, config_path: Path) -> None:
    """More than MAX_COMBINATIONS, counted arithmetically before any value is made: a range of
    10**12 values is refused at once, never enumerated."""
    total = 1
    for override in parsed:
        count = _count_of(override, config_path) if override.is_sweep_override() else 1
        if count == 0:
            raise _no_value(override)
        total *= count
    if total > MAX_COMBINATIONS:
        raise _too_many(total)


def _no_value(override: object) -> UserError:
    return UserError(f"-m {override.input_line}: sweeps over no value; give at least one")  # type: ignore[attr-defined]


def _too_many(total: int) -> UserError:
    count = str(total) if total < 10**15 else f"at least 10^{_floor_log10(total)}"
    return UserError(f"-m: {count} combinations (more than {MAX_COMBINATIONS}); sweep fewer values at once")


def _floor_log10(n: int) -> int:
    """floor(log10(n)) of a positive integer of any size (str() of one is refused past 4300 digits)."""
    guess = int((n.bit_length() - 1) * math.log10(2))
    return guess + 1 if 10 ** (guess + 1) <= n else guess


def _count_of(override: object, config_path: Path) -> int:
    """How many values a sweep override makes, without making them (1 for what cannot be counted
    here: enumerating it then reports its own problem)."""
    from hydra.core.override_parser.types import ChoiceSweep, Glob, RangeSweep

    value = override.value()  # type: ignore[attr-defined]
    if isinstance(value, RangeSweep):
        length = _range_length(value)
        if length is None:
            line = override.input_line  # type: ignore[attr-defined]
            raise UserError(f"-m {line}: a range needs finite numbers; give a finite start, stop and step")
        return length
    if isinstance(value, ChoiceSweep):
        return len(value.list)
    if isinstance(value, list):
        return len(value)
    if isinstance(value, Glob):
        return len(_values_of(override, config_path))
    return 1


def _range_length(sweep: object) -> int | None:
    """len(range(start, stop, step)) for Hydra's int or float ranges, by exact arithmetic; None
    for a range over infinity or NaN (which would never end)."""
    start, stop, step = sweep.start, sweep.stop, sweep.step  # type: ignore[attr-defined]
    try:
        lo, hi, by = Fraction(start), Fraction(stop), Fraction(step)
    except (OverflowError, ValueError):
        return None
    if by == 0:
        return 1  # enumerating it says so
    return max(0, math.ceil((hi - lo) / by))


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
    try:  # counted before (_refuse_too_many); the bound here is the belt to those braces
        values = list(itertools.islice(override.sweep_string_iterator(), MAX_COMBINATIONS + 1))  # type: ignore[attr-defined]
    except Exception as exc:  # noqa: BLE001 - Hydra raises several kinds; each is the user's input
        raise UserError(f"-m {override.input_line}: {_first_line(exc)}") from None  # type: ignore[attr-defined]
    if len(values) > MAX_COMBINATIONS:
        raise _too_many(len(values))
    return values


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
    share their keys: the header names the keys); the model where runs outside a sweep each
    evaluate a checkpoint of their own; otherwise each run's id, or its directory's name where
    copies of one run share an id. Keys are shown by their shortest telling suffixes."""
    names = short_keys([key for r in records for key in r.sweep_values])
    keys = {tuple(r.sweep_values) for r in records}
    if len(keys) == 1 and () not in keys:
        labels = [", ".join(r.sweep_values.values()) for r in records]
        if len(set(labels)) == len(labels):
            return RunLabels(", ".join(names[key] for key in next(iter(keys))), labels)
    models = [r.model for r in records]
    if not any(r.sweep_values for r in records) and None not in models and len(set(models)) == len(models) > 1:
        return RunLabels("model", [str(m) for m in models])  # runs submitted one by one, a checkpoint each
    labels = [short_values_label(r.sweep_values, names) or r.gym_job_id for r in records]
    if len(set(labels)) < len(labels):
        labels = [
            os.path.basename(r.run_dir.rstrip("/")) if labels.count(label) > 1 else label
            for label, r in zip(labels, records)
        ]
    return RunLabels("RUN", labels)


def runs_title(records: Sequence[SubmissionRecord], sweep_size: int | None) -> str:
    """What several runs are, for a table's or a page's title: ``Sweep S: 3 runs`` when they are
    one sweep's (``2 of its 3 runs`` when some are left out; ``sweep_size`` is the sweep's count of
    runs, None when unknown), else ``N runs``."""
    sweeps = {r.sweep_id for r in records}
    if len(sweeps) != 1 or None in sweeps:
        return f"{len(records)} run" + ("s" if len(records) != 1 else "")
    part = f"{len(records)} of its {sweep_size}" if sweep_size not in (None, len(records)) else str(len(records))
    return f"Sweep {next(iter(sweeps))}: {part} runs"


def short_keys(keys: Sequence[str]) -> dict[str, str]:
    """Each swept key by the shortest dotted suffix that no other key ends with: a table's column
    says ``temperature``, not ``services.policy.responses_create_params.temperature``."""
    parts = {key: key.split(".") for key in dict.fromkeys(keys)}
    names = {}
    for key, mine in parts.items():
        others = [theirs for other, theirs in parts.items() if other != key]
        n = next(
            (n for n in range(1, len(mine) + 1) if not any(theirs[-n:] == mine[-n:] for theirs in others)), len(mine)
        )
        names[key] = ".".join(mine[-n:])
    return names


def short_values_label(values: dict[str, str], names: dict[str, str]) -> str:
    """``model=/ckpt/step-100, limit=5``: a combination with its keys as ``short_keys`` shows them."""
    return ", ".join(f"{names.get(key, key)}={value}" for key, value in values.items())
