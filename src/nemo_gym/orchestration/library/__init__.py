"""The use cases, as library functions that return data: compose, prepare and submit; status,
results, compare and report; everything about a benchmark (info) and finishing it (resubmit);
logs, cancel and export; which
runs a name selects.

Each use case takes a set of runs (a list; a single run is a list of one) and answers per run, in
order, over one connection per submit host. The command line (``cli/``) imports only this
package and ``errors``: it parses arguments, calls these and formats what they return. Each
function that talks to a cluster takes a ``connect`` function that opens a connection
(``connection.connect`` by default; tests pass a fake).

Each name is imported when first asked for (PEP 562): a verb pays for the use cases it calls,
not for every one (``gym eval submit --dry-run`` never imports the gate, the view or numpy).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from nemo_gym.orchestration.comparison import BenchmarkComparison, RunComparison
    from nemo_gym.orchestration.library.composing import (
        Combination,
        Composition,
        compose,
        resolved_config,
        resolved_yaml,
    )
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
    from nemo_gym.orchestration.library.present import estimate_text, usage_source_text
    from nemo_gym.orchestration.library.present_results import (
        DEFAULT_METRIC,
        UNSCOREABLE_LISTED,
        headline,
        results_json,
        status_json,
    )
    from nemo_gym.orchestration.library.selecting import Selection, select, select_run
    from nemo_gym.orchestration.library.storing import feed_store, feed_store_of
    from nemo_gym.orchestration.observe import JobStatus
    from nemo_gym.orchestration.record import (
        SubmissionRecord,
        SweepRecord,
        last_observed,
        looks_like_a_directory,
        values_label,
    )
    from nemo_gym.orchestration.results import BenchmarkResult, RunResults
    from nemo_gym.orchestration.stats import Correction
    from nemo_gym.orchestration.store.history import Checkpoint
    from nemo_gym.orchestration.sweep import run_labels, runs_title, short_keys, short_values_label
    from nemo_gym.orchestration.usage import SOURCE_NONE, Usage, hours_text, wall_text
    from nemo_gym.orchestration.usage import total as total_usage
    from nemo_gym.orchestration.verbs.cancel.use_case import CancelReport, cancel, cancel_command
    from nemo_gym.orchestration.verbs.export.use_case import ExportResult, export
    from nemo_gym.orchestration.verbs.gate.rules import GateOutcome, GatePolicy
    from nemo_gym.orchestration.verbs.gate.use_case import gate, read_policy
    from nemo_gym.orchestration.verbs.history.use_case import History, HistoryImport, history, import_runs
    from nemo_gym.orchestration.verbs.info.use_case import AttemptInfo, BenchmarkInfo, RunInfo, info, info_json
    from nemo_gym.orchestration.verbs.logs.use_case import LogRequest, RunLog, follow_logs, logs
    from nemo_gym.orchestration.verbs.plan.sample_size import DetectionTarget, SamplePlan
    from nemo_gym.orchestration.verbs.plan.use_case import plan_samples
    from nemo_gym.orchestration.verbs.resubmit.recovery import DEFAULT_MAX_ATTEMPTS, Plan, Remedy, pairs_text
    from nemo_gym.orchestration.verbs.resubmit.use_case import BenchmarkResubmit, RunResubmit, resubmit
    from nemo_gym.orchestration.verbs.submit.use_case import (
        Prepared,
        PreparedRun,
        Submission,
        job_kind,
        prepare,
        staged_directory,
        submit,
    )
    from nemo_gym.orchestration.verbs.view.use_case import Viewer, check_binding, environment_token, serve, write_static
    from nemo_gym.orchestration.verbs.watch.use_case import WatchEvent, WatchSettings, watch_checkpoints
    from nemo_gym.orchestration.watch_state import ready_file_problem

# Where each name lives (``module:name`` when it is known there by another name).
_HOMES = {
    "AttemptInfo": "nemo_gym.orchestration.verbs.info.use_case",
    "BenchmarkComparison": "nemo_gym.orchestration.comparison",
    "BenchmarkInfo": "nemo_gym.orchestration.verbs.info.use_case",
    "BenchmarkResubmit": "nemo_gym.orchestration.verbs.resubmit.use_case",
    "BenchmarkResult": "nemo_gym.orchestration.results",
    "CancelReport": "nemo_gym.orchestration.verbs.cancel.use_case",
    "Checkpoint": "nemo_gym.orchestration.store.history",
    "Combination": "nemo_gym.orchestration.library.composing",
    "Composition": "nemo_gym.orchestration.library.composing",
    "Correction": "nemo_gym.orchestration.stats",
    "DEFAULT_MAX_ATTEMPTS": "nemo_gym.orchestration.verbs.resubmit.recovery",
    "DEFAULT_METRIC": "nemo_gym.orchestration.library.present_results",
    "DetectionTarget": "nemo_gym.orchestration.verbs.plan.sample_size",
    "ExportResult": "nemo_gym.orchestration.verbs.export.use_case",
    "GateOutcome": "nemo_gym.orchestration.verbs.gate.rules",
    "GatePolicy": "nemo_gym.orchestration.verbs.gate.rules",
    "History": "nemo_gym.orchestration.verbs.history.use_case",
    "HistoryImport": "nemo_gym.orchestration.verbs.history.use_case",
    "JobStatus": "nemo_gym.orchestration.observe",
    "LogRequest": "nemo_gym.orchestration.verbs.logs.use_case",
    "Plan": "nemo_gym.orchestration.verbs.resubmit.recovery",
    "Prepared": "nemo_gym.orchestration.verbs.submit.use_case",
    "PreparedRun": "nemo_gym.orchestration.verbs.submit.use_case",
    "Remedy": "nemo_gym.orchestration.verbs.resubmit.recovery",
    "RunComparison": "nemo_gym.orchestration.comparison",
    "RunInfo": "nemo_gym.orchestration.verbs.info.use_case",
    "RunLog": "nemo_gym.orchestration.verbs.logs.use_case",
    "RunResubmit": "nemo_gym.orchestration.verbs.resubmit.use_case",
    "RunResults": "nemo_gym.orchestration.results",
    "RunStatus": "nemo_gym.orchestration.library.observing",
    "SOURCE_NONE": "nemo_gym.orchestration.usage",
    "SamplePlan": "nemo_gym.orchestration.verbs.plan.sample_size",
    "Selection": "nemo_gym.orchestration.library.selecting",
    "Submission": "nemo_gym.orchestration.verbs.submit.use_case",
    "SubmissionRecord": "nemo_gym.orchestration.record",
    "SweepRecord": "nemo_gym.orchestration.record",
    "UNSCOREABLE_LISTED": "nemo_gym.orchestration.library.present_results",
    "Usage": "nemo_gym.orchestration.usage",
    "Viewer": "nemo_gym.orchestration.verbs.view.use_case",
    "WatchEvent": "nemo_gym.orchestration.verbs.watch.use_case",
    "WatchSettings": "nemo_gym.orchestration.verbs.watch.use_case",
    "cancel": "nemo_gym.orchestration.verbs.cancel.use_case",
    "cancel_command": "nemo_gym.orchestration.verbs.cancel.use_case",
    "check_binding": "nemo_gym.orchestration.verbs.view.use_case",
    "compare": "nemo_gym.orchestration.library.observing",
    "compose": "nemo_gym.orchestration.library.composing",
    "environment_token": "nemo_gym.orchestration.verbs.view.use_case",
    "estimate_text": "nemo_gym.orchestration.library.present",
    "export": "nemo_gym.orchestration.verbs.export.use_case",
    "feed_store": "nemo_gym.orchestration.library.storing",
    "feed_store_of": "nemo_gym.orchestration.library.storing",
    "follow_logs": "nemo_gym.orchestration.verbs.logs.use_case",
    "gate": "nemo_gym.orchestration.verbs.gate.use_case",
    "headline": "nemo_gym.orchestration.library.present_results",
    "history": "nemo_gym.orchestration.verbs.history.use_case",
    "hours_text": "nemo_gym.orchestration.usage",
    "import_runs": "nemo_gym.orchestration.verbs.history.use_case",
    "info": "nemo_gym.orchestration.verbs.info.use_case",
    "info_json": "nemo_gym.orchestration.verbs.info.use_case",
    "job_kind": "nemo_gym.orchestration.verbs.submit.use_case",
    "last_observed": "nemo_gym.orchestration.record",
    "list_runs": "nemo_gym.orchestration.library.observing",
    "list_sweeps": "nemo_gym.orchestration.library.observing",
    "logs": "nemo_gym.orchestration.verbs.logs.use_case",
    "looks_like_a_directory": "nemo_gym.orchestration.record",
    "pairs_text": "nemo_gym.orchestration.verbs.resubmit.recovery",
    "plan_samples": "nemo_gym.orchestration.verbs.plan.use_case",
    "prepare": "nemo_gym.orchestration.verbs.submit.use_case",
    "read_policy": "nemo_gym.orchestration.verbs.gate.use_case",
    "ready_file_problem": "nemo_gym.orchestration.watch_state",
    "report": "nemo_gym.orchestration.library.observing",
    "resolved_config": "nemo_gym.orchestration.library.composing",
    "resolved_yaml": "nemo_gym.orchestration.library.composing",
    "resubmit": "nemo_gym.orchestration.verbs.resubmit.use_case",
    "results": "nemo_gym.orchestration.library.observing",
    "results_json": "nemo_gym.orchestration.library.present_results",
    "run_labels": "nemo_gym.orchestration.sweep",
    "runs_title": "nemo_gym.orchestration.sweep",
    "select": "nemo_gym.orchestration.library.selecting",
    "select_run": "nemo_gym.orchestration.library.selecting",
    "serve": "nemo_gym.orchestration.verbs.view.use_case",
    "short_keys": "nemo_gym.orchestration.sweep",
    "short_values_label": "nemo_gym.orchestration.sweep",
    "staged_directory": "nemo_gym.orchestration.verbs.submit.use_case",
    "status": "nemo_gym.orchestration.library.observing",
    "status_json": "nemo_gym.orchestration.library.present_results",
    "submit": "nemo_gym.orchestration.verbs.submit.use_case",
    "sweep_size": "nemo_gym.orchestration.library.observing",
    "total_usage": "nemo_gym.orchestration.usage:total",
    "usage_source_text": "nemo_gym.orchestration.library.present",
    "values_label": "nemo_gym.orchestration.record",
    "wall_text": "nemo_gym.orchestration.usage",
    "watch": "nemo_gym.orchestration.library.observing",
    "watch_checkpoints": "nemo_gym.orchestration.verbs.watch.use_case",
    "write_static": "nemo_gym.orchestration.verbs.view.use_case",
}

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
    # the results store: gym eval history
    "Checkpoint",
    "History",
    "HistoryImport",
    "feed_store",
    "feed_store_of",
    "history",
    "import_runs",
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
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module, _, there = home.partition(":")
    value = getattr(importlib.import_module(module), there or name)
    globals()[name] = value  # asked once
    return value


def __dir__() -> list[str]:
    return sorted(_HOMES)
