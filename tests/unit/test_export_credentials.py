"""Credentials the exports are given are never echoed, and ``gym eval export`` never runs code from
the run directory (issue 21): a token holding a control character (a CRLF token file) is refused
before any request, naming the variable and never showing it, in the job's exporters, in ``gym eval
export`` and at submit; no line recorded or printed carries a header or a credential; the run
directory's staged exporters are never what runs; and the config's softer holes (a token in the
tracking URI's query, mlflow with no address anywhere, a relative table
dir) are refused at submit with one line naming the field and the fix."""

from __future__ import annotations

import copy
import os
import warnings
from pathlib import Path
from typing import Any

import pytest
from export_jobs import BENCHMARK, RUN_ID, receipt, staged_job
from fakes.fake_mlflow import FakeMlflowServer
from hypothesis import given, settings
from hypothesis import strategies as st

from nemo_gym.orchestration import contract, exporters, library
from nemo_gym.orchestration.api import SubmitConfig
from nemo_gym.orchestration.errors import UserError
from nemo_gym.orchestration.exporters import record as rec
from nemo_gym.orchestration.exporters import spec
from nemo_gym.orchestration.exporters.mlflow_rest import MlflowClient, MlflowError
from nemo_gym.orchestration.exporters.run_exports import Runner, scrub
from nemo_gym.orchestration.plan.building import build_plan
from nemo_gym.orchestration.record import BenchmarkJob, SubmissionRecord, write_local_index
from nemo_gym.orchestration.validate import validate_config
from nemo_gym.orchestration.verbs.export.script import export_script
from nemo_gym.orchestration.verbs.submit.use_case import submission_secrets

PY38 = "/root/.pyenv/versions/3.8.18/bin/python3.8"
TOKEN = "tok-SENTINEL-4f1c9e77"
CONTROL = st.sampled_from([chr(c) for c in [*range(0x20), 0x7F, 0x85, 0x9B]])
# Token text: long enough and of an alphabet no fixed message is written in, so finding it in a
# message means it was echoed.
TOKEN_TEXT = st.text(alphabet="0123456789abcdef", min_size=12, max_size=40)


def hostile(draw_body: str, control: str, where: str) -> str:
    return {"end": draw_body + control, "crlf": draw_body + "\r\n", "inside": draw_body[:6] + control + draw_body[6:]}[
        where
    ]


# -- a control character in a credential ---------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(body=TOKEN_TEXT, control=CONTROL, where=st.sampled_from(["end", "crlf", "inside"]))
def test_a_credential_with_a_control_character_is_refused_by_name_never_shown(
    body: str, control: str, where: str
) -> None:
    token = hostile(body, control, where)
    problem = rec.credential_problem("MLFLOW_TRACKING_TOKEN", token)
    assert problem is not None and problem.startswith("MLFLOW_TRACKING_TOKEN holds ")
    assert "strip it" in problem and body[:6] not in problem and body[6:] not in problem
    assert "\n" not in problem and "\r" not in problem


def test_a_token_file_with_windows_line_endings_is_named_as_such() -> None:
    problem = rec.credential_problem("WANDB_API_KEY", TOKEN + "\r\n")
    assert problem == (
        "WANDB_API_KEY holds a line ending at its end (CR/LF: a token file saved with Windows line endings?); refused "
        "before any request, and not shown: strip it (for a token file: export WANDB_API_KEY=\"$(tr -d '\\r\\n' < FILE)\")"
    )
    assert (
        rec.credential_problem("WANDB_API_KEY", TOKEN) is None and rec.credential_problem("WANDB_API_KEY", None) is None
    )


@settings(max_examples=100, deadline=None)
@given(body=TOKEN_TEXT, control=CONTROL)
def test_the_mlflow_client_refuses_it_before_any_request(body: str, control: str) -> None:
    with FakeMlflowServer() as server:
        with pytest.raises(MlflowError) as err:
            MlflowClient(server.url, token=body + control).get_experiment_id("e")
        assert server.state.requests == []
    assert str(err.value).startswith("MLFLOW_TRACKING_TOKEN holds ") and body not in str(err.value)


@settings(max_examples=100, deadline=None)
@given(body=TOKEN_TEXT, control=CONTROL)
def test_an_exception_quoting_the_header_is_scrubbed_whatever_the_token(body: str, control: str) -> None:
    token = body + control
    # http.client's own words for a header it will not send, as they reached receipts before.
    text = f"ValueError: Invalid header value {('Bearer ' + token).encode()!r}"
    for scrubbed in (scrub(text, {"MLFLOW_TRACKING_TOKEN": token}), rec.scrub_secrets(text, [])):
        assert body not in scrubbed and "Bearer ***" in scrubbed


