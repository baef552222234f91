"""The site's limits on what one user may have queued, as Slurm states them, and whether a
submission fits within them: pure rules over the text slurmctld answers (``site_limits`` in the
Slurm template asks it, in one script, before anything is written or queued).

Read from slurmctld itself, not the accounting database: ``scontrol show assoc_mgr`` answers on
the many sites whose login nodes do not name slurmdbd, and it states each limit with its use,
``MaxSubmitJobs=8(3)`` (a limit the association inherits is shown on it, with the user's use). A
job counts against the association of its user, account and partition (the user's association
without a partition when there is none for it); array tasks count one each. Only limits that make
sbatch refuse are read: ``MaxJobs`` leaves jobs pending, which is no refusal. Not read yet: a
QOS's own ``MaxSubmitJobsPerUser`` (its name is not in the association's record).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# Slurm prints an unset limit as "N" (or nothing); a set one as "LIMIT(USED)".
_LIMIT_RE = re.compile(r"\b(MaxSubmitJobs|GrpSubmitJobs)=(\d+)\((\d+)\)")
_FIELD_RE = re.compile(r"\b(Account|UserName|Partition)=(\S*)")
_MAX_ARRAY_RE = re.compile(r"^MaxArraySize\s*=\s*(\d+)\s*$", re.MULTILINE)
_ARRAY_PART_RE = re.compile(r"^(\d+)(?:-(\d+)(?::(\d+))?)?$")
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

    def wait_for(self) -> str:
        """Whose jobs must end before more fit."""
        return "jobs of yours end" if self.user else f"jobs in account {self.account} end"


def association_limits(answer: str, account: str, partition: str = "") -> list[SubmitLimit]:
    """The submit limits that apply to a job of ``account`` in ``partition`` in ``scontrol show
    assoc_mgr flags=assoc``: its user association's (the partition's own when there is one, else
    the one without a partition) and the account's own. Slurm's account names are not case-sensitive."""
    users: list[tuple[str, str]] = []  # (partition, record)
    accounts: list[tuple[str, str]] = []
    for record in re.split(r"\n(?=ClusterName=)", answer[:ANSWER_CAP]):
        fields = dict(_FIELD_RE.findall(record))
        if fields.get("Account", "").casefold() != account.casefold():
            continue
        (users if fields.get("UserName") else accounts).append((fields.get("Partition", ""), record))
    own = [record for part, record in users if part and part.casefold() == partition.casefold()]
    users_records = own or [record for part, record in users if not part]
    limits = []
    for user, records in ((True, users_records), (False, [record for part, record in accounts if not part])):
        for record in records:
            for name, limit, used in _LIMIT_RE.findall(record):
                if name == "MaxSubmitJobs" and not user:
                    continue  # an account's MaxSubmitJobs is its users' (inherited, shown on theirs)
                limits.append(SubmitLimit(name, account, user, int(limit), int(used)))
    return limits


def max_array_size(config_answer: str) -> int | None:
    """``MaxArraySize`` of ``scontrol show config`` (an array's indices must be below it)."""
    found = _MAX_ARRAY_RE.search(config_answer[:ANSWER_CAP])
    return int(found.group(1)) if found else None


@dataclass(frozen=True)
class ArrayTasks:
    """What an ``--array`` value asks for: how many tasks (each counts as a job), its highest index."""

    count: int
    highest: int


def array_tasks(spec: str) -> ArrayTasks | None:
    """``0-15``, ``1,3,5-7``, ``0-99:4%8`` (the throttle after ``%`` counts nothing); None when it
    is not a value Slurm takes (sbatch will say so). Overlapping ranges count twice: a bound."""
    count, highest = 0, -1
    for part in spec.split("%", 1)[0].split(","):
        found = _ARRAY_PART_RE.match(part.strip())
        if not found:
            return None
        first = int(found.group(1))
        last = int(found.group(2) or first)
        every = int(found.group(3) or 1)
        if last < first or every < 1:
            return None
        count += (last - first) // every + 1
        highest = max(highest, first + (last - first) // every * every)
    return ArrayTasks(count, highest)
