"""The run-directory contract: every file, word and marker that the jobs on the cluster and the
commands on the submitting machine agree on. This module is its only owner.

The job scripts (templates) receive these names when they are rendered; the readers (status,
logs, cancel, results, the resume judge) import them. Nothing else spells a path of a run
directory, a state-file key, a cause or a marker.

Stdlib only, and Python 3.8 syntax: it is also staged into resumable jobs (beside
``resume.py``) and imported there by the node's ``python3``.

A run directory::

    <output_path>/<run id>/
      gym-job.json              the submission record
      resolved-config.yaml      the validated config, secrets as references
      .gym-submitted            one line per job queued (the submit command's answer), as it happens
      .gym-submitting           (a submission's first run) held locked by its script while it queues
      .gym-runner.pid           (local backend) the runner's pid
      run-local.sh              (local backend) runs the jobs one after another
      .gym-lane-feeder/         (a submission in lanes, its first run) what queues each lane's next job
      shared-deployment/        (job.deployment: shared) the one job's own directory
      <benchmark>/              a job directory:
        job.sh                  the batch script
        job.yaml                (Kubernetes backend) the Job's manifest, as applied
        slurm-<id>.out          the job's own log
        steps/                  step scripts, lib.sh, the driver, helpers
        logs/<step>-<id>[-<node>].log
        artifacts/rollouts.jsonl (+ what gym writes beside it)
        work/                   the driver's working directory
        otel/                   the collector's config and its file exports
        .gym/chain              (resumable) the chain's records
        .gym/cancelled          (resumable) cancel marker for every job of the chain
        .gym/<id>/              one job's state directory (see StateDir)
        .gym/<id>.attempt-<n>/  an earlier run of a job Slurm requeued (requeue n-1; the name's
                                "attempt" is not a resubmit attempt, ``attempt_dir``)
"""

from __future__ import annotations

from enum import Enum, IntEnum
from typing import NamedTuple, TypeVar

# -- run directory -------------------------------------------------------------------------------

RECORD_FILE = "gym-job.json"
SWEEP_RECORD_FILE = "gym-sweep.json"  # a run of a sweep: the whole sweep (its runs and their values)
RESOLVED_CONFIG_FILE = "resolved-config.yaml"
SUBMITTED_LOG = ".gym-submitted"
# In a submission's first run directory: locked (flock) by its script while it queues, so that a
# lost connection's recovery can tell a script that ended (killed, or done) from one still going.
SUBMITTING_LOCK_FILE = ".gym-submitting"
RUNNER_PID_FILE = ".gym-runner.pid"
LOCAL_RUNNER_SCRIPT = "run-local.sh"
SHARED_DEPLOYMENT_DIR = "shared-deployment"
# A submission dealt into lanes (``feeding``): the program every job of it runs to queue the next
# of its lane (``lane_feed``), staged once, in its first run's directory.
LANE_FEEDER_DIR = ".gym-lane-feeder"


# -- words ---------------------------------------------------------------------------------------

_W = TypeVar("_W", bound="Word")


class Word(str, Enum):
    """A word of the contract. A ``str`` enum whose values are exactly the words the job scripts
    write and print, so JSON, records, templates and bash all see the same string."""

    def __str__(self) -> str:
        # Templates and f-strings print the word itself, on every Python from 3.8.
        return str(self.value)

    @classmethod
    def from_word(cls: type[_W], word: object) -> _W | None:
        """The member a word read back names (a job's file, a record: untrusted); None for any
        other word, which the caller maps to its safe member."""
        if not isinstance(word, str):
            return None
        try:
            return cls(word)
        except ValueError:
            return None


def job_dir(run_dir: str, benchmark: str) -> str:
    return f"{run_dir}/{benchmark}"


# A sharded benchmark (``shards: N``) is N jobs, each a unit of its own: shard k (1..N) is named
# ``<benchmark>@k`` (``@`` is in no benchmark name) and runs in ``<benchmark dir>/shards/k``; the
# benchmark's own directory holds what the last shard to finish merged (artifacts/, as one job
# writes them) and the shards' markers (SHARDS_MARKERS_DIR).
SHARD_SEPARATOR = "@"


