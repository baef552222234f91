"""Slurm's own value rules for the config models: its time grammar, the names and options that go
into a job's header, what a heterogeneous job refuses. Field validators as in ``rules.py``.

Light imports only (``api.py`` imports this module while it is being defined).
"""

from __future__ import annotations

import re
from typing import Any

SBATCH_OPTION_RE = re.compile(r"^[A-Za-z][A-Za-z0-9-]*$")
# Slurm's --time grammar: MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS.
# \Z, not $: "$" would let a trailing line break through into #SBATCH lines and comments.
WALLTIME_RE = re.compile(r"^(\d+|\d+:\d{1,2}|\d+:\d{1,2}:\d{1,2}|\d+-\d+|\d+-\d+:\d{1,2}|\d+-\d+:\d{1,2}:\d{1,2})\Z")
UNLIMITED_WALLTIMES = ("UNLIMITED", "INFINITE")

# sbatch options a heterogeneous job cannot take (Slurm refuses job arrays of heterogeneous jobs).
NOT_FOR_HETEROGENEOUS_JOBS = ("array",)


def slurm_word(cls: Any, v: str) -> str:
    """Account and partition names go into ``#SBATCH`` lines: one word, nothing else."""
    if not v or any(c.isspace() for c in v):
        raise ValueError(f"{v!r} is not a Slurm name; use one word without spaces")
    return v


def slurm_options(cls: Any, v: dict[str, str]) -> dict[str, str]:
    for key, value in v.items():
        if key.startswith("-"):
            raise ValueError(f"key {key!r}: write the option without dashes, e.g. {key.lstrip('-')!r}")
        if not SBATCH_OPTION_RE.match(key):
            raise ValueError(f"key {key!r} is not an sbatch option name (letters, digits, dashes)")
        if "\n" in value or "\r" in value:
            raise ValueError(f"{key}: the value contains a line break; write it on one line")
    return v


def optional_walltime(cls: Any, v: str | None) -> str | None:
    if v is None or v.upper() in UNLIMITED_WALLTIMES or WALLTIME_RE.match(v):
        return v
    raise ValueError(f"{v!r} is not a Slurm time; write it like '30' (minutes), '04:00:00' or '2-00:00:00'")


def walltime_seconds(v: str) -> int:
    """Seconds in a Slurm time ('MM', 'MM:SS', 'HH:MM:SS', 'D-HH', 'D-HH:MM', 'D-HH:MM:SS')."""
    if not WALLTIME_RE.match(v):
        raise ValueError(f"{v!r} is not a Slurm time")
    days, _, clock = v.rpartition("-")
    parts = [int(p) for p in clock.split(":")]
    if days:
        hours, minutes, seconds = (parts + [0, 0])[:3]
    elif len(parts) == 3:
        hours, minutes, seconds = parts
    else:
        hours, (minutes, seconds) = 0, (parts + [0])[:2]
    return ((int(days or 0) * 24 + hours) * 60 + minutes) * 60 + seconds


def optional_time_cap(cls: Any, v: str | None) -> str | None:
    """A finite, non-zero Slurm time (a cap cannot be 'UNLIMITED': leave it unset instead)."""
    if v is None:
        return v
    if not WALLTIME_RE.match(v):
        raise ValueError(f"{v!r} is not a Slurm time; write it like '30' (minutes), '48:00:00' or '2-00:00:00'")
    if walltime_seconds(v) == 0:
        raise ValueError(f"{v!r} is zero; give a positive time, or leave it unset for no cap")
    return v
