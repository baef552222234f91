"""The export spec: what a job exports, where, and who it is, in one JSON file staged into the job.

The node cannot read the run's ``resolved-config.yaml`` (stdlib has no YAML), so the submitting side
writes everything the exports need that the job's own files do not say: the identity (run id,
sweep id, benchmark, model, served name), the GPUs the job was given (for GPU-hours), the resolved
config already flattened into params, and each exporter's settings after ``job.export`` and the
benchmark's own ``export`` were merged (``merge_exporters``). ``make_spec`` builds the document,
``read_spec`` reads it back on the node. No credential ever enters it: tokens come from the
environment of whatever process runs the exports.

Stdlib only, Python 3.8 syntax.
"""

from __future__ import annotations

import json
import urllib.parse
from typing import Any, NamedTuple

from nemo_gym.orchestration.exporters import record as r

SPEC_VERSION = 1
MLFLOW = "mlflow"
WANDB = "wandb"
TABLE = "table"
EXPORTERS = (MLFLOW, WANDB, TABLE)  # the order they run in
# The settings each exporter knows.
SETTINGS = {
    MLFLOW: ("tracking_uri", "experiment", "run_name", "tags"),
    WANDB: ("project", "entity", "group", "mode"),
    TABLE: ("dir",),
}
WANDB_MODES = ("online", "offline")
# What each exporter reads from its environment to authenticate, and which of those are secret:
# never in the config, the spec or any file, never in a line printed or recorded.
CREDENTIALS = {
    MLFLOW: ("MLFLOW_TRACKING_TOKEN", "MLFLOW_TRACKING_USERNAME", "MLFLOW_TRACKING_PASSWORD"),
    WANDB: ("WANDB_API_KEY",),
}
SECRETS = ("MLFLOW_TRACKING_TOKEN", "MLFLOW_TRACKING_PASSWORD", "WANDB_API_KEY")
ENV_TRACKING_URI = "MLFLOW_TRACKING_URI"  # mlflow's tracking_uri when its settings have none


class ExportSpec(NamedTuple):
    run_id: str
    sweep_id: str | None
    benchmark: str
    model: str
    served_name: str
    gpus: int | None  # the job's GPUs, for GPU-hours; None when unknown
    params: dict[str, str]
    params_notes: tuple[str, ...]
    exporters: dict[str, dict[str, Any]]  # name -> settings, in EXPORTERS order
    usage_dir: str | None = None  # the job directory whose events time this benchmark (a shared job's); None: its own
    step: int | None = None  # the training step of the checkpoint it evaluated (job.training_step): metrics' step


def merge_exporters(defaults: dict[str, Any] | None, override: dict[str, Any] | None) -> dict[str, dict[str, Any]]:
    """``job.export`` merged with a benchmark's ``export``: the benchmark's settings replace the
    defaults' one by one (a setting is replaced whole: ``tags`` too), ``null`` for an exporter drops
    it, and an exporter only the benchmark names is added. ``override`` None inherits everything."""
    merged: dict[str, dict[str, Any]] = {}
    for name, settings in (defaults or {}).items():
        if settings is not None:
            merged[name] = dict(settings)
    for name, settings in (override or {}).items():
        if settings is None:
            merged.pop(name, None)
        else:
            merged[name] = {**merged.get(name, {}), **settings}
    return {name: merged[name] for name in _ordered(merged)}


def _ordered(names: Any) -> list[str]:
    known = [n for n in EXPORTERS if n in names]
    return known + sorted(n for n in names if n not in EXPORTERS)


def settings_problems(exporters: dict[str, Any]) -> list[str]:
    """What is wrong with merged exporter settings, one line each, as ``export.<exporter>[.<setting>]:
    problem`` (config validation prefixes the YAML path). Credentials are refused in the config:
    they belong in the environment of whatever runs the exports."""
    problems = []
    for name, settings in exporters.items():
        where = f"export.{name}"
        if name not in EXPORTERS:
            problems.append(f"{where}: unknown exporter; known: {', '.join(EXPORTERS)}")
            continue
        if not isinstance(settings, dict):
            problems.append(f"{where}: must be a mapping of settings, or null to drop the exporter")
            continue
        for key in settings:
            if key not in SETTINGS[name]:
                problems.append(f"{where}.{key}: unknown setting; known: {', '.join(SETTINGS[name])}")
        problems += _setting_problems(name, settings, where)
    return problems