def shard_dir(bench_dir: str, shard: int | str) -> str:
    """Shard ``shard``'s job directory (``"*"``: a glob of them all)."""
    return f"{bench_dir}/shards/{shard}"


def shard_unit(benchmark: str, shard: int) -> str:
    return f"{benchmark}{SHARD_SEPARATOR}{shard}"


def split_unit(unit: str) -> tuple[str, int | None]:
    """``B@k`` -> (B, k); a benchmark's own name -> (name, None)."""
    name, sep, number = unit.rpartition(SHARD_SEPARATOR)
    if sep and number.isdigit() and not number.startswith("0"):
        return name, int(number)
    return unit, None


# -- job directory (paths relative to it) ---------------------------------------------------------

JOB_SCRIPT = "job.sh"
JOB_MANIFEST = "job.yaml"  # a Kubernetes Job's manifest, beside its job script
STEPS_DIR = "steps"
SHIPPED_DIR = "steps/py"  # this package's modules a job runs, as a package tree (shipping.staged)
LOGS_DIR = "logs"
ARTIFACTS_DIR = "artifacts"
ROLLOUTS_FILE = "artifacts/rollouts.jsonl"
# What gym writes beside the rollouts: the expected (task, rollout) pairs and the metrics.
MATERIALIZED_INPUTS_FILE = "artifacts/rollouts_materialized_inputs.jsonl"
AGGREGATE_METRICS_GLOB = "artifacts/*aggregate_metrics*.json"
WORK_DIR = "work"
OTEL_DIR = "otel"
COLLECTOR_CONFIG_FILE = "otel/collector.yaml"
MARKERS_DIR = ".gym"
CHAIN_FILE = ".gym/chain"
# A job of a lane: the directory of the job it queues as it starts (``feeding``), then the
# directory its feeder is staged in (``LANE_FEEDER_DIR`` of the submission's first run).
LANE_NEXT_FILE = ".gym/lane-next"
CHAIN_CANCELLED_FILE = ".gym/cancelled"
# What the job really ran, as its nodes saw it: ``key=value`` lines (``gym_version``,
# ``vllm_version.<service>``), appended by the job (lib.sh's gym_provenance), the last value of a
# key the one that counts; read back bounded by results (``facts.parse_provenance``).
PROVENANCE_FILE = ".gym/provenance"
# Written by ``gym eval resubmit`` before it queues anything: every later job of the benchmark
# continues from what is on disk (the driver adds its continue arguments), whatever it was told at submit.
CONTINUE_FILE = ".gym/continue"
# .gym/attempts/<n>/: what attempt n (2, 3, ...: a resubmit) started from. ``earlier/`` holds the
# benchmark's files as the attempts before it left them (artifacts, export receipts, a cancel
# marker), copied aside before anything changes; ``inputs.jsonl`` the expected rows it was queued
# to generate (a generate-missing attempt only).
# Two counts, two words: an *attempt* counts ``gym eval resubmit`` (1 the submission, 2 its first
# resubmit: ``chain.Chain.attempt``, ``RequeuedJob.attempt``); a *requeue* counts the scheduler
# starting the same job again (0 its first run: ``StateFile.requeue``, ``ENV_REQUEUE``,
# ``REQUEUED_RUN_SUFFIX``), runs within one attempt. Words on disk keep their old spelling.
ATTEMPTS_DIR = ".gym/attempts"
ATTEMPT_EARLIER_DIR = "earlier"
ATTEMPT_INPUTS_FILE = "inputs.jsonl"
LIBRARY_SCRIPT = "steps/lib.sh"
# gym's sidecar of the rollouts that failed, beside them.
FAILURES_FILE = "artifacts/rollouts_failures.jsonl"
# Where gym eval run finds its prepared inputs (``<output stem>/preprocessed_datasets/<split>.jsonl``
# for ROLLOUTS_FILE), which a shard replaces with its slice.
PREPARED_DATA_DIR = "artifacts/rollouts/preprocessed_datasets"
# In a sharded benchmark's directory: shard k's ``<k>.done`` (its job's id, once its driver has
# ended well), ``merged`` (the done markers the last merge covered) and the merge's lock.
SHARDS_MARKERS_DIR = ".gym/shards"
SHARD_DONE_SUFFIX = ".done"
SHARDS_MERGED_FILE = ".gym/shards/merged"
SHARDS_LOCK_FILE = ".gym/shards/merge.lock"


