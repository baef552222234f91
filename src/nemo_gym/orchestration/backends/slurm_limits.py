"""The site's limits on what one user may have queued, as Slurm states them, and whether a
submission fits within them: pure rules over the text slurmctld answers (``site_limits`` in the
Slurm template asks it, in one script, before anything is written or queued).

Read from slurmctld itself, not the accounting database: ``scontrol show assoc_mgr`` answers on
the many sites whose login nodes do not name slurmdbd, and it states each limit with its use,
``MaxSubmitJobs=8(3)`` (a limit the association inherits is shown on it, with the user's use). Array
tasks count one each. Only limits that make sbatch refuse are read: ``MaxJobs`` leaves jobs
pending, which is no refusal.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# Slurm prints an unset limit as "N" (or nothing); a set one as "LIMIT(USED)".
_LIMIT_RE = re.compile(r"\b(MaxSubmitJobs|GrpSubmitJobs)=(\d+)\((\d+)\)")
_FIELD_RE = re.compile(r"\b(Account|UserName)=(\S*)")
_MAX_ARRAY_RE = re.compile(r"^MaxArraySize\s*=\s*(\d+)\s*$", re.MULTILINE)
# What is read of an answer: slurmctld's text, untrusted, and an association's record is short.
ANSWER_CAP = 256 * 1024


@dataclass(frozen=True)
class SubmitLimit:
    """One limit on jobs submitted at once: which, its value, and how many it counts already."""

    name: str  # Slurm's word: MaxSubmitJobs (the user's) or GrpSubmitJobs (everyone's in an account)
    account: str
    user: bool  # on the user's association (else the account's, shared with its other users)
    limit: int
    used: int

    def room(self) -> int:
        return max(0, self.limit - self.used)

    def describe(self) -> str:
        whose = "your association" if self.user else "the association every user of it shares"
        return f"{self.name}={self.limit} of {whose} in account {self.account}, {self.used} counted already"


def association_limits(answer: str, account: str) -> list[SubmitLimit]:
    """The submit limits of ``account``'s records in ``scontrol show assoc_mgr flags=assoc``: the
    user's association and the account's own."""
    limits = []
    for record in re.split(r"\n(?=ClusterName=)", answer[:ANSWER_CAP]):
        fields = dict(_FIELD_RE.findall(record))
        if fields.get("Account") != account:
            continue
        user = bool(fields.get("UserName"))
        for name, limit, used in _LIMIT_RE.findall(record):
            if name == "MaxSubmitJobs" and not user:
                continue  # an account's MaxSubmitJobs is its users' (inherited, shown on theirs)
            limits.append(SubmitLimit(name, account, user, int(limit), int(used)))
    return limits


def max_array_size(config_answer: str) -> int | None:
    """``MaxArraySize`` of ``scontrol show config`` (array indices run below it)."""
    found = _MAX_ARRAY_RE.search(config_answer[:ANSWER_CAP])
    return int(found.group(1)) if found else None


def first_exceeded(limits: list[SubmitLimit], needed: int) -> SubmitLimit | None:
    """The tightest limit ``needed`` more jobs would break, if any."""
    exceeded = [limit for limit in limits if needed > limit.room()]
    return min(exceeded, key=SubmitLimit.room) if exceeded else None
