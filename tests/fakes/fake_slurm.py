"""A fake Slurm command line for tests: sbatch, scontrol, scancel, sacct and squeue.

Run as ``python fake_slurm.py COMMAND ARGS...``. Every command reads and rewrites one JSON state
file, named by $FAKE_SLURM_STATE, under an exclusive lock, and appends its argv to the call log
kept in that file. Nothing is scheduled and no script runs: tests move jobs between states with
``FakeCluster`` (cluster.py), which edits the same file through ``StateFile``.

Output follows Slurm 22.05-24.x, from its sources: src/api/job_info.c (scontrol's job record),
src/scancel/scancel.c, src/sacct/options.c, src/squeue. Where Slurm and a test's wish differ, the
fake follows Slurm by default and offers the other behaviour as a switch in the state.

Stdlib only: it runs under whatever interpreter the wrapper scripts name.
"""

from __future__ import annotations

import contextlib
import fcntl
import grp
import json
import os
import pwd
import re
import socket
import sys
import time
from collections.abc import Callable, Iterator

STATE_ENV = "FAKE_SLURM_STATE"
COMMANDS = ("sbatch", "scontrol", "scancel", "sacct", "squeue")

# Job states by what the commands do with them.
CANCELLABLE_STATES = ("PENDING", "RUNNING", "SUSPENDED", "CONFIGURING", "RESIZING", "STOPPED", "REQUEUED")
STARTED_STATES = ("RUNNING", "SUSPENDED", "CONFIGURING", "RESIZING", "STOPPED", "COMPLETING")
ENDED_STATES = (
    "COMPLETED",
    "CANCELLED",
    "FAILED",
    "TIMEOUT",
    "NODE_FAIL",
    "PREEMPTED",
    "BOOT_FAIL",
    "DEADLINE",
    "OUT_OF_MEMORY",
)
ALL_STATES = (*CANCELLABLE_STATES, "COMPLETING", *ENDED_STATES)
# squeue's default filter: what is "in the queue".
QUEUE_STATES = ("PENDING", "RUNNING", "SUSPENDED", "CONFIGURING", "COMPLETING", "RESIZING", "STOPPED", "REQUEUED")

# job_state_reason_string() of the reason slurmctld sets when a job ends this way.
DEFAULT_END_REASONS = {
    "FAILED": "NonZeroExitCode",
    "TIMEOUT": "TimeLimit",
    "NODE_FAIL": "NodeDown",
    "OUT_OF_MEMORY": "OutOfMemory",
    "DEADLINE": "DeadLine",
}
DEFAULT_END_EXIT_CODES = {"FAILED": "1:0"}

COMPACT_STATES = {
    "PENDING": "PD",
    "RUNNING": "R",
    "SUSPENDED": "S",
    "COMPLETING": "CG",
    "COMPLETED": "CD",
    "CONFIGURING": "CF",
    "CANCELLED": "CA",
    "FAILED": "F",
    "TIMEOUT": "TO",
    "PREEMPTED": "PR",
    "NODE_FAIL": "NF",
    "BOOT_FAIL": "BF",
    "DEADLINE": "DL",
    "OUT_OF_MEMORY": "OOM",
    "REQUEUED": "RQ",
    "RESIZING": "RS",
    "STOPPED": "ST",
}

INVALID_JOB_ID = "Invalid job id specified"
ALREADY_DONE = "Job/step already completing or completed"
SUBMIT_LIMIT_REFUSAL = "Job violates accounting/QOS policy (job submit limit, user's size and/or time limits)"
PERMISSION_DENIED = "Access/permission denied"  # another user's job
DEFAULT_REFUSAL = "Batch job submission failed: Invalid account or account/partition combination specified"


def default_state(first_id: int = 100) -> dict:
    return {
        "next_id": first_id,
        "jobs": {},
        "accounting": False,
        "slurmdbd_down": False,
        "slurmctld_down": False,
        "strict_scancel": False,
        "cancel_denied": [],
        "submit_limits": {},
        "cluster_name": None,
        "refusals": [],
        "noise": {"stdout": [], "stderr": []},
        "calls": [],
    }


# -- the state file ----------------------------------------------------------------------------------


class StateFile:
    """The fake cluster's whole state: one JSON file, read-modify-written under a lock file.

    The lock is a separate file because the state is replaced by rename, which gives a new inode:
    a process killed mid-write (a lost connection) leaves the old state whole.
    """

    def __init__(self, path: str | os.PathLike[str]):
        self.path = os.fspath(path)
        self.lock_path = self.path + ".lock"

    def create(self, first_id: int = 100) -> None:
        with self.edit(create=True) as state:
            state.clear()
            state.update(default_state(first_id))

    @contextlib.contextmanager
    def edit(self, create: bool = False) -> Iterator[dict]:
        with self._locked(fcntl.LOCK_EX):
            state = self._load(create)
            yield state
            self._save(state)

    def read(self) -> dict:
        with self._locked(fcntl.LOCK_SH):
            return self._load(create=False)

    @contextlib.contextmanager
    def _locked(self, mode: int) -> Iterator[None]:
        with open(self.lock_path, "a") as lock:
            fcntl.flock(lock, mode)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def _load(self, create: bool) -> dict:
        try:
            with open(self.path) as fh:
                return json.load(fh)
        except FileNotFoundError:
            if create:
                return default_state()
            raise

    def _save(self, state: dict) -> None:
        tmp = f"{self.path}.{os.getpid()}.tmp"  # unique: writers hold the lock
        with open(tmp, "w") as fh:
            json.dump(state, fh, indent=1, sort_keys=True)
        os.replace(tmp, self.path)