def attempt_dir(attempt: int) -> str:
    return f"{ATTEMPTS_DIR}/{attempt}"


def step_script(step: str) -> str:
    return f"{STEPS_DIR}/{step}.sh"


def turn_step(step: str, turn: int) -> str:
    """Step ``step`` as a restart lane's turn ``turn`` (after the first) starts it again: a script,
    log and markers of its own, so each checkpoint's server log stays whole."""
    return f"{step}.turn{turn}"


def job_log(job_id: str) -> str:
    """The job's own log (Slurm's default batch output name; the local runner uses it too)."""
    return f"slurm-{job_id}.out"


def job_log_pattern() -> str:
    """``job_log`` with Slurm's own placeholder for the job id, for the job's output option."""
    return "slurm-%j.out"


def step_log(step: str, job_id: str, node: str | None = None, log_dir: str = LOGS_DIR) -> str:
    return f"{log_dir}/{step}-{job_id}" + (f"-{node}" if node else "") + ".log"


def step_log_pattern(step: str, per_node: bool, log_dir: str = LOGS_DIR) -> str:
    """``step_log`` with srun's placeholders: %j the job id, %N the node name."""
    return f"{log_dir}/{step}-%j" + ("-%N" if per_node else "") + ".log"


def state_dir(job_id: str) -> str:
    return f"{MARKERS_DIR}/{job_id}"


RAY_TOKEN_FILE = ".gym/ray.token"  # the job's Ray auth token, private to the job's user
# A warm lane (job.deployment: reload): the token that opens its server's reload endpoint (private
# to the job's user, reload_guard), and what the server holds now (weights.py), in the lane's job
# directory. Each benchmark's provenance says the weights that answered it.
RELOAD_TOKEN_FILE = ".gym/reload.token"
LOADED_WEIGHTS_FILE = ".gym/loaded-weights.json"


class Reload(IntEnum):
    """A warm lane's weights switch (weights.py) as its exit status, which the lane acts on."""

    LOADED = 0
    REFUSED = 3  # the checkpoint cannot be loaded over the current one; the server was not touched
    FAILED = 4  # the server failed the reload (or its health after it): its weights are unknown
    NOT_STARTED = 5  # a restart lane: the turn's deployment did not start; the next turn starts its own
    USAGE = 2


EXPORTS_DIR = ".gym/exports"  # one receipt per exporter: <exporter>.json (and its lock)
EXPORTERS_DIR = "steps/exporters"  # the staged exporters, contract.py and the export spec


# -- one job's state directory: .gym/<job id>/ (names relative to it) ------------------------------

STATE_FILE = "state"
CAUSE_FILE = "cause"
# Space the job holds from its start and gives back once its filesystem is full, so that it can
# still record why it ended (its cause, its state, its end event).
RESERVE_FILE = "reserve"
RESERVE_BYTES = 65536
CANCELLED_FILE = "cancelled"
EVENTS_FILE = "events"
PID_FILE = "pid"
HEARTBEAT_FILE = "heartbeat"
STOP_COLLECTOR_FILE = "stop-collector"
EXITED_DIR = "exit"  # exit/<step>@<node>: the exit status of a step's process on a node
READY_DIR = "ready"  # ready/<step>@<node>: a step without an HTTP probe says it is ready
WHY_DIR = "why"  # why/<step>@<node>: a step that refused to start says why, in one line
# started/<step>@<node>: a step its own container runs (a Kubernetes sidecar) has begun; found again
# as it starts, it was restarted after a death that left no exit status (a KILL, the OOM killer).
STARTED_DIR = "started"
MERGED_FILE = "merged"  # a shard's job merged its benchmark's shards (its job then exports them)
# A shared deployment's queue of benchmarks as its decider (shared_queue.py) left it, between two calls.
SHARED_QUEUE_FILE = "shared-queue.json"
# Why a warm lane's services did not start again after a failed reload (one line, for shared_queue.py).
RESTART_WHY_FILE = "restart-why"
# .gym/<id>.attempt-<n>: an earlier run of a job Slurm requeued (the word on disk is "attempt").
REQUEUED_RUN_SUFFIX = ".attempt-"

