"""The use cases, as library functions that return data: compose, prepare and submit; status,
results, compare and report; everything about a benchmark (info) and finishing it (resubmit);
logs, cancel and export; which
runs a name selects.

Each use case takes a set of runs (a list; a single run is a list of one) and answers per run, in
order, over one connection per submit host. The command line (``cli/``) imports only this
package and ``errors``: it parses arguments, calls these and formats what they return. Each
function that talks to a cluster takes a ``connect`` function that opens a connection
(``connection.connect`` by default; tests pass a fake).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from nemo_gym.orchestration.checkpoints import ready_file_problem
from nemo_gym.orchestration.gate import GateOutcome, GatePolicy
from nemo_gym.orchestration.library.cancelling import CancelReport, cancel, cancel_command
from nemo_gym.orchestration.library.describing import AttemptInfo, BenchmarkInfo, RunInfo, info, info_json
from nemo_gym.orchestration.library.exporting import ExportResult, export
from nemo_gym.orchestration.library.gating import gate, read_policy
from nemo_gym.orchestration.library.observing import (
    RunStatus,
    compare,
    list_runs,
    list_sweeps,
    report,
    results,
    status,
    sweep_size,
    watch,
)
from nemo_gym.orchestration.library.planning import plan_samples
from nemo_gym.orchestration.library.present import (
    DEFAULT_METRIC,
    SOURCE_NONE,
    UNSCOREABLE_LISTED,
    estimate_text,
    headline,
    hours_text,
    last_observed,
    results_json,
    run_labels,
    runs_title,
    short_keys,
    short_values_label,
    status_json,
    total_usage,
    usage_source_text,
    values_label,
    wall_text,
)
from nemo_gym.orchestration.library.reading_logs import LogRequest, RunLog, follow_logs, logs
from nemo_gym.orchestration.library.resubmitting import BenchmarkResubmit, RunResubmit, resubmit
from nemo_gym.orchestration.library.selecting import Selection, select, select_run
from nemo_gym.orchestration.library.submitting import (
    Combination,
    Composition,
    Prepared,
    PreparedRun,
    Submission,
    compose,
    job_kind,
    prepare,
    resolved_config,
    resolved_yaml,
    staged_directory,
    submit,
)
from nemo_gym.orchestration.library.viewing import Viewer, check_binding, environment_token, serve, write_static
from nemo_gym.orchestration.library.watching import WatchEvent, WatchSettings, watch_checkpoints
from nemo_gym.orchestration.observe import JobStatus
from nemo_gym.orchestration.record import SubmissionRecord, SweepRecord, looks_like_a_directory
from nemo_gym.orchestration.recovery import DEFAULT_MAX_ATTEMPTS, Plan, Remedy, pairs_text
from nemo_gym.orchestration.results import BenchmarkResult, RunResults
from nemo_gym.orchestration.sample_size import DetectionTarget, SamplePlan
from nemo_gym.orchestration.stats import Correction
from nemo_gym.orchestration.usage import Usage

if TYPE_CHECKING:
    from nemo_gym.orchestration.comparison import BenchmarkComparison, RunComparison

__all__ = [
    # submit
    "Combination",
    "Composition",
    "Prepared",
    "PreparedRun",
    "Submission",
    "compose",
    "prepare",
    "resolved_config",
    "resolved_yaml",
    "staged_directory",
    "submit",
    # which runs
    "Selection",
    "looks_like_a_directory",
    "select",
    "select_run",
    # observe
    "BenchmarkComparison",
    "BenchmarkResult",
    "JobStatus",
    "RunComparison",
    "RunResults",
    "RunStatus",
    "SubmissionRecord",
    "SweepRecord",
    "Usage",
    "compare",
    "gate",
    "plan_samples",
    "ready_file_problem",
    "SamplePlan",
    "DetectionTarget",
    "Correction",
    "read_policy",
    "GateOutcome",
    "GatePolicy",
    "list_runs",
    "list_sweeps",
    "report",
    "results",
    "status",
    "sweep_size",
    "watch",
    # everything about a benchmark, and what resubmit would do
    "AttemptInfo",
    "BenchmarkInfo",
    "DEFAULT_MAX_ATTEMPTS",
    "Plan",
    "Remedy",
    "RunInfo",
    "info",
    "info_json",
    "pairs_text",
    # finishing what is unfinished
    "BenchmarkResubmit",
    "RunResubmit",
    "resubmit",
    # gym eval view
    "Viewer",
    "check_binding",
    "environment_token",
    "serve",
    "write_static",
    # gym eval watch
    "WatchEvent",
    "WatchSettings",
    "watch_checkpoints",
    # logs, cancel, export
    "CancelReport",
    "ExportResult",
    "LogRequest",
    "RunLog",
    "cancel",
    "cancel_command",
    "export",
    "follow_logs",
    "logs",
    # showing what they return
    "DEFAULT_METRIC",
    "SOURCE_NONE",
    "estimate_text",
    "UNSCOREABLE_LISTED",
    "headline",
    "hours_text",
    "job_kind",
    "last_observed",
    "results_json",
    "run_labels",
    "runs_title",
    "short_keys",
    "short_values_label",
    "status_json",
    "total_usage",
    "usage_source_text",
    "values_label",
    "wall_text",
]


def __getattr__(name: str) -> Any:
    """The comparison's types, imported when asked for: they bring numpy, which most verbs never need."""
    if name in ("BenchmarkComparison", "RunComparison"):
        from nemo_gym.orchestration import comparison

        return getattr(comparison, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
