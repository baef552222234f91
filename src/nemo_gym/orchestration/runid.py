"""Run ids: ``gym-job-YYYYMMDDTHHMMSSZ-<6 hex>``, sortable by time and unique per submit."""

from __future__ import annotations

import re
import secrets
from datetime import datetime, timezone

# The one shape of the ids we make (and NeMo Gym 0.7.0 makes): an id read back (a record, the
# index, a sweep's record) becomes part of a file name only once it matches.
RUN_ID_RE = re.compile(r"gym-job-[0-9]{8}T[0-9]{6}Z-[0-9a-f]{6}")
SWEEP_ID_RE = re.compile(r"gym-sweep-[0-9]{8}T[0-9]{6}Z-[0-9a-f]{6}")


def id_problem(value: object, pattern: re.Pattern[str], what: str) -> str | None:
    """Why ``value`` is not an id of ``pattern``'s shape (shown bounded), or None."""
    if isinstance(value, str) and pattern.fullmatch(value):
        return None
    shown = repr(value)[:60] + ("..." if len(repr(value)) > 60 else "")
    return f"{shown} is not a {what} (gym-{'job' if 'job' in pattern.pattern else 'sweep'}-YYYYMMDDTHHMMSSZ-xxxxxx)"


def new_run_id(now: datetime | None = None) -> str:
    moment = (now or datetime.now(timezone.utc)).astimezone(timezone.utc)
    # 24 random bits: two submits in the same second collide once in ~16 million.
    return f"gym-job-{moment:%Y%m%dT%H%M%SZ}-{secrets.token_hex(3)}"


def checked_id(value: str, pattern: re.Pattern[str], what: str) -> str:
    """``value`` when it is an id of ``pattern``'s shape; else ValueError (a validator's refusal)."""
    problem = id_problem(value, pattern, what)
    if problem:
        raise ValueError(problem)
    return value
