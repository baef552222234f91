"""gym eval view without a browser: the samples reader (paged, filtered, streamed, bounded; read on
a run's host over its connection), the pages' escaping of what runs wrote, the token rule, the
server's answers (headers, 404s, a page that fails alone). tests/view drives a real Chromium."""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from view_runs import indexed_sweep

from nemo_gym.orchestration import contract, samples
from nemo_gym.orchestration.errors import UserError
from nemo_gym.orchestration.library import Viewer, check_binding, serve
from nemo_gym.orchestration.record import BenchmarkJob, SubmissionRecord
from nemo_gym.orchestration.verbs.view import pages as view
from nemo_gym.orchestration.verbs.view.use_case import read_page, read_tasks


def row(task: int, reward: float | None, response: str = "an answer", rollout: int = 0) -> str:
    data = {
        "responses_create_params": {"input": [{"role": "user", "content": f"question {task}"}]},
        "response": {"output": [{"type": "message", "content": [{"type": "output_text", "text": response}]}]},
        "_ng_task_index": task,
        "_ng_rollout_index": rollout,
        "expected_judgement": "Judgement: Yes",
    }
    if reward is not None:
        data["reward"] = reward
    return json.dumps(data) + "\n"


def test_a_page_reads_only_as_far_as_it_needs() -> None:
    read = []

    def lines():
        for i in range(100_000):
            read.append(i)
            yield row(i, float(i % 2)).encode()

    found = samples.page(samples.samples_of(lines()), start=50, size=10, reward=samples.PASSED)
    assert [s.task for s in found.samples] == list(range(101, 120, 2)) and found.more
    assert len(read) < 130  # 60 passed samples and one more: not the 100 000 lines


def test_filters_and_search() -> None:
    rows = [row(0, 1.0), row(1, 0.0, "the Needle here"), row(2, None), b"not json\n".decode()]
    every = list(samples.samples_of(r.encode() for r in rows))
    assert [s.task for s in every if samples.matches(s, samples.FAILED)] == [1]
    assert [s.task for s in every if samples.matches(s, samples.UNSCORED)] == [2, None]
    assert [s.task for s in every if samples.matches(s, "", "needle")] == [1]
    assert every[3].unreadable and every[0].prompt == "user: question 0" and every[0].response == "an answer"
    assert ("expected_judgement", "Judgement: Yes") in every[0].extras


def test_texts_are_cut_to_their_bounds() -> None:
    [s] = samples.samples_of([row(0, 1.0, "x" * (samples.TEXT_CAP + 50)).encode()])
    assert len(s.response) < samples.TEXT_CAP + 40 and s.response.endswith("(50 more characters)")


def test_a_page_is_read_on_the_run_s_host_over_its_connection(tmp_path, conn) -> None:
    """A run submitted elsewhere: samples.py and facts.py sent to its host in the script, the
    answer read back as untrusted."""
    job = tmp_path / "job"
    (job / "artifacts").mkdir(parents=True)
    (job / contract.ROLLOUTS_FILE).write_text("".join(row(i, float(i % 2)) for i in range(120)))
    record = SubmissionRecord(
        gym_job_id="gym-job-20261201T000000Z-aaaaaa",
        submitted_at="2026-12-01T00:00:00Z",
        run_dir=str(tmp_path),
        cluster="c",
        executor="slurm",
        submitted_by="me",
        hostname="login.fake",
        benchmarks=[BenchmarkJob(benchmark="job", job_dir=str(job), job_id="1")],
    )
    page = read_page(record, str(job), 0, samples.FAILED, "", conn.connect)
    assert [s.task for s in page.samples] == list(range(0, 100, 2)) and page.more
    assert [s.task for s in read_tasks(record, str(job), {3, 4}, conn.connect)[3]] == [3]
    assert conn.scripts and "python3 - page " in conn.scripts[0]


