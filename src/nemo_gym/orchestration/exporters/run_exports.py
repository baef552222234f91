"""Run a job's exports: each exporter of the staged spec once, with a receipt each.

    python3 run_exports.py JOB_DIR [--spec FILE] [--to NAME]... [--force] [--state STATE] [--job-id ID]
                           [--check-destinations [--recorded NAME=DEST]... [--trust DEST]...]

Run inside the job after the driver (so that results leave the cluster with nobody watching), and
by ``gym eval export RUN [--to NAME] [--force]`` later, with the same code. For each exporter:

* its receipt (``receipts``) says ``done`` for these results: skipped, unless ``--force``;
* another process holds its lock: skipped (that process is exporting it now);
* else the receipt becomes ``running``, the export runs, and the receipt becomes ``done`` with the
  backend's run id, or ``failed`` with the reason in one line.

One line per exporter goes to the standard output, for the job's log. An export's failure never
changes the benchmark's state: the exit status is 0 whatever the exports did (2 for a usage error).
Nothing that holds a credential (``MLFLOW_TRACKING_TOKEN``, ``WANDB_API_KEY``, ...) is written or
printed: every line is scrubbed of their values before it goes anywhere.

``--check-destinations`` (``gym eval export``, which reads a run directory that may be a copy or a
colleague's): an exporter that would authenticate as the user (``authenticates``) runs only where
its spec's destination is one the user chose: the one their own index recorded at submit
(``--recorded``), or one they named (``--trust``). Else it is refused in one line naming the
destination and the fix, before any request. In the job the spec is the one just staged: no check.

Stdlib only, Python 3.8 syntax: staged as ``steps/exporters/`` (these modules and ``contract.py``)
and run by the node's ``python3``; wandb is imported only for a wandb export.
"""

from __future__ import annotations

import os
import sys
import time

# typing's Callable, not collections.abc's: the Exporter alias below is evaluated, and Python 3.8
# cannot subscript collections.abc.Callable.
from typing import Any, Callable  # noqa: UP035

from nemo_gym.orchestration import contract as c
from nemo_gym.orchestration.exporters import jobfiles, mlflow_rest, receipts, table, wandb_export
from nemo_gym.orchestration.exporters import record as r
from nemo_gym.orchestration.exporters import spec as s

EXIT_USAGE = 2
# Environment variables whose values must never reach a file or a log line.
SECRET_ENV = s.SECRETS


class ExportResult(c.Word):
    """What one exporter did in this run: the state its receipt was left in, or why nothing was done."""

    DONE = receipts.ReceiptState.DONE.value
    FAILED = receipts.ReceiptState.FAILED.value
    SKIPPED = "skipped"  # done already for these results, or another process is exporting it now
    REFUSED = "refused"  # its destination is not one the user chose; nothing was sent


Exporter = Callable[[r.ExportRecord, "dict[str, Any]", Callable[[str], None], str], r.ExportOutcome]


def _mlflow(
    record: r.ExportRecord, settings: dict[str, Any], on_run_id: Callable[[str], None], job_dir: str
) -> r.ExportOutcome:
    return mlflow_rest.export_to_mlflow(record, settings, on_run_id)


def _wandb(
    record: r.ExportRecord, settings: dict[str, Any], on_run_id: Callable[[str], None], job_dir: str
) -> r.ExportOutcome:
    return wandb_export.export_to_wandb(record, settings, on_run_id, job_dir)


def _table(
    record: r.ExportRecord, settings: dict[str, Any], on_run_id: Callable[[str], None], job_dir: str
) -> r.ExportOutcome:
    return table.export_to_table(record, settings, on_run_id)


EXPORTERS: dict[str, Exporter] = {s.MLFLOW: _mlflow, s.WANDB: _wandb, s.TABLE: _table}


def scrub(text: str, environ: Any = None) -> str:
    """``text`` with the value of every credential variable replaced, on one line."""
    env = os.environ if environ is None else environ
    return " ".join(r.scrub_secrets(text, [env.get(name) for name in SECRET_ENV]).split())


def credentials_problem(exporter: str, environ: Any = None) -> str | None:
    """Why the exporter's credentials in the environment cannot be sent (one line, never their
    values), or None: checked before the exporter makes any request."""
    env = os.environ if environ is None else environ
    for name in s.CREDENTIALS.get(exporter, ()):
        problem = r.credential_problem(name, env.get(name))
        if problem:
            return problem
    return None


def say(exporter: str, message: str) -> None:
    stamp = time.strftime("%H:%M:%S", time.gmtime())
    print(f"[gym {stamp}] export {exporter}: {scrub(message)}", flush=True)


