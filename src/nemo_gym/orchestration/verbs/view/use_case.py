"""``gym eval view``: a read-only web view over runs and sweeps, served from this machine (or written
as files to share or archive). Each page asks what ``status``, ``results`` and ``compare`` ask, over
the runs' own connections, when it is asked for; a benchmark's samples are read a page at a time
where the rollouts lie (``samples.py``: here, or sent to the run's host), never a file whole.

It shows only the runs and sweeps it was given (every run and sweep of the local index without
names), by their ids: a page names no path. It listens on loopback unless told otherwise, and
elsewhere only with a token (asked once, then kept in a cookie).
"""

from __future__ import annotations

import functools
import hmac
import ipaddress
import json
import os
import re
import shlex
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from nemo_gym.orchestration import contract, samples, shipping
from nemo_gym.orchestration.connection import Connect, connect
from nemo_gym.orchestration.errors import UserError
from nemo_gym.orchestration.library.observing import RunStatus, list_runs, list_sweeps, results, status
from nemo_gym.orchestration.library.selecting import Selection, select
from nemo_gym.orchestration.record import SubmissionRecord, SweepRecord
from nemo_gym.orchestration.results import DEFAULT_METRIC
from nemo_gym.orchestration.shipping import Program
from nemo_gym.orchestration.verbs.view import pages

TOKEN_COOKIE = "gym_view"
# Sent with every page: it runs no script and loads nothing from elsewhere.
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; style-src 'unsafe-inline'; img-src 'self' data:; form-action 'self'; "
        "base-uri 'none'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}