@settings(max_examples=40, deadline=None)
@given(text=st.text(min_size=1, max_size=60))
def test_whatever_a_response_holds_is_shown_as_text(text: str) -> None:
    [s] = samples.samples_of([row(0, 1.0, text).encode()])
    html = view.samples_page(
        SubmissionRecord(
            gym_job_id="gym-job-20261201T000000Z-aaaaaa",
            submitted_at="x",
            run_dir="/r",
            cluster="c",
            executor="local",
            submitted_by="me",
            benchmarks=[],
        ),
        "b",
        samples.Page([s], 0, False),
        "",
        text,
        view.Links(),
    )
    body = html.split("<main>", 1)[1]
    assert "<script" not in body.lower() and "onerror=" not in body.replace("onerror=&#", "")
    assert "\x1b" not in html and "\u202e" not in html


@pytest.mark.parametrize(
    ("host", "token", "refused"),
    [
        ("127.0.0.1", None, False),
        ("::1", None, False),
        ("localhost", None, False),
        ("0.0.0.0", None, True),
        ("10.1.2.3", "t0ken-123", False),
    ],
)
def test_off_loopback_the_view_needs_a_token(host: str, token: str | None, refused: bool) -> None:
    if refused:
        with pytest.raises(UserError, match="needs a token: give --token"):
            check_binding(host, token)
    else:
        check_binding(host, token)


def fetch(url: str) -> tuple[int, dict, str]:
    try:
        with urllib.request.urlopen(url, timeout=30) as answer:
            return answer.status, dict(answer.headers), answer.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, dict(err.headers), err.read().decode()