# The state file: key=value lines, replaced atomically by the job as it goes.
STATE_KEYS = ("phase", "detail", "time", "attempt")


class Phase(Word):
    """What a job's own state file says it is doing."""

    QUEUED = "queued"
    STARTING = "starting"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def ended(self) -> bool:
        return self in (Phase.SUCCEEDED, Phase.FAILED, Phase.CANCELLED)


def parse_state(text: str) -> dict[str, str]:
    """The state file's key=value lines (unknown lines ignored, so that fields can be added)."""
    out = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            out[key.strip()] = value.strip()
    return out


class StateFile(NamedTuple):
    """A job's own state file, read back: every reader takes it from ``StateFile.parse``."""

    phase: Phase | None = None  # None: no phase written, or a word this version does not know
    phase_word: str = ""  # the phase as written, for messages ("" when none was)
    detail: str = ""
    time: str = ""
    # The job's run that wrote it: 0 the first, +1 per Slurm requeue (the key on disk is "attempt",
    # but it is no resubmit attempt: ``attempt_dir``).
    requeue: int = 0

    @classmethod
    def parse(cls, text: str) -> StateFile:
        return cls.from_fields(parse_state(text))

    @classmethod
    def from_fields(cls, fields: dict[str, str]) -> StateFile:
        word = fields.get(STATE_KEYS[0])
        requeue = fields.get(STATE_KEYS[3], "")
        return cls(
            phase=Phase.from_word(word),
            phase_word=word or "",
            detail=fields.get(STATE_KEYS[1], ""),
            time=fields.get(STATE_KEYS[2], ""),
            requeue=read_count(requeue),
        )

    @property
    def written(self) -> bool:
        """Whether the job wrote a phase at all (one this version cannot read included)."""
        return self.phase_word != ""


# Events, one per line ``<epoch seconds> <event> [<arg>]``: for benchmarks and post-mortems.
EVENT_JOB_START = "job-start"
EVENT_LAUNCHED = "launched"  # + step
EVENT_HEALTHY = "healthy"  # + service
EVENT_DRIVER_START = "driver-start"
EVENT_DRIVER_END = "driver-end"  # + exit status
EVENT_COLLECTOR_STOPPED = "collector-stopped"
EVENT_RELOAD = "reload"  # + the warm lane's turn whose weights are asked for
EVENT_RESTART = "restart"  # a warm lane's services started again after a failed reload
EVENT_JOB_END = "job-end"  # + exit status


# -- why a job ended -------------------------------------------------------------------------------


class Cause(Word):
    """Why a job ended badly, as it records itself in ``.gym/<id>/cause``; each cause carries what
    follows from it: whether a rerun would repeat it (the resume judge then stops the chain),
    whether the job still exports its results (what its driver wrote is worth sending), and the
    words that tell it."""

    repeats_on_rerun: bool
    exports: bool
    text: str

    def __new__(cls, word: str, repeats_on_rerun: bool, exports: bool, text: str) -> Cause:
        member = str.__new__(cls, word)
        member._value_ = word
        member.repeats_on_rerun = repeats_on_rerun
        member.exports = exports
        member.text = text
        return member

    STARTUP_FAILED = ("startup-failed", True, False, "a service did not start")  # never became healthy
    SERVICE_DIED = ("service-died", False, True, "a service died while the driver ran")
    DRIVER_FAILED = ("driver-failed", True, True, "the driver failed")  # exited with an error
    # Killed by a signal: the OOM killer, a node going down.
    DRIVER_KILLED = ("driver-killed", False, True, "the driver was killed by a signal (out of memory?)")
    WALLTIME = ("walltime", False, False, "it reached its walltime")  # Slurm's TERM at the time limit
    PREEMPTED = ("preempted", False, False, "it was preempted")
    CANCELLED = ("cancelled", False, False, "it was cancelled")
    SIGNAL = ("signal", False, False, "it was killed by a signal")  # a TERM nobody explains
    # A resumable chain's driver that exited 0 leaving samples missing: its successor finishes them
    # (and exports then).
    CUT_SHORT = ("cut-short", False, False, "the driver ended without error, but samples are missing")
    # The filesystem of its directory filled (or its quota): a rerun fails the same way until space
    # is freed.
    DISK_FULL = ("disk-full", True, False, "the filesystem of its directory was full")
    # A warm lane's server failed to load a checkpoint: it holds weights nobody can name, so the
    # lane's runs after it were not served (they are submitted again).
    WEIGHTS_FAILED = ("weights-failed", False, False, "its server failed to load a checkpoint's weights")

    @classmethod
    def exporting(cls) -> list[Cause]:
        """The causes after which a job still exports, by word (as the job script's case lists them)."""
        return sorted((cause for cause in cls if cause.exports), key=lambda cause: cause.value)


