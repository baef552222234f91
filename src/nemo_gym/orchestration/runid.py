"""Run ids: ``gym-job-YYYYMMDDTHHMMSSZ-<6 hex>``, sortable by time and unique per submit."""

from __future__ import annotations

import secrets
from datetime import datetime, timezone


def new_run_id(now: datetime | None = None) -> str:
    moment = (now or datetime.now(timezone.utc)).astimezone(timezone.utc)
    # 24 random bits: two submits in the same second collide once in ~16 million.
    return f"gym-job-{moment:%Y%m%dT%H%M%SZ}-{secrets.token_hex(3)}"