def test_the_server_s_answers(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    sweep_id, run_ids = indexed_sweep(tmp_path / "runs")
    server = serve(Viewer([sweep_id]), "127.0.0.1", 0, token="s3cret-token")
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        assert fetch(f"{base}/")[0] == 403
        code, headers, text = fetch(f"{base}/?token=s3cret-token")
        assert code == 200 and "default-src 'none'" in headers["Content-Security-Policy"]
        assert "HttpOnly" in headers["Set-Cookie"] and sweep_id in text
        assert fetch(f"{base}/run/gym-job-20990101T000000Z-ffffff?token=s3cret-token")[0] == 404  # not one of its runs
        assert fetch(f"{base}/nowhere/x?token=s3cret-token")[0] == 404
        code, _, text = fetch(f"{base}/samples/{run_ids[0]}/answer-judge?token=s3cret-token&start=x&reward=<b>")
        assert code == 200 and "task 0" in text  # a bad start or filter is the first page, unfiltered
    finally:
        server.shutdown()
        server.server_close()


def test_links_served_and_as_files() -> None:
    served, files = view.Links(), view.Links(static=True)
    assert served.samples("r", "b@2", 50, "passed", "a b") == "/samples/r/b%402?start=50&reward=passed&q=a+b"
    assert files.samples("r", "b@2") == "samples-r-b_2-0.html" and files.compare("a", "b") == "compare-a-b.html"
    assert files.run("../x") == "run-.._x.html"  # a name as a file name: no way up
    assert "/" not in files.run("../../etc/passwd")


def fetch_as(url: str, host_header: str) -> int:
    request = urllib.request.Request(url, headers={"Host": host_header})
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status
    except urllib.error.HTTPError as err:
        return err.code


def test_without_a_token_the_view_answers_only_to_its_own_names(tmp_path, monkeypatch) -> None:
    """DNS rebinding: a page at rebind.attacker.example whose name now points at 127.0.0.1 sends its
    own name as Host; the view answers it nothing."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    sweep_id, run_ids = indexed_sweep(tmp_path / "runs")
    server = serve(Viewer([sweep_id]), "127.0.0.1", 0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    page = f"http://127.0.0.1:{port}/samples/{run_ids[0]}/answer-judge"
    try:
        assert fetch_as(page, f"rebind.attacker.example:{port}") == 421
        assert fetch_as(page, "rebind.attacker.example") == 421
        assert fetch_as(page, "") == 421
        for name in (f"127.0.0.1:{port}", f"localhost:{port}", "LOCALHOST", f"[::1]:{port}"):
            assert fetch_as(page, name) == 200, name
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("token", ["t0ken\r\nSet-Cookie: x=1", "tok en-123", "a;Path=/x123", "short", "x" * 300])
def test_a_token_that_could_split_a_header_is_refused_in_one_line(token: str) -> None:
    with pytest.raises(UserError, match="--token .*letters, digits"):
        check_binding("127.0.0.1", token)


def test_the_token_is_never_printed(tmp_path, monkeypatch, capsys) -> None:
    from nemo_gym.orchestration.verbs.view import command as view_cli

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    indexed_sweep(tmp_path / "runs")

    def stop(self) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr("http.server.ThreadingHTTPServer.serve_forever", stop)
    monkeypatch.setenv("GYM_VIEW_TOKEN", "never-printed-9f8e7d")
    from nemo_gym.orchestration.cli.main import main

    assert main(["eval", "view", "--port", "0"]) == 0
    out, err = capsys.readouterr()
    assert "gym eval view: http://127.0.0.1:" in out and "never-printed-9f8e7d" not in out + err
    assert view_cli.DEFAULT_PORT  # the module the command runs


@pytest.mark.parametrize("port", ["99999", "-1", "http", "nan"])
def test_a_port_out_of_range_is_a_usage_line(port: str, capsys) -> None:
    from nemo_gym.orchestration.cli.main import main

    with pytest.raises(SystemExit) as exited:
        main(["eval", "view", "--port", port])
    assert exited.value.code == 2 and "argument --port" in capsys.readouterr().err


def test_static_pages_never_write_through_a_link_or_over_the_users_files(tmp_path, monkeypatch, capsys) -> None:
    from nemo_gym.orchestration.cli.main import main

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    indexed_sweep(tmp_path / "runs")
    important = tmp_path / "important"
    important.write_text("keep me")
    # A directory of the user's (not empty, not ours): refused, nothing touched.
    users = tmp_path / "users"
    users.mkdir()
    (users / "index.html").write_text("my own page")
    assert main(["eval", "view", "--static", str(users)]) == 1
    assert "holds files that gym eval view did not write" in capsys.readouterr().err
    assert (users / "index.html").read_text() == "my own page"
    # Our own directory, where index.html was made a link to a file elsewhere: the link is replaced.
    ours = tmp_path / "ours"
    assert main(["eval", "view", "--static", str(ours)]) == 0
    (ours / "index.html").unlink()
    (ours / "index.html").symlink_to(important)
    assert main(["eval", "view", "--static", str(ours)]) == 0
    assert important.read_text() == "keep me" and not (ours / "index.html").is_symlink()
    # A file, or a link, named as the directory: one line.
    for bad in (important, tmp_path / "link"):
        if bad.name == "link":
            bad.symlink_to(ours)
        assert main(["eval", "view", "--static", str(bad)]) == 1
        assert "not a directory" in capsys.readouterr().err


def test_the_sweep_and_compare_pages_word_their_tables_as_the_report_does(tmp_path) -> None:
    """result_tables' words on the view's pages (test_report.py: the report's), escaped there."""
    from types import SimpleNamespace

    from checkpoint_runs import checkpoint_runs

    from nemo_gym.orchestration import library
    from nemo_gym.orchestration.record import run_in_directory

    records = [
        run_in_directory(str(d)).model_copy(update={"sweep_values": {"k": f'<b>"{d.name}'}})
        for d in checkpoint_runs(tmp_path)
    ]
    runs = library.results(records)
    done = SimpleNamespace(summary="succeeded", final=True)
    links = view.Links(static=True)
    sweep = view.sweep_page("gym-sweep-x", runs, [done] * 3, "reward", links)
    assert '0.5000<div class="muted">12/12 samples</div>' in sweep
    assert '1.0000<div class="muted">9/12 samples, incomplete</div>' in sweep
    assert "&lt;b&gt;&#34;step-2000" in sweep and "<b>" not in sweep
    page = view.compare_page(library.compare(records[0], records[1]), records[0], records[1], {}, links)
    assert "<tr><th>tasks</th><th>base</th><th>candidate</th><th>delta</th><th>95% CI</th><th>p</th></tr>" in page
    assert '<span class="improved">improved</span>' in page and "adjusted p is below 0.05" in page