@dataclass
class Viewer:
    """What the view shows (the runs and sweeps named; the whole local index without names) and how
    it asks for each page's data."""

    names: list[str]
    connect: Connect = connect
    metric: str = DEFAULT_METRIC
    results_url: str | None = None  # the results store of the history page (None: as gym eval history's)

    # -- what is shown -------------------------------------------------------------------------------

    def parts(self) -> tuple[list[SweepRecord], list[SubmissionRecord]]:
        """(sweeps, runs): the sweeps named and their runs, the runs named; without names, the index's."""
        if not self.names:
            return list_sweeps(), list_runs()
        sweeps: list[SweepRecord] = []
        runs: list[SubmissionRecord] = []
        for name in self.names:
            part: Selection = select([name])
            if part.sweep is not None and part.sweep not in sweeps:
                sweeps.append(part.sweep)
            runs += [r for r in part.records if r.run_dir not in {x.run_dir for x in runs}]
        return sweeps, _distinct(runs)

    def run(self, run_id: str) -> SubmissionRecord | None:
        return next((r for r in self.parts()[1] if r.gym_job_id == run_id), None)

    def sweep(self, sweep_id: str) -> tuple[SweepRecord, list[SubmissionRecord]] | None:
        sweeps, runs = self.parts()
        found = next((s for s in sweeps if s.sweep_id == sweep_id), None)
        if found is None:
            return None
        by_id = {r.gym_job_id: r for r in runs}
        return found, [by_id[r.run_id] for r in found.runs if r.run_id in by_id]

    # -- the pages -----------------------------------------------------------------------------------

    def index_html(self, links: pages.Links) -> str:
        sweeps, runs = self.parts()
        entries = {s.record.gym_job_id: _entry(s) for s in status(runs, connect=self.connect)} if runs else {}
        sweep_entries = [
            pages.SweepEntry(sweep, [entries[r.run_id] for r in sweep.runs if r.run_id in entries]) for sweep in sweeps
        ]
        return pages.index_page(sweep_entries, list(reversed([entries[r.gym_job_id] for r in runs])), links)

    def run_html(self, run_id: str, links: pages.Links) -> str | None:
        record = self.run(run_id)
        if record is None:
            return None
        [found] = results([record], self.metric, connect=self.connect)
        [state] = status([record], connect=self.connect)
        return pages.run_page(found, state, links, self._compared_with(record))

    def _compared_with(self, record: SubmissionRecord) -> list[SubmissionRecord]:
        """The runs a run is shown side by side with: its sweep's first run and the one before it."""
        found = self.sweep(record.sweep_id) if record.sweep_id else None
        if found is None:
            return []
        order = [r.gym_job_id for r in found[1]]
        if record.gym_job_id not in order:
            return []
        at = order.index(record.gym_job_id)
        wanted = dict.fromkeys(i for i in (0, at - 1) if 0 <= i < at)
        return [found[1][i] for i in wanted]

    def sweep_html(self, sweep_id: str, links: pages.Links) -> str | None:
        found = self.sweep(sweep_id)
        if found is None:
            return None
        _, records = found
        runs = results(records, self.metric, connect=self.connect) if records else []
        states = status(records, connect=self.connect) if records else []
        return pages.sweep_page(sweep_id, runs, states, self.metric, links)

    def samples_html(
        self, run_id: str, benchmark: str, start: int, reward: str, query: str, links: pages.Links
    ) -> str | None:
        record = self.run(run_id)
        job = next((u for u in record.units + record.benchmarks if u.benchmark == benchmark), None) if record else None
        if record is None or job is None:
            return None
        if reward not in samples.REWARD_FILTERS:
            reward = ""
        page = read_page(record, job.job_dir, max(0, start), reward, query[:200], self.connect)
        return pages.samples_page(record, benchmark, page, reward, query[:200], links)

    def compare_html(self, base_id: str, candidate_id: str, links: pages.Links) -> str | None:
        from nemo_gym.orchestration.library.observing import compare

        base, candidate = self.run(base_id), self.run(candidate_id)
        if base is None or candidate is None:
            return None
        comparison = compare(base, candidate, self.metric, connect=self.connect)
        rows = {}
        for b in comparison.benchmarks:
            tasks = {*b.paired.improved_tasks, *b.paired.regressed_tasks}
            if not tasks:
                continue
            shown = set(sorted(tasks)[: pages.FLIPPED_SHOWN * 2])
            rows[b.benchmark] = (
                read_tasks(base, _job_dir(base, b.benchmark), shown, self.connect),
                read_tasks(candidate, _job_dir(candidate, b.benchmark), shown, self.connect),
            )
        return pages.compare_page(comparison, base, candidate, rows, links)

    def history_html(self, links: pages.Links, query: dict[str, list[str]] | None = None) -> str:
        """The results store's history (``gym eval history``'s), filtered as the query asks; a bad
        filter, or a store off or out of reach, is one line on the page saying what to do."""
        from nemo_gym.orchestration.verbs.history.use_case import history
        from nemo_gym.orchestration.verbs.view import history_page

        asked, problem = history_page.parse_query(query or {})
        found = None
        if not problem:
            try:
                found = history(self.results_url, model_prefix=asked.model_prefix, sweep=asked.sweep)
            except UserError as exc:
                problem = "; ".join(exc.problems)
        return history_page.history_page(found, asked, problem, links)


def _entry(run: RunStatus) -> pages.RunEntry:
    return pages.RunEntry(run.record, run.summary, not run.final)


def _distinct(records: list[SubmissionRecord]) -> list[SubmissionRecord]:
    """The runs, each known by its own id: a copy of a run beside another copy (a run directory
    copied elsewhere: the same id) by its id and its directory's name."""
    seen: set[str] = set()
    out = []
    for record in records:
        if record.gym_job_id in seen:
            record = record.model_copy(update={"gym_job_id": pages.key_of(record, copied=True)})
        seen.add(record.gym_job_id)
        out.append(record)
    return out


def _job_dir(record: SubmissionRecord, benchmark: str) -> str:
    return next((b.job_dir for b in record.benchmarks if b.benchmark == benchmark), "")


# -- samples, where they lie --------------------------------------------------------------------------

_PAGE_TIMEOUT = 120