CAUSES = tuple(Cause)
# Causes that may come from Slurm's own TERM arriving first (the job then asks what the TERM was).
CAUSES_MAYBE_FROM_A_TERM = (Cause.STARTUP_FAILED, Cause.SERVICE_DIED, Cause.DRIVER_FAILED, Cause.DRIVER_KILLED)


class Outcome(Word):
    """How the resume judge finds a job ended: a cause the job recorded, or what Slurm says. Each
    carries whether it cut the job short (a resume is free after progress) and its words; an
    outcome of a cause's word takes the cause's."""

    cut_short: bool
    _text: str

    def __new__(cls, word: str, cut_short: bool = False, text: str = "") -> Outcome:
        member = str.__new__(cls, word)
        member._value_ = word
        member.cut_short = cut_short
        member._text = text
        return member

    SUCCEEDED = ("succeeded", False, "it succeeded")
    TIMEOUT = ("timeout", True, "it reached its walltime")
    NODE_FAILURE = ("node-failure", False, "a node failed")
    OUT_OF_MEMORY = ("out-of-memory", False, "it ran out of memory")
    REQUEUED = ("requeued", True, "Slurm requeued it (node failure or preemption)")
    UNKNOWN = ("unknown", False, "it ended without a record (node lost?)")
    STARTUP_FAILED = (Cause.STARTUP_FAILED.value,)
    SERVICE_DIED = (Cause.SERVICE_DIED.value,)
    DRIVER_FAILED = (Cause.DRIVER_FAILED.value,)
    DRIVER_KILLED = (Cause.DRIVER_KILLED.value,)
    WALLTIME = (Cause.WALLTIME.value, True)
    PREEMPTED = (Cause.PREEMPTED.value, True)
    CANCELLED = (Cause.CANCELLED.value,)
    SIGNAL = (Cause.SIGNAL.value,)
    CUT_SHORT = (Cause.CUT_SHORT.value,)
    DISK_FULL = (Cause.DISK_FULL.value,)
    WEIGHTS_FAILED = (Cause.WEIGHTS_FAILED.value,)

    @classmethod
    def of(cls, cause: Cause) -> Outcome:
        return cls(cause.value)

    @property
    def cause(self) -> Cause | None:
        return Cause.from_word(self.value)

    @property
    def text(self) -> str:
        cause = self.cause
        return cause.text if cause is not None else self._text

    @property
    def stops_the_chain(self) -> bool:
        """Nothing is left to resume (it succeeded, the user cancelled it), or a rerun would fail the same way."""
        cause = self.cause
        return self in (Outcome.SUCCEEDED, Outcome.CANCELLED) or cause is not None and cause.repeats_on_rerun


# -- how a job is shown -------------------------------------------------------------------------------


class Status(Word):
    """The state a job, a benchmark or a run is shown in: status, results, the exports' records."""

    QUEUED = "queued"
    STARTING = "starting"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    INCOMPLETE = "incomplete"  # its driver finished but left expected samples unwritten
    FAILED = "failed"
    CANCELLED = "cancelled"
    TIMED_OUT = "timed out"
    # Taken back by the scheduler for a higher-priority job and not requeued (a site whose
    # PreemptMode is CANCEL): neither a failure of the job nor anyone's cancel.
    PREEMPTED = "preempted"
    UNKNOWN = "unknown"

    @classmethod
    def of(cls, phase: Phase) -> Status:
        """The status a job's own phase shows as: the same word."""
        return cls(phase.value)

    @property
    def final(self) -> bool:
        """Nothing will change it any more (``unknown`` included: nothing is left to ask)."""
        return self not in (Status.QUEUED, Status.STARTING, Status.RUNNING)


