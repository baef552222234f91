"""The site's limits on what one user may have queued, as Slurm states them, and whether a
submission fits within them: pure rules over the text slurmctld answers (``site_limits`` in the
Slurm template asks it, in one script, before anything is written or queued).

Read from slurmctld itself, not the accounting database: ``scontrol show assoc_mgr`` answers on
the many sites whose login nodes do not name slurmdbd, and it states each limit with its use,
``MaxSubmitJobs=8(3)`` (a limit the association inherits is shown on it, with the user's use). A
job counts against the association of its user, account and partition (the user's association
without a partition when there is none for it), and against its QOS; array tasks count one each.
Only limits that make sbatch refuse are read: ``MaxJobs`` leaves jobs pending, which is no refusal.

A QOS's limits are slurmctld's too (``scontrol show assoc_mgr users=U flags=qos``: its
``GrpSubmitJobs`` with its use, and the user's ``MaxSubmitJobsPU`` once they have had a job in it);
which QOS a job gets without ``--qos``, and a per-user limit slurmctld does not state yet, only
the accounting database says (``sacctmgr``, where the login node reaches it). Without it, a job
without ``--qos`` is weighed against its association's limits only. Not read: a partition's QOS,
``MaxSubmitJobsPerAccount``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# Slurm prints an unset limit as "N" (or nothing); a set one as "LIMIT(USED)".
_LIMIT_RE = re.compile(r"\b(MaxSubmitJobs|GrpSubmitJobs)=(\d+)\((\d+)\)")
_FIELD_RE = re.compile(r"\b(Account|UserName|Partition)=(\S*)")
_CLUSTER_RE = re.compile(r"\bClusterName=(\S+)")
_QOS_NAME_RE = re.compile(r"QOS=([^\s(]+)")
_QOS_GROUP_RE = re.compile(r"\bGrpSubmitJobs=(\d+)\((\d+)\)")
_QOS_USER_RE = re.compile(r"\bMaxSubmitJobsPU=(\d+)\((\d+)\)")
_MAX_ARRAY_RE = re.compile(r"^MaxArraySize\s*=\s*(\d+)\s*$", re.MULTILINE)
_ARRAY_PART_RE = re.compile(r"^(\d+)(?:-(\d+)(?::(\d+))?)?$")
# What is read of an answer: slurmctld's text, untrusted, and an association's record is short.
ANSWER_CAP = 256 * 1024


@dataclass(frozen=True)
class SubmitLimit:
    """One limit on jobs submitted at once: which, its value, and how many it counts already."""

    # Slurm's word: MaxSubmitJobs (the user's) or GrpSubmitJobs (everyone's in an account or a
    # QOS), MaxSubmitJobsPU (each user's in a QOS)
    name: str
    account: str  # whose association ("" for a QOS's limit)
    user: bool  # the user's own (else shared with the other users of the account or QOS)
    limit: int
    used: int
    qos: str | None = None  # a QOS's limit, not an association's

    def room(self) -> int:
        return max(0, self.limit - self.used)

    def describe(self) -> str:
        if self.qos is not None:
            whose = "per user" if self.user else "everyone's"
            return f"{self.name}={self.limit} of QOS {self.qos}, {whose}, {self.used} counted already"
        whose = "your association" if self.user else "the association every user of it shares"
        return f"{self.name}={self.limit} of {whose} in account {self.account}, {self.used} counted already"

    def wait_for(self) -> str:
        """Whose jobs must end before more fit."""
        if self.user:
            return "jobs of yours end"
        return f"jobs in QOS {self.qos} end" if self.qos is not None else f"jobs in account {self.account} end"


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


def cluster_name(answer: str) -> str | None:
    """The cluster the associations of ``scontrol show assoc_mgr`` are of."""
    found = _CLUSTER_RE.search(answer[:ANSWER_CAP])
    return found.group(1) if found else None


def default_qos(table: str, account: str, partition: str = "", cluster: str | None = None) -> str | None:
    """The QOS a job of ``account`` in ``partition`` gets without ``--qos``, from the user's
    associations as ``sacctmgr -nP show assoc where user=U format=Cluster,Account,Partition,QOS,
    DefaultQOS`` lists them (the partition's own association first): its default QOS, else its
    only allowed one, else Slurm's ``normal``. None when the table does not say (no accounting
    database answered)."""
    rows = []
    for line in table[:ANSWER_CAP].splitlines():
        fields = line.split("|")
        if len(fields) < 5 or fields[1].casefold() != account.casefold():
            continue
        if cluster is not None and fields[0].casefold() != cluster.casefold():
            continue
        rows.append(fields)
    if cluster is None and len({r[0].casefold() for r in rows}) > 1:
        return None  # the database serves several clusters and it is unknown which is this one
    own = [r for r in rows if r[2] and r[2].casefold() == partition.casefold()]
    chosen = own or [r for r in rows if not r[2]]
    if not chosen:
        return None
    allowed, default = [q for q in chosen[0][3].split(",") if q], chosen[0][4].strip()
    return default or (allowed[0] if len(allowed) == 1 else "normal")


def qos_limits(answer: str, table: str, qos: str, user: str = "") -> list[SubmitLimit]:
    """The submit limits of QOS ``qos`` for ``user`` (``name(uid)``): from slurmctld's record of
    it (``scontrol show assoc_mgr users=U qos=Q flags=qos``) its ``GrpSubmitJobs`` and the user's
    own ``MaxSubmitJobsPU``, with their use; a per-user limit slurmctld states for no entry of this
    user (none of their jobs in it yet: none counted) from another user's entry or from the
    accounting database's table (``sacctmgr -nP show qos format=Name,MaxSubmitPU``). Slurm's QOS
    names are not case-sensitive: a limit is named as slurmctld names the QOS."""
    record = next(
        (r for r in re.split(r"\n(?=QOS=)", answer[:ANSWER_CAP]) if _qos_name(r) == qos.casefold()),
        "",
    )
    name = _qos_name(record) or qos.casefold()
    own, _, rest = record.partition("Account Limits")
    users = rest.partition("User Limits")[2]
    limits = []
    shared = _QOS_GROUP_RE.search(own)
    if shared:
        limits.append(SubmitLimit("GrpSubmitJobs", "", False, int(shared.group(1)), int(shared.group(2)), name))
    entries = _user_entries(users)
    mine = next((text for header, text in entries if _is_user(header, user)), None)
    found = _QOS_USER_RE.search(mine) if mine is not None else None
    if found:
        limits.append(SubmitLimit("MaxSubmitJobsPU", "", True, int(found.group(1)), int(found.group(2)), name))
        return limits
    limit = next((int(f.group(1)) for _, text in entries if (f := _QOS_USER_RE.search(text))), None)
    if limit is None:
        limit = next(
            (
                int(cols[1])
                for cols in (line.split("|") for line in table[:ANSWER_CAP].splitlines())
                if len(cols) > 1 and cols[0].casefold() == qos.casefold() and cols[1].strip().isdigit()
            ),
            None,
        )
    if limit is not None:
        limits.append(SubmitLimit("MaxSubmitJobsPU", "", True, limit, 0, name))
    return limits


def _user_entries(block: str) -> list[tuple[str, str]]:
    """The ``User Limits`` block as (header, its lines): a header (``name(uid)``, or the uid where
    slurmctld knows no name) is a line with no ``=``."""
    entries: list[tuple[str, str]] = []
    for line in block.splitlines():
        text = line.strip()
        if not text:
            continue
        if "=" not in text:
            entries.append((text, ""))
        elif entries:
            entries[-1] = (entries[-1][0], entries[-1][1] + text + "\n")
    return entries


def _is_user(header: str, user: str) -> bool:
    """Whether a ``User Limits`` header names ``user`` (``name(uid)``)."""
    found = re.fullmatch(r"(.*)\((\d+)\)", user)
    name, uid = (found.group(1), found.group(2)) if found else (user, None)
    return bool(user) and header in {user, name, uid, f"{name}({uid})"}


def _qos_name(record: str) -> str | None:
    found = _QOS_NAME_RE.match(record.strip())
    return found.group(1).casefold() if found else None


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
