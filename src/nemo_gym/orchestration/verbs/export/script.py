"""``gym eval export``: the script that reruns a run's exports on its submit host, and its answer;
and the submit side's checks of the credentials the exports are given.

The script runs *this package's* exporters (``nemo_gym.orchestration.exporters``, the modules a job
stages), shipped inside the script, against each job directory's data: its export spec, results,
events and receipts. Nothing from the run directory is run: a run directory may have been copied
or shared, and a ``run_exports.py`` planted there would be handed this shell's credentials. The
modules travel inside the program, in a here-document (``shipping.inline``), run by the host's
``python3`` from ``/`` with the current directory off its path; receipts and keys are the job's own, so an export done already is skipped unless forced.

The credentials this shell holds are exported at the top of the script, which travels on standard
input: they never reach a file or a command line. A credential holding a control character (a
token file's CRLF) is refused before anything runs, naming the variable and never showing it.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from nemo_gym.orchestration import contract, exporters, shipping
from nemo_gym.orchestration.api import env_sources_of
from nemo_gym.orchestration.errors import UserError
from nemo_gym.orchestration.exporters.record import credential_problem, scrub_secrets
from nemo_gym.orchestration.exporters.spec import ENV_TRACKING_URI, MLFLOW, SECRETS, tracking_uri_problem
from nemo_gym.orchestration.plan.exports import EXPORT_CREDENTIALS
from nemo_gym.orchestration.record import SubmissionRecord
from nemo_gym.orchestration.render import render_template
from nemo_gym.orchestration.shipping import Program

if TYPE_CHECKING:
    from nemo_gym.orchestration.api import BaseServiceConfig, DriverConfig, SubmitConfig

MARKER = "__GYM_EXPORT:"  # <benchmark><sep><line of the exporters' output>, or NONE
NO_EXPORTS = "__none__"
HEREDOC_END = "__GYM_EXPORTERS_END__"  # base64 and the loader never hold it
SPEC_END = "__GYM_SPEC_END__"  # one line of JSON never is it
CREDENTIAL_VARIABLES = sorted({var for names in EXPORT_CREDENTIALS.values() for var in names})


def bootstrap_source() -> str:
    """The installed exporters as one program for the host's ``python3 -`` (``shipping.inline``)."""
    return shipping.inline(Program.EXPORTERS)


def export_script(
    record: SubmissionRecord,
    to: list[str],
    force: bool,
    environ: Mapping[str, str],
    chosen: Mapping[str, Mapping[str, str]] | None = None,
    trusted: Sequence[str] = (),
    specs: Mapping[str, dict] | None = None,
) -> str:
    """The script for the submit host. ``chosen``: benchmark -> exporter -> destination as the
    user's own index recorded it; ``trusted``: destinations the user named. An exporter whose spec
    names another destination is refused credentials there (``run_exports.Chosen``). ``specs``:
    benchmark -> the spec to export it by (made here: ``gym eval export --to NAME`` with a
    destination), instead of the one in its job directory."""
    refused = [p for var in CREDENTIAL_VARIABLES for p in [credential_problem(var, environ.get(var))] if p]
    if refused:
        raise UserError(refused)
    options = [arg for name in to for arg in ("--to", name)] + (["--force"] if force else [])
    jobs = [
        {
            "spec": f"{job.job_dir}/{exporters.SPEC_FILE}",
            "run": ["gym_exporters", job.job_dir, *options, *destination_options(job.benchmark, chosen, trusted)],
            # One shell word: it holds the field separator, a control character.
            "prefix": shlex.quote(f"{MARKER}{job.benchmark}{contract.FIELD_SEPARATOR}"),
            "inline_spec": json.dumps((specs or {})[job.benchmark]) if job.benchmark in (specs or {}) else "",
        }
        for job in record.benchmarks
    ]
    return render_template(
        "export.sh.j2",
        credentials=[(var, shlex.quote(environ[var])) for var in CREDENTIAL_VARIABLES if environ.get(var)],
        heredoc_end=HEREDOC_END,
        spec_end=SPEC_END,
        bootstrap=bootstrap_source(),
        jobs=jobs,
        no_exports=NO_EXPORTS,
    )