def _setting_problems(name: str, settings: dict[str, Any], where: str) -> list[str]:
    problems = []
    uri = settings.get("tracking_uri")
    if name == MLFLOW and uri is not None:
        problem = tracking_uri_problem(str(uri))
        if problem:
            problems.append(f"{where}.tracking_uri: {problem}")
    if name == MLFLOW and not isinstance(settings.get("tags", {}), dict):
        problems.append(f"{where}.tags: must be a mapping of tag name to value")
    if name == WANDB and settings.get("mode", "online") not in WANDB_MODES:
        problems.append(f"{where}.mode: must be one of {', '.join(WANDB_MODES)}, got {settings.get('mode')!r}")
    table_dir = settings.get("dir")
    if name == TABLE and (not isinstance(table_dir, str) or not table_dir):
        problems.append(f"{where}.dir: required: the directory of results.csv and results.json")
    elif name == TABLE and not str(table_dir).startswith(("/", "~")):
        # Refused, not resolved: the exports run in the job (on a node) and in gym eval export (on
        # the submit host), each somewhere else; a relative dir would name another table in each.
        problems.append(
            f"{where}.dir: {table_dir!r} is relative, and the exports run elsewhere than here (in the "
            "job, and on the submit host): write an absolute path (or one under ~)"
        )
    return problems


# Query parameters that carry a credential, lowercased with - and _ dropped.
_CREDENTIAL_QUERY_KEYS = (
    "token",
    "accesstoken",
    "apikey",
    "key",
    "password",
    "pass",
    "secret",
    "auth",
    "sig",
    "signature",
    "credential",
    "credentials",
    "jwt",
    "session",
)
_CREDENTIALS_FIX = (
    "remove them and set MLFLOW_TRACKING_TOKEN (or MLFLOW_TRACKING_USERNAME/MLFLOW_TRACKING_PASSWORD) "
    "in the environment instead"
)


def tracking_uri_problem(uri: str) -> str | None:
    """What is wrong with an MLflow tracking URI, never quoting it (it may hold a credential); None
    when it is fine. Credentials are refused (user info, a token-looking query): a URI is written
    to files (the spec, the config, the record), credentials never are."""
    parts = urllib.parse.urlsplit(uri.strip())
    try:
        _ = parts.port
    except ValueError:
        return "has a port that is not a number: must be the http(s) address of an MLflow tracking server"
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return "must be the http(s) address of an MLflow tracking server"
    if parts.username or parts.password:
        return f"holds credentials; {_CREDENTIALS_FIX}"
    keys = [key for key, _ in urllib.parse.parse_qsl(parts.query, keep_blank_values=True)]
    if any(key.lower().replace("-", "").replace("_", "") in _CREDENTIAL_QUERY_KEYS for key in keys):
        return f"holds credentials in its query (?{'&'.join(k + '=...' for k in keys)}); {_CREDENTIALS_FIX}"
    if parts.query or parts.fragment:
        return "has a query or a fragment, which the MLflow REST API does not use: remove it"
    return None


def make_spec(
    run_id: str,
    benchmark: str,
    model: str,
    served_name: str,
    config: dict[str, Any],
    exporters: dict[str, dict[str, Any]],
    sweep_id: str | None = None,
    gpus: int | None = None,
    usage_dir: str | None = None,
    step: int | None = None,
) -> dict[str, Any]:
    """The spec document (JSON-ready) for one benchmark's job; ``config`` is the resolved config.
    ValueError (every problem, one a line) when the settings are wrong."""
    problems = settings_problems(exporters)
    if problems:
        raise ValueError("\n".join(problems))
    params, notes = r.flatten_config(config)
    return {
        "version": SPEC_VERSION,
        "run_id": run_id,
        "sweep_id": sweep_id,
        "benchmark": benchmark,
        "model": model,
        "served_name": served_name,
        "gpus": gpus,
        "params": params,
        "params_notes": notes,
        "exporters": {name: dict(exporters[name]) for name in _ordered(exporters)},
        "usage_dir": usage_dir,
        "step": step,
    }