# -- replies and small formatters ---------------------------------------------------------------------


class Reply:
    """What a command prints and its exit status. (No dataclass: every fake call pays the import.)"""

    def __init__(self, code: int = 0):
        self.stdout = ""
        self.stderr = ""
        self.code = code

    def out(self, line: str) -> None:
        self.stdout += line + "\n"

    def err(self, line: str) -> None:
        self.stderr += line + "\n"


def format_minutes(minutes: int | None) -> str:
    """Slurm's mins2time_str: a time limit as [D-]HH:MM:SS, or UNLIMITED."""
    if minutes is None:
        return "UNLIMITED"
    return format_duration(minutes * 60)


def format_duration(seconds: int) -> str:
    """Slurm's secs2time_str: [D-]HH:MM:SS."""
    days, rest = divmod(int(seconds), 86400)
    hours, rest = divmod(rest, 3600)
    mins, secs = divmod(rest, 60)
    clock = f"{hours:02d}:{mins:02d}:{secs:02d}"
    return f"{days}-{clock}" if days else clock


def format_squeue_time(seconds: int) -> str:
    """squeue's TIME column: M:SS, H:MM:SS or D-HH:MM:SS."""
    days, rest = divmod(int(seconds), 86400)
    hours, rest = divmod(rest, 3600)
    mins, secs = divmod(rest, 60)
    if days:
        return f"{days}-{hours:02d}:{mins:02d}:{secs:02d}"
    if hours:
        return f"{hours}:{mins:02d}:{secs:02d}"
    return f"{mins}:{secs:02d}"


def format_timestamp(epoch: float | None) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(epoch)) if epoch else "Unknown"