def destination_options(
    benchmark: str, chosen: Mapping[str, Mapping[str, str]] | None, trusted: Sequence[str]
) -> list[str]:
    recorded = (chosen or {}).get(benchmark, {})
    options = ["--check-destinations"] + [
        arg for name, dest in recorded.items() for arg in ("--recorded", f"{name}={dest}")
    ]
    return options + [arg for dest in trusted for arg in ("--trust", dest)]


def read_export_output(
    out: str, record: SubmissionRecord, environ: Mapping[str, str] | None = None
) -> list[tuple[str, list[str], bool]]:
    """(benchmark, its exporters' lines, whether one failed) for each benchmark of the run; every
    line scrubbed of the credentials in ``environ`` (the exporters scrub theirs; this is the
    second lock, for whatever else the host's python printed)."""
    secrets = [(environ or {}).get(var) for var in SECRETS]
    found: dict[str, list[str]] = {job.benchmark: [] for job in record.benchmarks}
    for line in out.splitlines():
        if line.startswith(MARKER) and contract.FIELD_SEPARATOR in line:
            bench, text = line[len(MARKER) :].split(contract.FIELD_SEPARATOR, 1)
            if bench in found:
                found[bench].append(scrub_secrets(text, secrets))
    results = []
    for bench, lines in found.items():
        if lines == [NO_EXPORTS] or not lines:
            results.append(
                (bench, ["no exports are configured for this benchmark (job.export, or its own export)"], False)
            )
        else:
            results.append((bench, lines, any("FAILED" in text for text in lines)))
    return results


# -- the credentials a submission carries -------------------------------------------------------------

# A host: value whose name says it is a credential: a control character in it is a file's line ending.
CREDENTIAL_NAME = re.compile(r"TOKEN|API_?KEY|PASSWORD|PASSWD|SECRET|CREDENTIAL")


def host_credential_problems(
    owners: Mapping[str, DriverConfig | BaseServiceConfig],
    secrets: Mapping[str, tuple[str, str]],
    values: Mapping[str, str],
) -> list[str]:
    """One line per ``host:`` credential (by its key or variable's name) that cannot be sent as
    it is, naming the field and the variable, never the value."""
    problems = []
    for carrier, (owner, key) in secrets.items():
        var = env_sources_of(owners[owner])[key].ref
        if not (CREDENTIAL_NAME.search(key.upper()) or CREDENTIAL_NAME.search(var.upper())):
            continue
        problem = credential_problem(var, values[carrier])
        if problem:
            path = "driver" if owner == "driver" else f"services.{owner}"
            problems.append(f"{path}.env.{key} (host:{var}): {problem}")
    return problems


def export_environment_problems(
    config: SubmitConfig, carried_names: tuple[str, ...], carried: Mapping[str, str]
) -> list[str]:
    """What the exports would be given from this shell that cannot work: a credential holding a
    control character; an mlflow exporter with no tracking_uri where this shell has no
    MLFLOW_TRACKING_URI either (it would fail after the run), or one that holds credentials."""
    problems = [
        p for name, value in carried.items() if name != ENV_TRACKING_URI for p in [credential_problem(name, value)] if p
    ]
    if ENV_TRACKING_URI not in carried_names:
        return problems
    where = _mlflow_without_uri(config)
    uri = carried.get(ENV_TRACKING_URI)
    if not uri:
        problems.append(
            f"{where}: not set, and {ENV_TRACKING_URI} is not set in this shell either, so the mlflow export "
            f"would fail after the run: set {where}, or export {ENV_TRACKING_URI} before submitting"
        )
    else:
        problem = tracking_uri_problem(uri) or credential_problem(ENV_TRACKING_URI, uri)
        if problem:
            problems.append(
                f"{ENV_TRACKING_URI} (this shell's, the mlflow exporter's address as {where} is not set): {problem}"
            )
    return problems


def _mlflow_without_uri(config: SubmitConfig) -> str:
    """The YAML path of the first mlflow exporter that has no tracking_uri."""
    default = config.job.export.get(MLFLOW)
    for name, bench in config.driver.benchmarks.items():
        merged = config.exports_of(name).get(MLFLOW)
        if merged is not None and not merged.get("tracking_uri"):
            own = (bench.export or {}).get(MLFLOW)
            return (
                f"driver.benchmarks.{name}.export.mlflow.tracking_uri"
                if own or default is None
                else "job.export.mlflow.tracking_uri"
            )
    return "job.export.mlflow.tracking_uri"