def read_page(
    record: SubmissionRecord, job_dir: str, start: int, reward: str, query: str, connect: Connect = connect
) -> samples.Page:
    """A page of a benchmark's samples: read here for a run on this machine, else on its host."""
    path = f"{job_dir}/{contract.ROLLOUTS_FILE}"
    if record.hostname is None:
        try:
            return samples.page_of_file(path, start, samples.PAGE_SIZE, reward, query)
        except (OSError, ValueError):  # missing, unreadable, or not a regular file (untrusted.Unreadable)
            return samples.Page([], start, False)
    answer = _on_host(record, ["page", path, str(start), str(samples.PAGE_SIZE), reward, query], connect)
    found = [s for s in map(samples.sample_from, answer.get("samples") or []) if s is not None]
    return samples.Page(found[: samples.PAGE_SIZE], start, bool(answer.get("more")))


def read_tasks(
    record: SubmissionRecord, job_dir: str, tasks: set[int], connect: Connect = connect
) -> dict[int, list[samples.Sample]]:
    """The samples of these tasks (every rollout), read where the rollouts lie."""
    path = f"{job_dir}/{contract.ROLLOUTS_FILE}"
    if record.hostname is None:
        try:
            return samples.tasks_of_file(path, tasks)
        except (OSError, ValueError):
            return {}
    answer = _on_host(record, ["tasks", path, ",".join(map(str, sorted(tasks)))], connect)
    found: dict[int, list[samples.Sample]] = {}
    for key, items in answer.items():
        if key.isdigit() and int(key) in tasks and isinstance(items, list):
            found[int(key)] = [s for s in map(samples.sample_from, items[:64]) if s is not None]
    return found


_PROGRAM_END = "__GYM_SAMPLES_END__"  # base64 and the loader never hold it


def _on_host(record: SubmissionRecord, args: list[str], connect: Connect) -> dict:
    """``samples.py ARGS`` run by the host's python3 (the package's own modules, shipped in the
    script on its standard input: never an argument, whatever their size); its JSON answer,
    bounded and read as untrusted ({} when there is none)."""
    program = shipping.inline(Program.SAMPLES)
    words = " ".join(shlex.quote(a) for a in args)
    script = f"cd / && python3 - {words} <<'{_PROGRAM_END}'\n{program}{_PROGRAM_END}\n"
    with connect(record.hostname) as conn:
        out = conn.run_script(script).stdout
    try:
        answer = json.loads(out.strip().splitlines()[-1][: 64 * 1024 * 1024]) if out.strip() else {}
    except (ValueError, IndexError, RecursionError):
        return {}
    return answer if isinstance(answer, dict) else {}


# -- serving ---------------------------------------------------------------------------------------------


# What a token may hold: it goes into a cookie (RFC 6265's cookie-octets, less the ones that need
# quoting), so no control character can split a header and no ';' can add an attribute.
TOKEN_RE = re.compile(r"[A-Za-z0-9._~+/=-]{8,256}")
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")


def check_binding(host: str, token: str | None) -> None:
    """Only loopback without a token: anywhere else, the runs' prompts and responses would be
    anyone's who can reach the port. A token is 8-256 letters, digits and ._~+/=-."""
    if token is not None and not TOKEN_RE.fullmatch(token):
        raise UserError(
            "--token (or GYM_VIEW_TOKEN): use 8 to 256 letters, digits and ._~+/=- (no spaces, control "
            "characters or ';'), e.g. the output of: python3 -c 'import secrets; print(secrets.token_urlsafe())'"
        )
    if token:
        return
    try:
        loopback = ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = host == "localhost"
    if not loopback:
        raise UserError(
            f"--host {host} serves the view to other machines, which needs a token: give --token (or set "
            f"GYM_VIEW_TOKEN); without one it listens on 127.0.0.1 only"
        )


