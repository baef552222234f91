"""The chain of jobs of a resumable benchmark, as its jobs record it in ``<job dir>/.gym/chain``.

Each job of the chain appends tab-separated records (written by ``templates/resume.sh.j2``):
``start ID EPOCH ROLLOUTS``, ``successor ID AFTER``, ``nosuccessor ID WHY``,
``verdict ID OUTCOME ELAPSED ROLLOUTS ACTION WHY`` and, when the chain stops, ``end STATE WHY``.
The submission record keeps only the first job id; everything later is read from here.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# Shell: the job ids a chain file names (started or queued), one a line; the file follows.
CHAIN_IDS_AWK = "awk -F'\\t' '$1 == \"start\" || $1 == \"successor\" {print $2}'"
# Shell: the id of the last job that started (empty without a chain); the file follows.
LATEST_STARTED_AWK = "awk -F'\\t' '$1 == \"start\" {id = $2} END {print id}'"

# The states an ``end`` record may give, as `gym eval status` words.
END_STATES = frozenset({"failed", "cancelled", "timed out", "succeeded"})


@dataclass(frozen=True)
class Verdict:
    job_id: str
    outcome: str
    elapsed: int
    rollouts: int
    action: str  # free | retry | stop
    why: str


@dataclass
class Chain:
    started: list[str] = field(default_factory=list)  # in order; a Slurm requeue repeats an id
    successors: dict[str, str] = field(default_factory=dict)  # job id -> the job queued to resume it
    no_successor: dict[str, str] = field(default_factory=dict)  # job id -> why none was queued
    verdicts: list[Verdict] = field(default_factory=list)
    end: tuple[str, str] | None = None  # (state, why)

    @property
    def latest(self) -> str | None:
        return self.started[-1] if self.started else None

    def job_ids(self, with_successor: bool = True) -> list[str]:
        """Every job of the chain once, in order, and the one queued to resume the latest."""
        ids: list[str] = []
        for job_id in self.started:
            if job_id not in ids:
                ids.append(job_id)
        pending = self.successors.get(self.latest or "")
        if with_successor and pending and pending not in ids and self.end is None:
            ids.append(pending)
        return ids

    def summary(self) -> str:
        """``resumed 2 time(s), 1 of them retries; 130s used by earlier jobs`` for the status detail."""
        resumes = [v for v in self.verdicts if v.action in ("free", "retry")]
        if not resumes:
            return ""
        retries = sum(1 for v in resumes if v.action == "retry")
        spent = sum(v.elapsed for v in self.verdicts)
        return f"resumed {len(resumes)} time(s), {retries} of them retries; {spent}s used by earlier jobs"


def parse_chain(text: str) -> Chain:
    chain = Chain()
    for line in text.splitlines():
        cols = line.split("\t")
        kind, rest = cols[0], cols[1:]
        if kind == "start" and rest:
            chain.started.append(rest[0])
        elif kind == "successor" and len(rest) >= 2:
            chain.successors[rest[1]] = rest[0]
        elif kind == "nosuccessor" and len(rest) >= 2:
            chain.no_successor[rest[0]] = rest[1]
        elif kind == "verdict" and len(rest) >= 6:
            job_id, outcome, elapsed, rollouts, action, why = rest[:6]
            chain.verdicts.append(Verdict(job_id, outcome, _int(elapsed), _int(rollouts), action, why))
        elif kind == "end" and len(rest) >= 2:
            chain.end = (rest[0], rest[1])
    return chain


def _int(text: str) -> int:
    return int(text) if text.strip().isdigit() else 0