def test_a_request_refused_by_http_client_is_one_scrubbed_line() -> None:
    # Past the client's own check (a header set some other way): http.client refuses it, and the
    # error names the server, never the header.
    with FakeMlflowServer() as server:
        client = MlflowClient(server.url, token=TOKEN, retries=0)
        client._auth = f"Bearer {TOKEN}\r"
        with pytest.raises(MlflowError) as err:
            client.get_experiment_id("e")
    message = str(err.value)
    assert message.startswith(f"MLflow at {server.url}: the request was refused before it was sent")
    assert TOKEN not in message and "\r" not in message


def test_the_jobs_runner_refuses_it_records_why_and_still_runs_the_other_exports(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("MLFLOW_TRACKING_TOKEN", TOKEN + "\r")
    with FakeMlflowServer() as server:
        job = staged_job(tmp_path, {"mlflow": {"tracking_uri": server.url}, "table": {"dir": str(tmp_path / "t")}})
        lines: list[str] = []
        the_spec = spec.read_spec(str(job / exporters.SPEC_FILE))
        from nemo_gym.orchestration.exporters import jobfiles

        outcome = Runner(str(job), the_spec, report=lambda n, m: lines.append(f"{n}: {m}")).run(
            jobfiles.read_record(str(job), the_spec)
        )
        assert server.state.requests == []  # not one request with that header
    assert outcome == {"mlflow": "failed", "table": "done"}
    mlflow = receipt(job, "mlflow")
    assert mlflow is not None and mlflow.detail.startswith("MLFLOW_TRACKING_TOKEN holds a line ending at its end")
    assert TOKEN not in (job / ".gym" / "exports" / "mlflow.json").read_text() and TOKEN not in "\n".join(lines)


# -- gym eval export runs our exporters, never the run directory's ---------------------------------------

PLANTED = """\
import os, sys
for name in ("MLFLOW_TRACKING_TOKEN", "WANDB_API_KEY"):
    open(os.path.join(sys.argv[1], "stolen-" + name), "w").write(os.environ.get(name, ""))
print("export mlflow: done (planted): " + os.environ.get("MLFLOW_TRACKING_TOKEN", ""))
"""


def run_record(job: Path, export_to: dict[str, str] | None = None) -> SubmissionRecord:
    """The run's record; with ``export_to``, also the user's own index entry recording those destinations."""
    record = SubmissionRecord(
        gym_job_id=RUN_ID,
        submitted_at="2026-11-30T21:50:59Z",
        run_dir=str(job.parent),
        cluster="local",
        executor="local",
        submitted_by="me",
        benchmarks=[BenchmarkJob(benchmark=BENCHMARK, job_dir=str(job), job_id="1", export_to=export_to or {})],
    )
    if export_to is not None:
        write_local_index(record)
    return record


def plant(job: Path) -> None:
    """Every staged module replaced by a thief, and a few beside the run directory too."""
    staged = job / contract.SHIPPED_DIR
    for module in staged.rglob("*.py"):
        module.write_text(PLANTED)
    for directory in (job, job.parent):
        for name in ("run_exports.py", "record.py", "json.py", "base64.py"):
            (directory / name).write_text(PLANTED)


def test_gym_eval_export_of_a_planted_run_directory_runs_our_code_and_leaks_nothing(
    tmp_path: Path, monkeypatch
) -> None:
    monkeypatch.setenv("MLFLOW_TRACKING_TOKEN", TOKEN)
    monkeypatch.setenv("WANDB_API_KEY", TOKEN + "-wandb")
    with FakeMlflowServer() as server:
        job = staged_job(
            tmp_path / "runs", {"mlflow": {"tracking_uri": server.url}, "table": {"dir": str(tmp_path / "t")}}
        )
        plant(job)
        monkeypatch.chdir(job)  # the shell stands in the run directory, planted modules beside it
        [result] = library.export([run_record(job, {"mlflow": server.url})])[0]
        [run] = server.state.runs.values()
        sent = {headers.get("Authorization") for _, _, headers, _ in server.state.requests}
    assert not result.failed, result.lines
    assert any("] export mlflow: done (first export): run " in line for line in result.lines), result.lines
    assert any("] export table: done (first export): row " in line for line in result.lines), result.lines
    assert sent == {f"Bearer {TOKEN}"} and run["status"] == "FINISHED"
    files = [p for p in (tmp_path / "runs").rglob("*") if p.is_file()] + [p for p in (tmp_path / "t").rglob("*")]
    assert not [p for p in files if p.name.startswith("stolen-")]
    assert not [p for p in files if TOKEN.encode() in p.read_bytes()]
    assert TOKEN not in "\n".join(result.lines)


def test_the_script_names_no_file_of_the_run_directory_to_run_and_ships_our_source(tmp_path: Path) -> None:
    job = staged_job(tmp_path, {"table": {"dir": "/t"}})
    script = export_script(run_record(job), [], False, {"MLFLOW_TRACKING_TOKEN": TOKEN})
    assert contract.SHIPPED_DIR not in script and ".py" not in script
    assert "cd / " in script and "python3 - " in script
    # The same script goes over ssh: our source inside it, the credential only in its export line.
    assert script.count(TOKEN) == 1 and f"export MLFLOW_TRACKING_TOKEN={TOKEN}" in script


@pytest.mark.parametrize("var", ["MLFLOW_TRACKING_TOKEN", "MLFLOW_TRACKING_PASSWORD", "WANDB_API_KEY"])
def test_gym_eval_export_refuses_a_crlf_credential_before_anything_runs(tmp_path: Path, var: str) -> None:
    job = staged_job(tmp_path, {"table": {"dir": "/t"}})
    with pytest.raises(UserError) as err:
        export_script(run_record(job), [], False, {var: TOKEN + "\r\n"})
    assert str(err.value).startswith(f"{var} holds a line ending at its end") and TOKEN not in str(err.value)


# -- at submit ----------------------------------------------------------------------------------------------

BASE: dict[str, Any] = {
    "services": {"policy": {"type": "vllm", "container": "c", "model": "/m/step-10", "served_model_name": "s"}},
    "compute": {"c": {"type": "slurm", "account": "a"}},
    "driver": {"policy_model": "policy", "benchmarks": {"a": {}, "b": {}}},
    "job": {"output_path": "/runs", "export": {"mlflow": {"tracking_uri": "http://m:5000"}, "table": {"dir": "/t"}}},
    "otel": {"enabled": False},
}


def config_with(**changes: Any) -> dict[str, Any]:
    data = copy.deepcopy(BASE)
    for path, value in changes.items():
        *parents, leaf = path.split("__")
        node = data
        for part in parents:
            node = node.setdefault(part, {})
        if value is None:
            node.pop(leaf, None)
        else:
            node[leaf] = value
    return data


def problem_of(data: dict[str, Any]) -> str:
    with pytest.raises(UserError) as err:
        validate_config(data)
    return str(err.value)


def secrets_of(data: dict[str, Any]) -> dict[str, str]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        config = SubmitConfig.model_validate(data)
    return submission_secrets(config, build_plan(config, "gym-job-20260101T000000Z-000000"))


@pytest.mark.parametrize("query", ["token=abc", "access_token=abc", "x=1&api-key=abc", "Password=abc"])
def test_a_token_in_the_tracking_uris_query_is_refused_like_user_info(query: str) -> None:
    problem = problem_of(config_with(job__export__mlflow={"tracking_uri": f"http://m:5000/?{query}"}))
    assert problem.startswith("job.export.mlflow.tracking_uri: holds credentials in its query (?")
    assert "abc" not in problem and "set MLFLOW_TRACKING_TOKEN" in problem


def test_a_query_that_is_no_credential_is_still_refused_as_unused() -> None:
    problem = problem_of(config_with(job__export__mlflow={"tracking_uri": "http://m:5000/?workspace=3"}))
    assert problem == (
        "job.export.mlflow.tracking_uri: has a query or a fragment, which the MLflow REST API does not use: remove it"
    )


@pytest.mark.parametrize("table_dir", ["table", "./t", "../shared/t"])
def test_a_relative_table_dir_is_refused_with_the_fix(table_dir: str) -> None:
    problem = problem_of(config_with(job__export__table={"dir": table_dir}))
    assert problem.startswith(f"job.export.table.dir: {table_dir!r} is relative") and "absolute path" in problem


def test_an_absolute_or_home_table_dir_is_fine() -> None:
    for table_dir in ("/t", "~/tables/evals"):
        validate_config(config_with(job__export__table={"dir": table_dir}))


def test_mlflow_without_an_address_anywhere_is_refused_at_submit(monkeypatch) -> None:
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    data = config_with(job__export__mlflow={"experiment": "e"})
    validate_config(data)  # the config alone is fine: the address may come from the shell
    with pytest.raises(UserError) as err:
        secrets_of(data)
    assert str(err.value) == (
        "job.export.mlflow.tracking_uri: not set, and MLFLOW_TRACKING_URI is not set in this shell either, so the mlflow "
        "export would fail after the run: set job.export.mlflow.tracking_uri, or export MLFLOW_TRACKING_URI before submitting"
    )
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://mlflow.example:5000")
    assert secrets_of(data)["MLFLOW_TRACKING_URI"] == "http://mlflow.example:5000"  # it travels to the jobs
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://me:pw@mlflow.example:5000")
    with pytest.raises(UserError, match=r"^MLFLOW_TRACKING_URI \(this shell's, .*\): holds credentials") as err:
        secrets_of(data)
    assert "pw" not in str(err.value)


def test_a_benchmarks_own_mlflow_without_an_address_is_named_by_its_path(monkeypatch) -> None:
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    data = config_with(
        job__export={"table": {"dir": "/t"}}, driver__benchmarks={"a": {}, "b": {"export": {"mlflow": {}}}}
    )
    with pytest.raises(UserError, match=r"^driver\.benchmarks\.b\.export\.mlflow\.tracking_uri: not set"):
        secrets_of(data)
    assert "MLFLOW_TRACKING_URI" not in secrets_of(config_with())  # an address in the config: nothing carried


@pytest.mark.parametrize("var", ["MLFLOW_TRACKING_TOKEN", "WANDB_API_KEY"])
def test_a_carried_credential_with_a_line_ending_is_refused_at_submit(monkeypatch, var: str) -> None:
    monkeypatch.setenv(var, TOKEN + "\r")
    data = config_with(job__export={"mlflow": {"tracking_uri": "http://m:5000"}, "wandb": {"project": "p"}})
    with pytest.raises(UserError) as err:
        secrets_of(data)
    assert str(err.value).startswith(f"{var} holds a line ending at its end") and TOKEN not in str(err.value)


def test_a_host_credential_with_a_line_ending_is_refused_at_submit_naming_the_field(monkeypatch) -> None:
    monkeypatch.setenv("MY_HF_TOKEN", TOKEN + "\r\n")
    monkeypatch.setenv("SOME_NOTE", "two\nlines")  # not a credential by its name: carried as it is
    data = config_with(driver__env={"HF_TOKEN": "host:MY_HF_TOKEN", "NOTE": "host:SOME_NOTE"})
    with pytest.raises(UserError) as err:
        secrets_of(data)
    message = str(err.value)
    assert message.startswith("driver.env.HF_TOKEN (host:MY_HF_TOKEN): MY_HF_TOKEN holds a line ending at its end")
    assert TOKEN not in message and "\n" not in message and "\r" not in message and len(err.value.problems) == 1


@pytest.mark.skipif(not Path(PY38).exists(), reason="no Python 3.8 on this machine")
def test_the_shipped_exporters_run_under_the_hosts_python_3_8(tmp_path: Path, monkeypatch) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python3").symlink_to(PY38)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    job = staged_job(tmp_path / "runs", {"table": {"dir": str(tmp_path / "t")}})
    plant(job)
    [result] = library.export([run_record(job)])[0]
    assert (
        not result.failed and len(result.lines) == 1 and "] export table: done (first export): row " in result.lines[0]
    )


def test_an_unexpected_error_quoting_a_header_is_printed_scrubbed(monkeypatch, capsys) -> None:
    from nemo_gym.orchestration.cli import main as cli
    from nemo_gym.orchestration.verbs.export import command as cli_export

    def blow_up(*args: Any, **kwargs: Any) -> None:
        raise ValueError(f"Invalid header value {('Bearer ' + TOKEN + chr(13)).encode()!r}")

    monkeypatch.setenv("MLFLOW_TRACKING_TOKEN", TOKEN + "\r")
    monkeypatch.setattr(cli_export, "selected", lambda *args: library.Selection([]))
    monkeypatch.setattr(library, "export", blow_up)
    assert cli.main(["eval", "export", "some-run"]) != 0
    err = capsys.readouterr().err
    assert "internal error (ValueError: Invalid header value b'Bearer ***')" in err and TOKEN not in err


def test_a_spec_staged_with_a_relative_table_dir_is_refused_where_the_export_runs(tmp_path: Path, monkeypatch) -> None:
    from nemo_gym.orchestration.exporters import table

    monkeypatch.chdir(tmp_path)
    with pytest.raises(
        rec.ExportError, match=r"^the table dir 'tables' is relative, .*set an absolute job\.export\.table\.dir"
    ):
        table.export_to_table(
            rec.ExportRecord(
                run_id=RUN_ID,
                sweep_id=None,
                benchmark=BENCHMARK,
                model="m",
                served_name="s",
                params={},
                metrics={},
                written=1,
                expected=1,
                gpu_hours=None,
                wall_seconds=None,
                state="succeeded",
                rollouts_path=None,
            ),
            {"dir": "tables"},
            lambda _: None,
        )
    assert not (tmp_path / "tables").exists()
