"""Every verb's every option, given a hostile value (NaN, infinities, huge, negative, empty, 100,000
characters, control characters, a path up and out), answers in short lines: a usage error or one
error line naming the thing, never an internal error, a traceback or the value echoed whole
(issue 38). The verbs and their options are read from the parser itself, so a new one is covered."""

from __future__ import annotations

import argparse
import http.server
import time

import pytest

from nemo_gym.orchestration.cli.main import build_parser, main
from nemo_gym.orchestration.record import BenchmarkJob, SubmissionRecord, current_user, write_local_index

HOSTILE = [
    "nan",
    "inf",
    "-inf",
    "1e309",
    "-1",
    "0",
    "99999999999999999999999",
    "",
    "x" * 100_000,
    "\x1b[31m\r\nX-Injected: 1",
    "../../../etc/passwd",
    "-",
]
# Values for what a verb requires, so that the hostile one is what it meets.
REQUIRED = {
    "--config": "missing-config.yaml",
    "--policy": "missing-policy.yaml",
    "--detect": "0.1",
    "--output": "o.html",
}
LINE_LIMIT = 2000  # characters a line may have: no value of 100,000 characters comes back whole


def verbs() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    top = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    evals = top.choices["eval"]
    return dict(next(a for a in evals._actions if isinstance(a, argparse._SubParsersAction)).choices)


def cases() -> list[tuple[str, str]]:
    found = []
    for verb, parser in verbs().items():
        for action in parser._actions:
            if action.option_strings and action.nargs != 0 and not isinstance(action, argparse._HelpAction):
                found.append((verb, action.option_strings[-1]))
        found.append((verb, "POSITIONAL"))
    return found


def argv_for(verb: str, option: str, value: str) -> list[str]:
    parser = verbs()[verb]
    args = [verb]
    positionals = [a for a in parser._actions if not a.option_strings]
    for action in positionals:
        if action.nargs in (None, 1) or (option == "POSITIONAL" and action is positionals[0]):
            args.append(value if option == "POSITIONAL" and action is positionals[0] else "no-such-run")
    for action in parser._actions:
        if action.required and action.option_strings and action.option_strings[-1] != option:
            args += [action.option_strings[-1], REQUIRED.get(action.option_strings[-1], "x")]
    if option != "POSITIONAL":
        args.append(f"{option}={value}")
    if verb == "watch":
        args.append("--once")  # one look, never a loop
    return ["eval", *args]


def one_run_of_yours(tmp_path) -> None:
    """An index holding one run, so that the verbs that read a run go past "no runs" to the value."""
    run_id = "gym-job-20250101T000000Z-aaaaaa"
    run_dir = tmp_path / "runs" / run_id
    job = BenchmarkJob(benchmark="b", job_dir=str(run_dir / "b"), job_id=None, error="refused")
    write_local_index(
        SubmissionRecord(
            gym_job_id=run_id,
            submitted_at="2025-01-01T00:00:00.000Z",
            run_dir=str(run_dir),
            cluster="here",
            executor="local",
            submitted_by=current_user(),
            benchmarks=[job],
        )
    )


@pytest.mark.parametrize("index", ["empty", "one run"])
@pytest.mark.parametrize(("verb", "option"), cases())
def test_hostile_values_get_short_lines_never_an_internal_error(
    verb, option, index, capsys, monkeypatch, tmp_path, own_index
) -> None:
    monkeypatch.chdir(tmp_path)
    if index == "one run":
        one_run_of_yours(tmp_path)
    monkeypatch.setattr(http.server.ThreadingHTTPServer, "serve_forever", interrupted)
    monkeypatch.setattr(time, "sleep", interrupted)
    for value in HOSTILE:
        try:
            code = main(argv_for(verb, option, value))
        except SystemExit as exited:  # argparse's usage error
            code = exited.code
        out, err = capsys.readouterr()
        said = f"{verb} {option}={value[:40]!r}: "
        assert "internal error" not in err and "Traceback" not in err, said + err[:2000]
        assert code in (0, 1, 2, 3, 4, 130), said + str(code)
        assert all(len(line) <= LINE_LIMIT for line in (out + err).splitlines()), said + "a line too long"
        assert "\x1b" not in out + err, said + "a control character printed"


def interrupted(*_: object) -> None:
    raise KeyboardInterrupt  # a server or a wait would go on: stop it as Ctrl-C does