def serve(viewer: Viewer, host: str = "127.0.0.1", port: int = 0, token: str | None = None) -> ThreadingHTTPServer:
    """The server (not started: ``serve_forever`` it); ``port`` 0 picks a free one."""
    check_binding(host, token)
    site = _Site(viewer, host, token, pages.Links(static=False))
    return ThreadingHTTPServer((host, port), functools.partial(_Handler, site=site))


@dataclass(frozen=True)
class _Site:
    """What the server shows, where it answers and to whom."""

    viewer: Viewer
    host: str
    token: str | None
    links: pages.Links

    def page(self, parts: list[str], query: dict[str, list[str]]) -> str | None:
        """The page a request's path names; None for none."""
        viewer, links = self.viewer, self.links
        if not parts:
            return viewer.index_html(links)
        kind, args = parts[0], parts[1:]
        if kind == "history" and not args:
            return viewer.history_html(links, query)
        if kind == "samples" and len(args) == 2:
            start = (query.get("start") or ["0"])[0]
            return viewer.samples_html(
                args[0],
                args[1],
                int(start) if start.isdigit() else 0,
                (query.get("reward") or [""])[0],
                (query.get("q") or [""])[0],
                links,
            )
        routes: dict[str, Callable[..., str | None]] = {
            "run": lambda run_id: viewer.run_html(run_id, links),
            "sweep": lambda sweep_id: viewer.sweep_html(sweep_id, links),
            "compare": lambda base, candidate: viewer.compare_html(base, candidate, links),
        }
        route = routes.get(kind)
        if route is None or len(args) != (2 if kind == "compare" else 1):
            return None
        return route(*args)


class _Handler(BaseHTTPRequestHandler):
    server_version = "gym-eval-view"
    sys_version = ""

    def __init__(self, *args: Any, site: _Site, **kwargs: Any) -> None:
        self.site = site  # first: the base class answers the request from its __init__
        super().__init__(*args, **kwargs)

    def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
        site, links = self.site, self.site.links
        if not site.token and not host_allowed(self.headers.get("Host", ""), site.host):
            # Another name for this loopback address: a page elsewhere rebinding its DNS to us.
            return self._send(
                HTTPStatus.MISDIRECTED_REQUEST,
                pages.message_page("Not here", "This view answers to its own address only.", links),
            )
        url = urllib.parse.urlsplit(self.path)
        query = urllib.parse.parse_qs(url.query)
        extra: dict[str, str] = {}
        if site.token:
            given = (query.get("token") or [""])[0] or _cookie(self.headers.get("Cookie", ""))
            if not hmac.compare_digest(given.encode(), site.token.encode()):
                return self._send(
                    HTTPStatus.FORBIDDEN,
                    pages.message_page("No entry", "This view needs its token (?token=...).", links),
                )
            extra["Set-Cookie"] = f"{TOKEN_COOKIE}={site.token}; HttpOnly; SameSite=Strict; Path=/"
        parts = [urllib.parse.unquote(p) for p in url.path.strip("/").split("/") if p]
        try:
            page = site.page(parts, query)
        except UserError as exc:
            page = pages.message_page("Cannot show this", "; ".join(exc.problems), links)
        except Exception as exc:  # noqa: BLE001 - a page fails alone, in one line, never the server
            page = pages.message_page(
                "Cannot show this", f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}", links
            )
        if page is None:
            return self._send(
                HTTPStatus.NOT_FOUND, pages.message_page("Not here", "This view shows no such page.", links), extra
            )
        self._send(HTTPStatus.OK, page, extra)

    def _send(self, code: HTTPStatus, page: str, extra: dict[str, str] | None = None) -> None:
        data = page.encode("utf-8", "backslashreplace")
        self.send_response(code)
        for name, value in {**SECURITY_HEADERS, **(extra or {})}.items():
            self.send_header(name, value)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the stdlib's name
        return  # quiet: the command says where it serves, not every request