def parse_time_limit(text: str) -> int | None:
    """Minutes from sbatch's --time forms: M, M:S, H:M:S, D-H, D-H:M, D-H:M:S; None = UNLIMITED."""
    text = text.strip()
    if text.upper() in ("UNLIMITED", "INFINITE", "-1"):
        return None
    days = 0
    if "-" in text:
        day_text, text = text.split("-", 1)
        days = int(day_text)
        parts = [int(p) for p in text.split(":")] + [0, 0]
        hours, mins, secs = parts[:3]
    else:
        parts = [int(p) for p in text.split(":")]
        if len(parts) == 1:
            hours, mins, secs = 0, parts[0], 0
        elif len(parts) == 2:
            hours, (mins, secs) = 0, parts
        else:
            hours, mins, secs = parts[:3]
    total_seconds = ((days * 24 + hours) * 60 + mins) * 60 + secs
    return -(-total_seconds // 60)  # Slurm rounds seconds up to the minute


def expand_hostlist(text: str) -> list[str]:
    """n[1-3,07],gpu -> n1 n2 n3 n07 gpu (one bracket per name, as test clusters use)."""
    names = []
    for item in re.findall(r"[^,\[]+(?:\[[^\]]*\])?[^,]*", text):
        match = re.fullmatch(r"(.*)\[([^\]]*)\](.*)", item)
        if not match:
            names.append(item)
            continue
        prefix, ranges, suffix = match.groups()
        for part in ranges.split(","):
            low, _, high = part.partition("-")
            for number in range(int(low), int(high or low) + 1):
                names.append(f"{prefix}{number:0{len(low)}d}{suffix}")
    return names


def user_and_group() -> tuple[str, int, str, int]:
    uid, gid = os.getuid(), os.getgid()
    try:
        user = pwd.getpwuid(uid).pw_name
    except KeyError:
        user = str(uid)
    try:
        group = grp.getgrgid(gid).gr_name
    except KeyError:
        group = str(gid)
    return user, uid, group, gid


def known_job(state: dict, job_id: str) -> dict | None:
    """The job as slurmctld sees it: unknown once forgotten (MinJobAge passed)."""
    job = state["jobs"].get(job_id)
    return None if job is None or job.get("forgotten") else job


def parse_options(
    args: list[str], aliases: dict[str, str], with_value: set[str], *, stop_at_operand: bool = False
) -> tuple[dict[str, str], list[str]]:
    """getopt-like: --name=V, --name V, -xV, -x V and bundled flags (-XnP). Keys are long names
    without dashes (aliases map short ones); flags get ''. With stop_at_operand, everything from
    the first operand on is returned as operands (sbatch's script and its arguments)."""
    options: dict[str, str] = {}
    operands: list[str] = []
    i = 0
    while i < len(args):
        if args[i].startswith("-") and args[i] != "-":
            found, i = _read_option(args, i, aliases, with_value)
            options.update(found)
        elif stop_at_operand:
            return options, operands + args[i:]
        else:
            operands.append(args[i])
            i += 1
    return options, operands


def _read_option(args: list[str], i: int, aliases: dict[str, str], with_value: set[str]) -> tuple[dict[str, str], int]:
    """The option at args[i] (several, for bundled flags), and the index after it."""
    arg = args[i]
    long_form = arg.startswith("--")
    name, value = (arg.partition("=")[0], arg.partition("=")[2]) if long_form else (arg[:2], arg[2:])
    has_value = "=" in arg if long_form else bool(value)
    key = aliases.get(name, name.lstrip("-"))
    if has_value and not long_form and key not in with_value:
        return {aliases.get("-" + letter, letter): "" for letter in arg[1:]}, i + 1
    if not has_value and key in with_value and i + 1 < len(args):
        return {key: args[i + 1]}, i + 2
    return {key: value}, i + 1


# -- sbatch -----------------------------------------------------------------------------------------------

SBATCH_ALIASES = {
    "-A": "account",
    "-a": "array",
    "-B": "extra-node-info",
    "-b": "begin",
    "-C": "constraint",
    "-c": "cpus-per-task",
    "-D": "chdir",
    "-d": "dependency",
    "-e": "error",
    "-F": "nodefile",
    "-G": "gpus",
    "-H": "hold",
    "-i": "input",
    "-J": "job-name",
    "-L": "licenses",
    "-M": "clusters",
    "-m": "distribution",
    "-N": "nodes",
    "-n": "ntasks",
    "-o": "output",
    "-p": "partition",
    "-q": "qos",
    "-S": "core-spec",
    "-t": "time",
    "-v": "verbose",
    "-W": "wait",
    "-w": "nodelist",
    "-x": "exclude",
}
SBATCH_WITH_VALUE = {
    "account",
    "array",
    "begin",
    "chdir",
    "clusters",
    "comment",
    "constraint",
    "core-spec",
    "cpus-per-task",
    "dependency",
    "distribution",
    "error",
    "exclude",
    "export",
    "extra-node-info",
    "gpus",
    "gpus-per-node",
    "gres",
    "input",
    "job-name",
    "kill-on-invalid-dep",
    "licenses",
    "mail-type",
    "mail-user",
    "mem",
    "mem-per-cpu",
    "mem-per-gpu",
    "nodefile",
    "nodelist",
    "nodes",
    "ntasks",
    "ntasks-per-node",
    "output",
    "partition",
    "qos",
    "reservation",
    "signal",
    "time",
    "time-min",
    "wckey",
    "wrap",
}


def split_sbatch_args(args: list[str]) -> tuple[dict[str, str], list[str]]:
    """Options before the script (long names, '' for flags), and the script with its arguments."""
    return parse_options(args, SBATCH_ALIASES, SBATCH_WITH_VALUE, stop_at_operand=True)


def script_directives(text: str) -> dict[str, str]:
    """#SBATCH options at the top of a script; sbatch stops at the first command line."""
    lines = []
    for line in text.splitlines()[1:] if text.startswith("#!") else text.splitlines():
        stripped = line.strip()
        if stripped.startswith("#SBATCH"):
            lines += stripped[len("#SBATCH") :].split()
        elif stripped and not stripped.startswith("#"):
            break
    options, _ = split_sbatch_args(lines)
    return options


def refusal_for(state: dict, script_path: str) -> str | None:
    for rule in state["refusals"]:
        if rule["times"] == 0 or rule["match"] not in script_path:
            continue
        if rule["times"] is not None:
            rule["times"] -= 1
        return rule["message"]
    return None


def sbatch(state: dict, args: list[str]) -> Reply:
    reply = Reply()
    for line in state["noise"]["stdout"]:
        reply.out(line)
    for line in state["noise"]["stderr"]:
        reply.err(line)
    options, rest = split_sbatch_args(args)
    script_path, script_text, script_args = read_batch_script(options, rest, reply)
    if reply.code:
        return reply
    refusal = refusal_for(state, script_path)
    if refusal is not None:
        reply.err(f"sbatch: error: {refusal}")
        reply.code = 1
        return reply
    settings = {**script_directives(script_text), **options}
    limit = state.get("submit_limits", {}).get(settings.get("account") or "")
    if limit is not None and submitted_jobs(state, settings.get("account") or "") >= limit:
        # What slurmctld says with AccountingStorageEnforce=limits and the association's MaxSubmitJobs.
        reply.err("sbatch: error: AssocMaxSubmitJobLimit")
        reply.err(f"sbatch: error: Batch job submission failed: {SUBMIT_LIMIT_REFUSAL}")
        reply.code = 1
        return reply
    job = new_job(state, script_path, script_args, settings)
    if "parsable" in options:
        cluster = state.get("cluster_name")
        reply.out(f"{job['id']};{cluster}" if cluster else job["id"])
    else:
        reply.out(f"Submitted batch job {job['id']}")
    return reply


def submitted_jobs(state: dict, account: str) -> int:
    """The jobs an association's MaxSubmitJobs counts: pending or running, in the account."""
    return sum(1 for j in state["jobs"].values() if j["state"] in QUEUE_STATES and (j["account"] or "") == account)


def read_batch_script(options: dict[str, str], rest: list[str], reply: Reply) -> tuple[str, str, list[str]]:
    if "wrap" in options:
        return "wrap", f"#!/bin/sh\n# This script was created by sbatch --wrap.\n\n{options['wrap']}\n", rest
    if not rest:
        reply.err("sbatch: error: Batch script is empty!")  # what sbatch says to an empty stdin
        reply.code = 1
        return "", "", []
    path = os.path.abspath(rest[0])
    try:
        with open(path) as fh:
            return path, fh.read(), rest[1:]
    except OSError:
        reply.err(f"sbatch: error: Unable to open file {rest[0]}")
        reply.code = 1
        return "", "", []


def new_job(state: dict, script_path: str, script_args: list[str], settings: dict[str, str]) -> dict:
    job_id = str(state["next_id"])
    state["next_id"] += 1
    workdir = settings.get("chdir") or os.getcwd()
    dependency = settings.get("dependency") or None
    time_text = settings.get("time")
    job = {
        "id": job_id,
        "name": settings.get("job-name") or os.path.basename(script_path),
        "state": "PENDING",
        # As sbatch --hold does: pending, held by its user until scontrol release.
        "reason": "JobHeldUser" if "hold" in settings else "Dependency" if dependency else "None",
        "dependency": dependency,
        "exit_code": "0:0",
        "restarts": 0,
        "time_limit": format_minutes(parse_time_limit(time_text)) if time_text else "UNLIMITED",
        "account": settings.get("account") or None,
        "partition": settings.get("partition") or "debug",
        "nodes": None,
        "script": script_path,
        "args": script_args,
        "options": settings,
        "workdir": workdir,
        "stdout": stdio_path(settings.get("output"), workdir, job_id),
        "stderr": stdio_path(settings.get("error") or settings.get("output"), workdir, job_id),
        "submit_host": socket.gethostname(),
        "submit_pid": os.getppid(),
        "submit_time": time.time(),
        "start_time": None,
        "end_time": None,
        "cancelled_by": None,
        "forgotten": False,
    }
    state["jobs"][job_id] = job
    return job


def stdio_path(pattern: str | None, workdir: str, job_id: str) -> str:
    path = (pattern or "slurm-%j.out").replace("%j", job_id)
    return path if path.startswith("/") else os.path.join(workdir, path)


# -- scontrol --------------------------------------------------------------------------------------------


def scontrol(state: dict, args: list[str]) -> Reply:
    options, words = parse_options(args, {"-o": "oneliner", "-Q": "quiet", "-d": "details", "-a": "all"}, set())
    one_liner, quiet = "oneliner" in options, "quiet" in options
    if words[:1] == ["ping"]:
        return ping(state)
    if state.get("slurmctld_down"):
        # src/common/slurm_protocol_api.c: every RPC to a controller that does not listen.
        reply = Reply(code=1)
        reply.err("slurm_load_jobs error: Unable to contact slurm controller (connect failure)")
        return reply
    if words[:2] == ["show", "job"]:
        return show_jobs(state, words[2:], one_liner, quiet)
    if words[:2] == ["show", "hostnames"]:
        return show_hostnames(words[2:])
    if words[:1] == ["release"]:
        return release_jobs(state, words[1:])
    if words[:2] == ["show", "assoc_mgr"]:
        return show_associations(state, words[2:])
    reply = Reply(code=1)
    reply.err(f"invalid keyword: {' '.join(words) or '(none)'}")
    return reply


def ping(state: dict) -> Reply:
    """``scontrol ping`` (src/scontrol/scontrol.c): UP and 0, or DOWN, its banner and 1."""
    reply = Reply(code=1 if state.get("slurmctld_down") else 0)
    if not state.get("slurmctld_down"):
        reply.out("Slurmctld(primary) at fake-ctl is UP")
        return reply
    for line in (
        "Slurmctld(primary) at fake-ctl is DOWN",
        "*" * 41,
        "** RESTORE SLURMCTLD DAEMON TO SERVICE **",
        "*" * 41,
    ):
        reply.out(line)
    return reply


def show_associations(state: dict, words: list[str]) -> Reply:
    """``scontrol show assoc_mgr users=U accounts=A flags=assoc``: the user's association in each
    limited account (src/scontrol/info_assoc_mgr.c: a set limit prints as LIMIT(USED))."""
    filters = dict(word.split("=", 1) for word in words if "=" in word)
    user = filters.get("users", "root")
    reply = Reply()
    reply.out("Current Association Manager state\n\nAssociation Records\n")
    for account in filters.get("accounts", "").split(","):
        limit = state.get("submit_limits", {}).get(account)
        if limit is None:
            continue
        used = submitted_jobs(state, account)
        reply.out(f"ClusterName=fake Account={account} UserName= Partition= Priority=0 ID=3")
        reply.out("    GrpJobs=N(0) GrpJobsAccrue=N(0)")
        reply.out(f"    GrpSubmitJobs=N({used}) GrpWall=N(0.00)")
        reply.out(f"    MaxJobs= MaxJobsAccrue= MaxSubmitJobs={limit}({used}) MaxWallPJ=")
        reply.out(f"ClusterName=fake Account={account} UserName={user}(0) Partition= Priority=0 ID=4")
        reply.out("    GrpJobs=N(0) GrpJobsAccrue=N(0)")
        reply.out(f"    GrpSubmitJobs=N({used}) GrpWall=N(0.00)")
        reply.out(f"    MaxJobs= MaxJobsAccrue= MaxSubmitJobs={limit}({used}) MaxWallPJ=")
    return reply


def release_jobs(state: dict, words: list[str]) -> Reply:
    """``scontrol release ID[,ID...]``: a held job may start (it stays pending until set running)."""
    reply = Reply()
    for job_id in ",".join(words).split(","):
        job = known_job(state, job_id)
        if job is None:
            reply.err(f"slurm_release error: Invalid job id specified ({job_id})")
            reply.code = 1
        elif job["reason"] == "JobHeldUser":
            job["reason"] = "Dependency" if job["dependency"] else "None"
    return reply


def show_jobs(state: dict, ids: list[str], one_liner: bool, quiet: bool) -> Reply:
    reply = Reply()
    if ids:
        job = known_job(state, ids[0])
        if job is None:
            reply.code = 1
            if not quiet:
                reply.err(f"slurm_load_jobs error: {INVALID_JOB_ID}")
            return reply
        jobs = [job]
    else:
        jobs = [j for j in state["jobs"].values() if not j.get("forgotten")]
        if not jobs:
            reply.out("No jobs in the system")
    for job in jobs:
        groups = [" ".join(group) for group in job_record(job)]
        reply.stdout += " ".join(groups) + "\n" if one_liner else "\n   ".join(groups) + "\n\n"
    return reply


def job_record(job: dict) -> list[list[str]]:
    """The fields of `scontrol show job`, grouped by the lines of its multi-line form (22.05)."""
    user, uid, group, gid = user_and_group()
    now = time.time()
    started, ended = job["start_time"], job["end_time"]
    run_time = (ended or now) - started if started and job["state"] != "PENDING" else 0
    nodes = job["nodes"] if started else None
    dependency = f"{job['dependency']}(unfulfilled)" if job["dependency"] and job["state"] == "PENDING" else "(null)"
    return [
        [f"JobId={job['id']}", f"JobName={job['name']}"],
        [f"UserId={user}({uid})", f"GroupId={group}({gid})", "MCS_label=N/A"],
        ["Priority=4294901757", "Nice=0", f"Account={job['account'] or '(null)'}", "QOS=normal"],
        [f"JobState={job['state']}", f"Reason={job['reason']}", f"Dependency={dependency}"],
        ["Requeue=1", f"Restarts={job['restarts']}", "BatchFlag=1", "Reboot=0", f"ExitCode={job['exit_code']}"],
        [f"RunTime={format_duration(run_time)}", f"TimeLimit={job['time_limit']}", "TimeMin=N/A"],
        [
            f"SubmitTime={format_timestamp(job['submit_time'])}",
            f"EligibleTime={format_timestamp(None if job['dependency'] else job['submit_time'])}",
        ],
        [f"AccrueTime={format_timestamp(job['submit_time'])}"],
        [f"StartTime={format_timestamp(started)}", f"EndTime={format_timestamp(ended)}", "Deadline=N/A"],
        [
            "SuspendTime=None",
            "SecsPreSuspend=0",
            f"LastSchedEval={format_timestamp(job['submit_time'])}",
            "Scheduler=Main",
        ],
        [f"Partition={job['partition']}", f"AllocNode:Sid={job['submit_host']}:{job['submit_pid']}"],
        ["ReqNodeList=(null)", "ExcNodeList=(null)"],
        [f"NodeList={nodes or '(null)'}"],
        *([[f"BatchHost={expand_hostlist(nodes)[0]}"]] if nodes else []),
        ["NumNodes=1", "NumCPUs=1", "NumTasks=1", "CPUs/Task=1", "ReqB:S:C:T=0:0:*:*"],
        ["TRES=cpu=1,node=1,billing=1"],
        ["Socks/Node=*", "NtasksPerN:B:S:C=0:0:*:*", "CoreSpec=*"],
        ["MinCPUsNode=1", "MinMemoryNode=0", "MinTmpDiskNode=0"],
        ["Features=(null)", "DelayBoot=00:00:00"],
        ["OverSubscribe=OK", "Contiguous=0", "Licenses=(null)", "Network=(null)"],
        [f"Command={job['script']}"],
        [f"WorkDir={job['workdir']}"],
        [f"StdErr={job['stderr']}"],
        ["StdIn=/dev/null"],
        [f"StdOut={job['stdout']}"],
        ["Power="],
    ]


def show_hostnames(words: list[str]) -> Reply:
    reply = Reply()
    hostlist = words[0] if words else os.environ.get("SLURM_JOB_NODELIST", "")
    if not hostlist:
        reply.err("scontrol: error: host list is empty")
        reply.code = 1
        return reply
    for name in expand_hostlist(hostlist):
        reply.out(name)
    return reply


# -- scancel ---------------------------------------------------------------------------------------------

SCANCEL_ALIASES = {
    "-s": "signal",
    "-n": "name",
    "--jobname": "name",
    "-p": "partition",
    "-u": "user",
    "-A": "account",
    "-q": "qos",
    "-t": "state",
    "-w": "nodelist",
    "-M": "clusters",
    "-R": "reservation",
    "-v": "verbose",
    "-Q": "quiet",
    "-b": "batch",
    "-f": "full",
    "-H": "hurry",
    "-i": "interactive",
}
SCANCEL_WITH_VALUE = {
    "signal",
    "name",
    "partition",
    "user",
    "account",
    "qos",
    "state",
    "nodelist",
    "clusters",
    "reservation",
    "sibling",
    "wckey",
}


def scancel(state: dict, args: list[str]) -> Reply:
    """Plain `scancel ID` is silent about a job that ended or that Slurm forgot, and exits 0: that
    is Slurm since 17.11 (_cancel_job_id ignores ESLURM_ALREADY_DONE and ESLURM_INVALID_JOB_ID for
    a kill). `strict_scancel` in the state makes both an error, as older Slurm and site wrappers do."""
    reply = Reply()
    options, operands = parse_options(args, SCANCEL_ALIASES, SCANCEL_WITH_VALUE)
    ids = [i for operand in operands for i in operand.split(",") if i]
    if not ids:
        reply.err("scancel: error: No job identification provided")
        reply.code = 1
        return reply
    for job_id in ids:
        cancel_one(state, job_id, reply, options)
    return reply


def cancel_one(state: dict, job_id: str, reply: Reply, options: dict[str, str]) -> None:
    if not job_id.isdigit():
        reply.err(f"scancel: error: Invalid job id {job_id}")
        reply.code = 1
        return
    if job_id in state.get("cancel_denied", []):
        reply.err(f"scancel: error: Kill job error on job id {job_id}: {PERMISSION_DENIED}")
        reply.code = 1
        return
    job = known_job(state, job_id)
    if job is None or job["state"] not in CANCELLABLE_STATES:
        report = (state["strict_scancel"] or "verbose" in options) and "quiet" not in options
        if report:
            reason = INVALID_JOB_ID if job is None else ALREADY_DONE
            reply.err(f"scancel: error: Kill job error on job id {job_id}: {reason}")
        if report and state["strict_scancel"]:
            reply.code = 1
        return
    if "verbose" in options:
        reply.err(f"scancel: Terminating job {job_id}")
    if "signal" not in options:  # a signal is delivered, the job goes on
        mark_cancelled(job)


def mark_cancelled(job: dict) -> None:
    now = time.time()
    job["exit_code"] = "0:15" if job["state"] in STARTED_STATES else "0:0"
    job["state"], job["reason"], job["dependency"] = "CANCELLED", "None", None
    job["end_time"] = now
    job["cancelled_by"] = os.getuid()


# -- sacct -----------------------------------------------------------------------------------------------

SACCT_ALIASES = {
    "-j": "jobs",
    "-o": "format",
    "-n": "noheader",
    "-P": "parsable2",
    "-p": "parsable",
    "-X": "allocations",
    "-b": "brief",
    "-S": "starttime",
    "-E": "endtime",
    "-u": "user",
    "-A": "accounts",
    "-s": "state",
    "-M": "clusters",
    "-r": "partition",
    "-N": "nodelist",
    "-a": "allusers",
    "-L": "allclusters",
    "-D": "duplicates",
}
SACCT_WITH_VALUE = {
    "jobs",
    "format",
    "starttime",
    "endtime",
    "user",
    "accounts",
    "state",
    "clusters",
    "partition",
    "nodelist",
    "name",
}
# name -> width (negative: left-justified), as sacct's print_fields prints them.
SACCT_FIELDS: dict[str, tuple[int, Callable[[dict], str]]] = {
    "jobid": (-12, lambda j: j["id"]),
    "jobidraw": (-12, lambda j: j["id"]),
    "jobname": (10, lambda j: j["name"]),
    "partition": (10, lambda j: j["partition"]),
    "account": (10, lambda j: j["account"] or ""),
    "alloccpus": (10, lambda j: "1" if j["start_time"] else "0"),
    "state": (10, lambda j: sacct_state(j)),
    "exitcode": (8, lambda j: j["exit_code"]),
    "reason": (20, lambda j: j["reason"]),
    "timelimit": (10, lambda j: j["time_limit"]),
    "nodelist": (15, lambda j: j["nodes"] or "None assigned"),
    "submit": (19, lambda j: format_timestamp(j["submit_time"])),
    "start": (19, lambda j: format_timestamp(j["start_time"])),
    "end": (19, lambda j: format_timestamp(j["end_time"])),
    "elapsed": (10, lambda j: format_duration(elapsed_seconds(j))),
    "elapsedraw": (10, lambda j: str(int(elapsed_seconds(j)))),
    "alloctres": (10, lambda j: alloc_tres(j)),
}
SACCT_HEADERS = {
    "jobid": "JobID",
    "jobidraw": "JobIDRaw",
    "elapsedraw": "ElapsedRaw",
    "alloctres": "AllocTRES",
    "jobname": "JobName",
    "alloccpus": "AllocCPUS",
    "exitcode": "ExitCode",
    "timelimit": "Timelimit",
    "nodelist": "NodeList",
}
SACCT_DEFAULT_FORMAT = "JobID,JobName,Partition,Account,AllocCPUS,State,ExitCode"


def elapsed_seconds(job: dict) -> float:
    if not job["start_time"]:
        return 0
    return (job["end_time"] or time.time()) - job["start_time"]


def alloc_tres(job: dict) -> str:
    """What the allocation held, as Slurm's accounting prints it: empty until the job started; GPUs
    from --gpus-per-node times --nodes (or a ``tres`` a test set on the job)."""
    if not job["start_time"]:
        return ""
    if job.get("tres"):
        return job["tres"]
    options = job["options"]
    nodes = int(options.get("nodes") or 1)
    tres = f"billing=1,cpu={nodes},mem=1G,node={nodes}"
    gpus = options.get("gpus-per-node")
    if gpus and gpus.isdigit():
        tres += f",gres/gpu={nodes * int(gpus)}"
    return tres


def sacct_state(job: dict) -> str:
    if job["state"] == "CANCELLED" and job["cancelled_by"] is not None:
        return f"CANCELLED by {job['cancelled_by']}"
    return job["state"]


def sacct(state: dict, args: list[str]) -> Reply:
    """Only allocation lines (as with -X) are printed, whether or not -X is given."""
    reply = Reply(code=1)
    if not state["accounting"]:
        reply.err("Slurm accounting storage is disabled")  # sacct/options.c, no "sacct:" prefix
        return reply
    if state["slurmdbd_down"]:
        reply.err("sacct: error: Problem talking to the database: Connection refused")
        return reply
    options = sacct_options(args)
    fields = [f.strip() for f in (options.get("format") or SACCT_DEFAULT_FORMAT).split(",") if f.strip()]
    unknown = [f for f in fields if f.split("%")[0].lower() not in SACCT_FIELDS]
    if unknown:
        reply.err(f'sacct: error: Invalid field requested: "{unknown[0]}"')
        return reply
    reply.code = 0
    ids = [i for i in (options.get("jobs") or "").split(",") if i]
    jobs = [state["jobs"][i] for i in ids if i in state["jobs"]] if ids else list(state["jobs"].values())
    separator = "|" if "parsable" in options or "parsable2" in options else None
    trailer = "|" if "parsable" in options else ""
    if "noheader" not in options:
        for line in sacct_header(fields, separator, trailer):
            reply.out(line)
    for job in jobs:
        reply.out(sacct_line([sacct_value(f, job) for f in fields], fields, separator, trailer))
    return reply


def sacct_options(args: list[str]) -> dict[str, str]:
    options, _ = parse_options(args, SACCT_ALIASES, SACCT_WITH_VALUE)
    if "brief" in options and "format" not in options:
        options["format"] = "JobID,State,ExitCode"
    return options


def sacct_value(field_spec: str, job: dict) -> str:
    return SACCT_FIELDS[field_spec.split("%")[0].lower()][1](job)


def sacct_width(field_spec: str) -> int:
    name, _, width = field_spec.partition("%")
    default = SACCT_FIELDS[name.lower()][0]
    return (int(width) if default > 0 else -int(width)) if width else default


def sacct_header(fields: list[str], separator: str | None, trailer: str) -> list[str]:
    names = [SACCT_HEADERS.get(f.split("%")[0].lower(), f.split("%")[0].capitalize()) for f in fields]
    if separator:
        return [separator.join(names) + trailer]
    dashes = ["-" * abs(sacct_width(f)) for f in fields]
    return [sacct_line(names, fields, None, ""), sacct_line(dashes, fields, None, "")]


def sacct_line(values: list[str], fields: list[str], separator: str | None, trailer: str) -> str:
    if separator:
        return separator.join(values) + trailer
    cells = []
    for value, spec in zip(values, fields):
        width = sacct_width(spec)
        size = abs(width)
        if len(value) > size:
            value = value[: size - 1] + "+"  # sacct marks a cut value with '+'
        cells.append(f"{value:>{size}} " if width > 0 else f"{value:<{size}} ")
    return "".join(cells)


# -- squeue ----------------------------------------------------------------------------------------------

SQUEUE_DEFAULT_FORMAT = "%.18i %.9P %.8j %.8u %.2t %.10M %.6D %R"
SQUEUE_HEADERS = {
    "i": "JOBID",
    "A": "JOBID",
    "j": "NAME",
    "P": "PARTITION",
    "u": "USER",
    "t": "ST",
    "T": "STATE",
    "M": "TIME",
    "D": "NODES",
    "R": "NODELIST(REASON)",
    "r": "REASON",
    "N": "NODELIST",
    "l": "TIME_LIMIT",
}


def squeue(state: dict, args: list[str]) -> Reply:
    reply = Reply()
    options = squeue_options(args)
    ids = [i for i in options.get("jobs", "").split(",") if i]
    if len(ids) == 1 and known_job(state, ids[0]) is None:
        reply.err(f"slurm_load_jobs error: {INVALID_JOB_ID}")  # squeue asks for one job by id
        reply.code = 1
        return reply
    wanted_states = squeue_states(options.get("states"))
    jobs = [known_job(state, i) for i in ids] if ids else list(state["jobs"].values())
    fmt = options.get("format") or SQUEUE_DEFAULT_FORMAT
    if "noheader" not in options:
        reply.out(squeue_line(fmt, None))
    for job in jobs:
        if job is not None and not job.get("forgotten") and job["state"] in wanted_states:
            reply.out(squeue_line(fmt, job))
    return reply


def squeue_options(args: list[str]) -> dict[str, str]:
    aliases = {
        "-j": "jobs",
        "-o": "format",
        "-h": "noheader",
        "-t": "states",
        "-u": "user",
        "-p": "partition",
        "-a": "all",
        "-l": "long",
    }
    options, _ = parse_options(args, aliases, {"jobs", "format", "states", "user", "partition"})
    return options


def squeue_states(text: str | None) -> set[str]:
    if not text:
        return set(QUEUE_STATES)
    if text.lower() == "all":
        return set(ALL_STATES)
    by_compact = {v: k for k, v in COMPACT_STATES.items()}
    return {by_compact.get(s.upper(), s.upper()) for s in text.split(",")}


def squeue_line(fmt: str, job: dict | None) -> str:
    def field(match: re.Match[str]) -> str:
        right, width, letter = match.group(1) == ".", match.group(2), match.group(3)
        text = SQUEUE_HEADERS.get(letter, letter.upper()) if job is None else squeue_value(letter, job)
        if not width:
            return text
        size = int(width)
        text = text[:size]
        return f"{text:>{size}}" if right else f"{text:<{size}}"

    return re.sub(r"%(\.?)(\d*)([a-zA-Z])", field, fmt)


def squeue_value(letter: str, job: dict) -> str:
    started = job["start_time"] if job["state"] in STARTED_STATES else None
    values = {
        "i": job["id"],
        "A": job["id"],
        "j": job["name"],
        "P": job["partition"],
        "u": user_and_group()[0],
        "t": COMPACT_STATES.get(job["state"], job["state"]),
        "T": job["state"],
        "r": job["reason"],
        "M": format_squeue_time(time.time() - started) if started else "0:00",
        "D": "1",
        "R": job["nodes"] if started and job["nodes"] else f"({job['reason']})",
        "N": job["nodes"] or "",
        "l": job["time_limit"],
    }
    return values.get(letter, "")


# -- entry point -------------------------------------------------------------------------------------------

HANDLERS: dict[str, Callable[[dict, list[str]], Reply]] = {
    "sbatch": sbatch,
    "scontrol": scontrol,
    "scancel": scancel,
    "sacct": sacct,
    "squeue": squeue,
}


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in HANDLERS:
        print(f"usage: fake_slurm.py {{{','.join(COMMANDS)}}} ARGS...", file=sys.stderr)
        return 2
    path = os.environ.get(STATE_ENV)
    if not path:
        print(f"fake_slurm.py: ${STATE_ENV} is not set", file=sys.stderr)
        return 2
    command, args = argv[0], argv[1:]
    with StateFile(path).edit() as state:
        state["calls"].append({"command": command, "argv": args})
        reply = HANDLERS[command](state, args)
    # Printed only once the state is saved: like Slurm, a command cut off now has still acted.
    sys.stdout.write(reply.stdout)
    sys.stderr.write(reply.stderr)
    return reply.code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