def authenticates(exporter: str, settings: dict[str, Any], environ: Any = None) -> bool:
    """Whether the exporter would send credentials of whoever runs it: mlflow when this environment
    holds its token or password; wandb unless offline (its key is this environment's, or wandb's
    own login in ~/.netrc). The table sends none: it writes a row, never over a file that is not
    a gym table."""
    env = os.environ if environ is None else environ
    if exporter == s.MLFLOW:
        return any(env.get(name) for name in s.CREDENTIALS[s.MLFLOW])
    return exporter == s.WANDB and settings.get("mode", "online") != "offline"


class Chosen:
    """The destinations the user chose for a run: what their index recorded at submit, exporter ->
    destination, and the ones they named (``--trust``)."""

    def __init__(self, recorded: dict[str, str], trusted: list[str], environ: Any = None) -> None:
        self.recorded = recorded
        self.trusted = set(trusted)
        self.environ = environ

    def problem(self, exporter: str, settings: dict[str, Any]) -> str | None:
        """Why the exporter must not run with these settings (one line), or None."""
        where = s.destination(exporter, settings)
        if where is None or where == self.recorded.get(exporter) or where in self.trusted:
            return None
        if not authenticates(exporter, settings, self.environ):
            return None  # nothing of the user's goes there
        field = f"{receipts.SPEC_FILE} exporters.{exporter}.{s.DESTINATION_SETTING[exporter]}"
        recorded = self.recorded.get(exporter)
        said = f"your local index records {recorded}" if recorded else "your local index records no such destination"
        return (
            f"refused to send your credentials to {where} ({field}): {said} for this run (a copied or shared run "
            f"directory?); if you chose it, rerun gym eval export with --trust-destination {where}"
        )


class Runner:
    """Runs the exports of one job directory."""

    def __init__(
        self,
        job_dir: str,
        spec: s.ExportSpec,
        exporters: dict[str, Exporter] | None = None,
        report: Callable[[str, str], None] = say,
        chosen: Chosen | None = None,
    ) -> None:
        self.job_dir = job_dir
        self.spec = spec
        self.exporters = EXPORTERS if exporters is None else exporters
        self.report = report
        self.chosen = chosen  # None: every destination is the spec's, as staged (in the job)

    def run(
        self, record: r.ExportRecord, only: list[str] | None = None, force: bool = False
    ) -> dict[str, ExportResult]:
        """Each wanted exporter once; exporter -> what it did."""
        outcome = {}
        for name, settings in self.spec.exporters.items():
            if only and name not in only:
                continue
            outcome[name] = self.run_one(name, settings, record, force)
        for name in only or []:
            if name not in self.spec.exporters:
                self.report(
                    name, f"not configured for this benchmark (configured: {', '.join(self.spec.exporters) or 'none'})"
                )
                outcome[name] = ExportResult.SKIPPED
        return outcome

    def run_one(self, name: str, settings: dict[str, Any], record: r.ExportRecord, force: bool) -> ExportResult:
        refused = self.chosen.problem(name, settings) if self.chosen else None
        if refused:  # before the lock and the receipt: the run directory may well be someone else's
            self.report(name, f"FAILED: {refused}")
            return ExportResult.REFUSED
        lock = receipts.ExporterLock(self.job_dir, name)
        try:
            if not lock.acquire():
                self.report(name, "another process is exporting this benchmark right now; skipped")
                return ExportResult.SKIPPED
            # Read under the lock: a process that just finished this export has written its receipt.
            # What was sent, and where: an export to another destination is one of its own.
            fingerprint = f"{record.fingerprint()}@{s.destination(name, settings) or ''}"
            earlier = receipts.read_receipt(self.job_dir, name)
            why = receipts.decide(earlier, fingerprint, force)
            if why is None and earlier is not None:
                self.report(name, f"done already ({earlier.backend_run_id or 'no id'}, {earlier.time}); skipped")
                return ExportResult.SKIPPED
            return self._export(name, settings, record, earlier, why or "", fingerprint)
        except OSError as exc:  # the receipt or its lock cannot be written (a read-only job directory)
            self.report(name, f"FAILED: cannot keep its receipt in {receipts.EXPORTS_DIR}: {exc.strerror or exc}")
            return ExportResult.FAILED
        finally:
            lock.release()

    def _export(
        self,
        name: str,
        settings: dict[str, Any],
        record: r.ExportRecord,
        earlier: receipts.Receipt | None,
        why: str,
        fingerprint: str,
    ) -> ExportResult:
        attempts = (earlier.attempts if earlier else 0) + 1
        backend_id = [earlier.backend_run_id if earlier else ""]

        def write(state: receipts.ReceiptState, detail: str) -> None:
            receipt = receipts.Receipt(state, backend_id[0], scrub(detail), receipts.now_text(), fingerprint, attempts)
            receipts.write_receipt(self.job_dir, name, receipt)

        def on_run_id(run_id: str) -> None:
            # Known before the export ends: a receipt left running still says which run to look at.
            backend_id[0] = run_id
            write(receipts.ReceiptState.RUNNING, why)

        write(receipts.ReceiptState.RUNNING, why)
        exporter = self.exporters.get(name)
        try:
            if exporter is None:
                raise r.ExportError(f"unknown exporter {name!r}; this job knows {', '.join(self.exporters)}")
            refused = credentials_problem(name)
            if refused:
                raise r.ExportError(refused)
            result = exporter(record, settings, on_run_id, self.job_dir)
        except r.ExportError as exc:
            return self._failed(name, write, str(exc))
        except Exception as exc:  # a bug or a backend's surprise must not cost the job its other exports
            return self._failed(name, write, f"{type(exc).__name__}: {exc}")
        backend_id[0] = result.backend_run_id or backend_id[0]
        write(receipts.ReceiptState.DONE, result.detail)
        self.report(name, f"done ({why}): {result.detail}")
        return ExportResult.DONE

    def _failed(self, name: str, write: Callable[[receipts.ReceiptState, str], None], reason: str) -> ExportResult:
        write(receipts.ReceiptState.FAILED, reason)
        self.report(name, f"FAILED: {scrub(reason)} (the benchmark's state is unchanged; rerun with gym eval export)")
        return ExportResult.FAILED