# -- a resumable benchmark's chain: .gym/chain ------------------------------------------------------
#
# Tab-separated records, appended by the jobs of the chain:
#   start ID EPOCH ROLLOUTS                         job ID started, with ROLLOUTS on disk
#   successor ID AFTER                              job ID is queued to resume job AFTER
#   nosuccessor ID WHY                              no successor could be queued for job ID
#   verdict ID OUTCOME ELAPSED ROLLOUTS ACTION WHY  how job ID ended, and what the chain does
#   end STATE WHY                                   the chain stops
#   resubmit ID AFTER ATTEMPT REMEDY ROLLOUTS       gym eval resubmit queued job ID as attempt
#                                                   ATTEMPT after job AFTER ended, with ROLLOUTS on
#                                                   disk; the records after it are a new chain (a
#                                                   resumable job's), the ones before it the
#                                                   earlier attempts'
#
# The job scripts write these words as well as Python, so they are spelled here; the lines as
# Python writes them and a chain read back are ``chain``'s.

RECORD_START = "start"
RECORD_SUCCESSOR = "successor"
RECORD_NO_SUCCESSOR = "nosuccessor"
RECORD_VERDICT = "verdict"
RECORD_END = "end"
RECORD_RESUBMIT = "resubmit"
# A job of a lane (``feeding``), queued by the job before it (``lane_feed``): fed <id> <by job>
# <epoch>; or unfed <by job> <what the scheduler said> when it refused.
RECORD_FED = "fed"
RECORD_UNFED = "unfed"
FED_BY_RESUBMIT = "resubmit"  # a fed record's queuer when gym eval resubmit fed a stalled lane


def read_count(text: str) -> int:
    """A count read back; 0 for anything but ASCII digits (``int`` refuses other digits)."""
    text = text.strip()
    return int(text) if is_count(text) else 0


def is_count(text: str) -> bool:
    """ASCII digits only: ``str.isdigit`` also takes '²', which ``int`` and ``float`` refuse."""
    return text.isdigit() and text.isascii()


def latest_started_awk() -> str:
    """Shell: the id of the last job that started, or that resubmit queued since, or that its lane
    fed (empty without a chain); the file follows."""
    kinds = " || ".join(f'$1 == "{kind}"' for kind in (RECORD_FED, RECORD_START, RECORD_RESUBMIT))
    return f"awk -F'\\t' '{kinds} {{id = $2}} END {{print id}}'"


# No resumable chain grows past this many jobs, whatever its caps say: the last guard against a loop.
CHAIN_LIMIT = 100

# -- markers on the standard output of the scripts the submitting machine runs ----------------------

JOB_MARKER = "__GYM_JOB:"  # submission: <benchmark>:<submit command's status>:<its output>
# A job's status on its marker line when it is not queued now but by the job before it in its
# lane (the output then names that job: <run>/<benchmark>).
FED_STATUS = "fed"
MISSING_MARKER = "__GYM_MISSING:"  # submission: <label>:<mount source that does not exist>
RUN_MARKER = "__GYM_RUN:"  # submission of several runs: <run id>, before that run's job markers
RUN_DIR_EXISTS_MARKER = "__GYM_EXISTS:"  # submission: <run dir> that exists already
# The last line of a run's submitted log: its submission script ran to its end (every job it was
# to queue has its line above). A lost connection's recovery waits for it (``recover_results``).
SUBMISSION_ENDED_MARKER = "__GYM_SUBMISSION_ENDED"
RUN_DIR_ABSENT_MARKER = "__GYM_ABSENT"  # recovery: the run directory was never made (nothing ran)
SUBMISSION_GONE_MARKER = "__GYM_SUBMISSION_GONE"  # recovery: no process holds the submission's lock
PROBE_MARKER = "__GYM_PROBE:"  # status: a ProbeRecord kind, then its fields, \x1f-separated
PROBE_RUN_MARKER = "__GYM_PROBE_RUN:"  # status of several runs in one script: <index>, before that run's records
RESULT_MARKER = "__GYM_RESULT:"  # results: <benchmark>\x1f<rollouts>\x1f<file>\x1f<base64>
PROVENANCE_MARKER = "__GYM_PROVENANCE:"  # results: <benchmark>\x1f<base64 of its provenance file's head>
NO_LOGS_MARKER = "__GYM_NO_LOGS__"  # logs: none of the wanted files exist
CANCEL_FAILED_MARKER = "__GYM_CANCEL_FAILED:"  # cancel: <benchmark> whose cancel the scheduler refused
INPUTS_MARKER = "__GYM_INPUTS:"  # resubmit: <benchmark>:<rows of its attempt's inputs file>
NOT_RELEASED_MARKER = "__GYM_NOT_RELEASED:"  # resubmit: <benchmark> whose job stayed held
LIMITS_MARKER = "__GYM_LIMITS:"  # submission: <name> of the scheduler's answer that follows
FIELD_SEPARATOR = "\x1f"