def host_allowed(header: str, bound: str) -> bool:
    """Whether a request's Host header names this server: a loopback name or the address it listens
    on (any port). Without a token nothing else guards the view, so a page served from elsewhere
    that rebinds its name to 127.0.0.1 must not be answered."""
    name = header.strip().lower()
    if name.startswith("["):  # [::1]:8765
        name = name[1 : name.find("]")] if "]" in name else ""
    elif name.count(":") == 1:
        name = name.split(":", 1)[0]
    return bool(name) and name in {*LOOPBACK_NAMES, bound.lower().strip("[]")}


def _cookie(header: str) -> str:
    for part in header.split(";"):
        name, _, value = part.strip().partition("=")
        if name == TOKEN_COOKIE:
            return value
    return ""


# -- as files ----------------------------------------------------------------------------------------


# Marks a directory ``--static`` wrote, so that it may write there again; any other non-empty
# directory is the user's, and nothing in it is replaced.
STATIC_MARKER = ".gym-eval-view"


def write_static(viewer: Viewer, directory: str) -> list[Path]:
    """The same pages as files in ``directory``: the index, the results store's history, each run, each sweep, each benchmark's
    first page of samples, and each run of a sweep against the sweep's first run and the one
    before it, side by side. Only into a new, empty or earlier ``--static`` directory; each page
    written whole beside its name and renamed over it (never written through a link)."""
    out = static_directory(directory)
    links = pages.Links(static=True)
    written: list[Path] = []

    def write(name: str, page: str | None) -> None:
        if page is not None:
            written.append(replace_file(out, name, page))

    write(links.index(), viewer.index_html(links))
    write(links.history(), viewer.history_html(links))
    sweeps, runs = viewer.parts()
    for record in runs:
        rid = record.gym_job_id
        write(links.run(rid), viewer.run_html(rid, links))
        for job in record.benchmarks:
            write(links.samples(rid, job.benchmark), viewer.samples_html(rid, job.benchmark, 0, "", "", links))
        for other in viewer._compared_with(record):
            write(links.compare(other.gym_job_id, rid), viewer.compare_html(other.gym_job_id, rid, links))
    for sweep in sweeps:
        write(links.sweep(sweep.sweep_id), viewer.sweep_html(sweep.sweep_id, links))
    return written


def static_directory(directory: str) -> Path:
    """``--static DIR`` made ready: created if new; refused (one line) when it is a file, a link, not
    writable, or a directory of someone else's (not empty and not marked as ours)."""
    out = Path(directory).expanduser()
    try:
        if out.is_symlink() or (out.exists() and not out.is_dir()):
            raise UserError(f"--static {directory}: not a directory; name a new or empty directory")
        out.mkdir(parents=True, exist_ok=True)
        entries = [e.name for e in os.scandir(out)]
        if entries and not (out / STATIC_MARKER).is_file():
            raise UserError(
                f"--static {directory}: holds files that gym eval view did not write; name a new or empty directory"
            )
        replace_file(out, STATIC_MARKER, "pages written by gym eval view --static; it may write here again\n")
    except OSError as exc:
        raise UserError(f"--static {directory}: cannot write there ({exc.strerror or exc})") from None
    return out


def replace_file(folder: Path, name: str, text: str) -> Path:
    """``folder/name`` holding ``text``: written to a new file beside it (never opened through a
    link: O_EXCL, O_NOFOLLOW) and renamed over the name, which replaces a link rather than
    following it."""
    target = folder / name
    temporary = folder / f".{name}.{os.getpid()}.tmp"
    try:
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o644)
        with os.fdopen(fd, "w", encoding="utf-8", errors="backslashreplace") as fh:
            fh.write(text)
        os.replace(temporary, target)
    except OSError as exc:
        temporary.unlink(missing_ok=True)
        raise UserError(f"--static {folder}: cannot write {name} ({exc.strerror or exc})") from None
    return target


def environment_token() -> str | None:
    return os.environ.get("GYM_VIEW_TOKEN") or None