def parse_args(argv: list[str]) -> dict[str, Any]:
    """The arguments (see the module's usage); ValueError when wrong."""
    out: dict[str, Any] = {
        "job_dir": None,
        "spec": None,
        "to": [],
        "force": False,
        "state": None,
        "job_id": None,
        "check_destinations": False,
        "recorded": [],
        "trust": [],
    }
    valued = {"--spec": "spec", "--state": "state", "--job-id": "job_id"}
    repeated = {"--to": "to", "--recorded": "recorded", "--trust": "trust"}
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--force":
            out["force"] = True
        elif arg == "--check-destinations":
            out["check_destinations"] = True
        elif arg in repeated and i + 1 < len(argv):
            out[repeated[arg]].append(argv[i + 1])
            i += 1
        elif arg in valued and i + 1 < len(argv):
            out[valued[arg]] = argv[i + 1]
            i += 1
        elif not arg.startswith("--") and out["job_dir"] is None:
            out["job_dir"] = arg
        else:
            raise ValueError(f"unexpected argument {arg!r}")
        i += 1
    if not out["job_dir"]:
        raise ValueError("the job directory is missing")
    if out["state"] is not None:
        out["state"] = _state(out["state"])
    return out


def _state(word: str) -> c.Status:
    state = c.Status.from_word(word)
    if state is None:
        raise ValueError(f"--state {word!r} is not a state ({', '.join(c.Status)})")
    return state


def main(argv: list[str] | None = None) -> int:
    try:
        args = parse_args(list(sys.argv[1:] if argv is None else argv))
    except ValueError as exc:
        print(
            f"usage: run_exports.py JOB_DIR [--spec FILE] [--to NAME]... [--force] [--state STATE] [--job-id ID] "
            f"[--check-destinations [--recorded NAME=DEST]... [--trust DEST]...]: {exc}",
            file=sys.stderr,
        )
        return EXIT_USAGE
    job_dir = os.path.abspath(args["job_dir"])
    spec_path = args["spec"] or os.path.join(job_dir, receipts.SPEC_FILE)
    job_id = args["job_id"] or os.environ.get(c.ENV_JOB_ID) or None
    try:
        spec = s.read_spec(spec_path)
        record = jobfiles.read_record(job_dir, spec, job_id=job_id, state=args["state"])
    except r.ExportError as exc:
        say("all", f"FAILED: {exc} (nothing exported; the benchmark's state is unchanged)")
        return 0
    Runner(job_dir, spec, chosen=chosen_of(args)).run(record, only=args["to"], force=args["force"])
    return 0


def chosen_of(args: dict[str, Any]) -> Chosen | None:
    if not args["check_destinations"]:
        return None
    recorded = dict(item.split("=", 1) for item in args["recorded"] if "=" in item)
    return Chosen(recorded, args["trust"])


if __name__ == "__main__":
    sys.exit(main())