class ProbeRecord(Word):
    """The kinds of record the status probe prints after ``PROBE_MARKER``, and their fields;
    ``observe.parse_probe`` reads each with its own parser."""

    JOB = "J"  # benchmark, job id, its state file (tab-joined), the scheduler's answer (its fields)
    BENCHMARK = "B"  # benchmark, rollouts written, its resume chain (base64)
    EXPORT = "X"  # benchmark, exporter, its receipt (base64)
    EVENT = "E"  # benchmark, state dir, first event time, job-end time, last event time
    MTIME = "M"  # benchmark, parent dir, file name, mtime: a sign of life of a job without events
    CHECK = "C"  # benchmark, then the sample scan's counts (expected, written, duplicates, ...)
    CLOCK = "T"  # the cluster's clock, epoch seconds
    ACCOUNTING = "A"  # job id, elapsed seconds, TRES: one run of a job, from the scheduler's accounts
    FACT = "R"  # fact, value: a run-wide fact a backend's probe tail adds
    MERGED = "G"  # sharded benchmark, merged rollouts written (-1: its shards were never merged)


# -- the environment of a job's processes --------------------------------------------------------------

ENV_JOB_DIR = "GYM_JOB_DIR"
ENV_JOB_ID = "GYM_JOB_ID"
ENV_NODES = "GYM_NODES"  # comma-separated node names of the allocation, in order
ENV_REQUEUE = "GYM_ATTEMPT"  # the job's requeue (0 the first run; the word is the environment's, not an attempt)
# A restart lane's next turn: how long a step waits for its port, which the turn before's servers
# may still hold for seconds after they were stopped (Ray Serve's proxy does), before it says "in use".
PORT_WAIT_ENV = "GYM_PORT_WAIT_SECONDS"
PORT_WAIT_SECONDS = 60
ENV_STEP_NAME = "GYM_STEP_NAME"
ENV_STEP_RANK = "GYM_STEP_RANK"
NODE_ADDRESS_ENV_PREFIX = "GYM_NODE_"  # GYM_NODE_<i>: an address of allocation node i
RAY_ADDRESS_ENV_PREFIX = "GYM_RAY_ADDRESS_"  # + the ray service's name as a shell word
SERVICE_URL_ENV_PREFIX = "GYM_SERVICE_URL_"  # + a model service's name: its http://<address>:<port>/v1
SECRET_CARRIER_PREFIX = "GYM_HOST_"  # GYM_HOST_<OWNER>__<KEY>: a host: secret in the job's env

# -- results users can trust and compare: completeness, usage --------------------------------------

# results: <benchmark><sep><which><sep><encoding><sep><metric names><sep><base64>, one per file read:
# which is ROLLOUTS_PART or EXPECTED_PART; encoding is ENCODING_PROJECTED (zlib of the rows cut down
# to their indices and the metric, line for line) or ENCODING_RAW (the file itself, no python3 there).
ROLLOUTS_MARKER = "__GYM_ROLLOUTS:"
ROLLOUTS_PART = "rollouts"
EXPECTED_PART = "expected"
ENCODING_PROJECTED = "z"
ENCODING_RAW = "raw"