def parse_spec(data: Any, what: str = "the export spec") -> ExportSpec:
    """The spec read back (``what`` names it: its file), checked again by the rules it was made
    under (``settings_problems``): a spec is a file in a run directory, which can be copied, shared
    or edited, so it is data to check, never a submission already checked. ExportError, one line
    naming ``what`` and the field, before any exporter runs."""
    if not isinstance(data, dict):
        raise r.ExportError(f"{what} is not a JSON object")
    version = data.get("version")
    if version != SPEC_VERSION:
        raise r.ExportError(f"{what} has version {version!r}; this exporter reads version {SPEC_VERSION}")
    missing = [k for k in ("run_id", "benchmark") if not isinstance(data.get(k), str) or not data.get(k)]
    if missing:
        raise r.ExportError(f"{what} has no {', '.join(missing)}")
    exporters = data.get("exporters") or {}
    if not isinstance(exporters, dict) or any(not isinstance(v, dict) for v in exporters.values()):
        raise r.ExportError(f"{what}'s exporters must map each name to its settings")
    problems = ["exporters." + p[len("export.") :] for p in settings_problems(exporters)] + _shape_problems(data)
    if problems:
        raise r.ExportError(f"{what}: {problems[0]}")
    gpus = data.get("gpus")
    step = data.get("step")
    return ExportSpec(
        run_id=data["run_id"],
        sweep_id=data.get("sweep_id") or None,
        benchmark=data["benchmark"],
        model=str(data.get("model") or ""),
        served_name=str(data.get("served_name") or ""),
        gpus=gpus if isinstance(gpus, int) and not isinstance(gpus, bool) else None,
        params={str(k): str(v) for k, v in (data.get("params") or {}).items()},
        params_notes=tuple(str(n) for n in data.get("params_notes") or ()),
        exporters={name: exporters[name] for name in _ordered(exporters)},
        usage_dir=data.get("usage_dir") or None,
        step=step if isinstance(step, int) and not isinstance(step, bool) and step >= 0 else None,
    )


def _shape_problems(data: dict[str, Any]) -> list[str]:
    """The spec's other fields that are not of their type (a hand-edited spec), as ``field: problem``."""
    problems = [f"{k}: must be a mapping" for k in ("params",) if not isinstance(data.get(k) or {}, dict)]
    problems += [f"{k}: must be a list" for k in ("params_notes",) if not isinstance(data.get(k) or [], list)]
    return problems + [
        f"{k}: must be a string"
        for k in ("sweep_id", "usage_dir", "model", "served_name")
        if not isinstance(data.get(k) or "", str)
    ]


def read_spec(path: str) -> ExportSpec:
    try:
        with open(path) as fh:
            data = json.load(fh)
    except OSError as exc:
        raise r.ExportError(f"cannot read the export spec {path}: {exc.strerror or exc}") from None
    except (ValueError, RecursionError) as exc:
        raise r.ExportError(f"the export spec {path} is not JSON: {exc}") from None
    return parse_spec(data, f"the export spec {path}")


# -- where an exporter sends a run ----------------------------------------------------------------------

# The setting that says where each exporter sends a run.
DESTINATION_SETTING = {MLFLOW: "tracking_uri", WANDB: "entity/project", TABLE: "dir"}


def destination(name: str, settings: dict[str, Any]) -> str | None:
    """Where an exporter sends a run, as a user would name it: mlflow's tracking URI (scheme and
    host lowercased, no trailing slash), wandb's ``entity/project`` (``project`` without an entity),
    the table's ``dir``; None when its settings name none (mlflow's address then comes from the
    environment of whatever runs the export: that environment's owner chose it)."""
    if name == MLFLOW and settings.get("tracking_uri"):
        parts = urllib.parse.urlsplit(str(settings["tracking_uri"]).strip())
        return urllib.parse.urlunsplit((parts.scheme.lower(), parts.netloc.lower(), parts.path.rstrip("/"), "", ""))
    if name == WANDB and (settings.get("entity") or settings.get("project")):
        project = str(settings.get("project") or "")
        return f"{settings['entity']}/{project}" if settings.get("entity") else project
    if name == TABLE and settings.get("dir"):
        return str(settings["dir"])
    return None


def destinations(exporters: dict[str, Any]) -> dict[str, str]:
    """Exporter -> its destination, for those that name one (see ``destination``)."""
    return {name: d for name, settings in exporters.items() for d in [destination(name, settings)] if d}


def write_spec(path: str, document: dict[str, Any]) -> None:
    with open(path, "w") as fh:
        json.dump(document, fh, indent=2, sort_keys=False)
        fh.write("\n")
