"""Opening the results store and writing and reading its entries.

The store is a URL: by default an SQLite file beside the local index (nothing to start), else
``GYM_RESULTS_URL`` or ``--results-url`` (``postgresql+psycopg://user@host/db`` for a team). Its
schema is brought to the newest version when it is opened (Alembic's migrations, shipped in
``migrations/``). An entry is written whole or not at all, keyed by run, benchmark and attempt: a
later write of the same key replaces it. Two writers at once lose nothing: SQLite waits for the
other's write (WAL, a busy timeout), PostgreSQL's key refuses the second insert, which is retried.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from alembic.util import CommandError
from sqlalchemy import Engine, and_, create_engine, delete, event, insert, select
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, DBAPIError, IntegrityError, NoSuchModuleError

from nemo_gym.orchestration.errors import UserError
from nemo_gym.orchestration.results import RunResults
from nemo_gym.orchestration.rules import TAG_RE
from nemo_gym.orchestration.store.entry import Entry, RunLabels, entry_problem, keepable_text, storable
from nemo_gym.orchestration.store.schema import entries
from nemo_gym.orchestration.store.url import URL_VARIABLE, chosen_url

# How long a writer waits for another's write to end before giving up (SQLite's lock; seconds).
BUSY_SECONDS = 60
# A key written by two writers at once on PostgreSQL: the second insert is refused and retried.
WRITE_TRIES = 5
CONNECT_SECONDS = 10
FIX = f"start it, or name another with --results-url or {URL_VARIABLE} (unset: the SQLite file beside the local index)"


def shown_url(url: str) -> str:
    """The URL as it may be shown: its password masked."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except ArgumentError:
        return "(not a database URL)"


@dataclass(frozen=True)
class Selection:
    """Which entries a history is about; None: any."""

    model_prefix: str | None = None
    sweep_id: str | None = None
    benchmarks: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()  # entries with every one of them


class Store:
    def __init__(self, engine: Engine, url: str) -> None:
        self.engine = engine
        self.url = url

    def write(self, written: Iterable[Entry]) -> int:
        """Each entry, replacing any of the same run, benchmark and attempt; how many were written.
        An entry no database can keep as it is (``entry_problem``) is refused before any is written."""
        written = list(written)
        for entry in written:
            problem = entry_problem(entry)
            if problem:
                raise UserError(f"run {entry.run_id} benchmark {entry.benchmark} cannot be stored: {problem}")
        count = 0
        for entry in written:
            self._write_one(entry.row())
            count += 1
        return count

    def _write_one(self, row: dict[str, Any]) -> None:
        key = and_(
            entries.c.run_id == row["run_id"],
            entries.c.benchmark == row["benchmark"],
            entries.c.attempt == row["attempt"],
        )
        for tries_left in range(WRITE_TRIES - 1, -1, -1):
            try:
                with self.engine.begin() as conn:  # the delete first: the transaction writes from its start
                    conn.execute(delete(entries).where(key))
                    conn.execute(insert(entries).values(**row))
                return
            except IntegrityError:  # another writer inserted the same key since: replace theirs
                if not tries_left:
                    raise

    def entries(self, selection: Selection | None = None) -> list[Entry]:
        """The selected entries, each run's benchmark at its latest attempt, oldest first."""
        selection = selection or Selection()
        for option, value in (("--model-prefix", selection.model_prefix), ("--sweep", selection.sweep_id)):
            if value is not None and not keepable_text(value):
                raise UserError(
                    f"{option}: no store holds a NUL or bytes that were not UTF-8; give the name as written"
                )
        if not all(keepable_text(name) for name in selection.benchmarks):
            raise UserError("--benchmark: no store holds a NUL or bytes that were not UTF-8; give the name as written")
        for tag in selection.tags:
            if not TAG_RE.fullmatch(tag):
                raise UserError(
                    f"--tag {tag[:80]!r}: no run is tagged so (a tag is as job.tags allows); give it as written"
                )
        query = select(entries)
        if selection.model_prefix:
            prefix = selection.model_prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
            query = query.where(entries.c.model.like(prefix + "%", escape="\\"))
        if selection.sweep_id:
            query = query.where(entries.c.sweep_id == selection.sweep_id)
        if selection.benchmarks:
            query = query.where(entries.c.benchmark.in_(selection.benchmarks))
        for tag in selection.tags:
            query = query.where(entries.c.tags.contains(f",{tag},", autoescape=True))
        query = query.order_by(entries.c.submitted_at, entries.c.run_id, entries.c.benchmark, entries.c.attempt)
        with self.engine.connect() as conn:
            rows = [Entry.from_row(row) for row in conn.execute(query)]
        latest = {(e.run_id, e.benchmark): e for e in rows}  # the last attempt of each, in order
        return list(latest.values())

    @property
    def shown_url(self) -> str:
        return shown_url(self.url)

    def close(self) -> None:
        self.engine.dispose()


def write_results(runs: list[RunResults], url: str | None = None, labels: list[RunLabels] | None = None) -> int:
    """Each run's finished benchmarks written into the store (``url``, else the default), replacing
    what an earlier write of the same run, benchmark and attempt wrote; how many entries were
    written. ``labels``: each run's ``job.training_step`` and ``job.tags`` where the caller knows
    them (else the step the model's name says, and no tags). ``UserError`` (one line) when the store
    cannot be reached."""
    store = open_store(url)
    try:
        known = labels or [RunLabels()] * len(runs)
        return sum(store.write(storable(run, label)[0]) for run, label in zip(runs, known))
    finally:
        store.close()


def open_store(url: str | None = None) -> Store:
    """The store at ``chosen_url(url)``, its schema brought to the newest version. ``UserError`` (one line naming the URL, its
    password masked, and the fix) when it cannot be reached or is no database URL."""
    from nemo_gym.orchestration.store.migrating import upgrade

    url = chosen_url(url)
    engine = _engine(url)
    try:
        upgrade(engine)
    except DBAPIError as exc:
        engine.dispose()
        raise UserError(f"cannot reach the results store {shown_url(url)} ({_reason(exc)}): {FIX}") from None
    except CommandError as exc:  # its schema is one this version has no migration for: a newer one's
        engine.dispose()
        raise UserError(
            f"the results store {shown_url(url)} has a schema this version does not know ({_reason(exc)}): "
            f"upgrade gym-orchestration to read it, or name another store with --results-url"
        ) from None
    return Store(engine, url)


def _engine(url: str) -> Engine:
    try:
        parsed = make_url(url)
    except ArgumentError:
        raise UserError(
            f"--results-url/{URL_VARIABLE}: {_without_credentials(url)[:80]!r} is not a database URL; give one such as "
            f"sqlite:////path/results.sqlite or postgresql+psycopg://user@host/db"
        ) from None
    is_sqlite = parsed.get_backend_name() == "sqlite"
    if is_sqlite and parsed.database and parsed.database != ":memory:":
        Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
    connect_args = {"timeout": BUSY_SECONDS} if is_sqlite else {"connect_timeout": CONNECT_SECONDS}
    try:
        engine = create_engine(parsed, connect_args=connect_args)
    except (NoSuchModuleError, ImportError) as exc:
        raise UserError(
            f"cannot open the results store {shown_url(url)}: no driver for it ({_reason(exc)}); "
            f"install one (pip install 'gym-orchestration[postgres]' for postgresql+psycopg://)"
        ) from None
    if is_sqlite:
        event.listen(engine, "connect", _sqlite_for_two_writers)
    return engine


def _sqlite_for_two_writers(dbapi_connection: Any, _record: Any) -> None:
    """WAL: readers never wait for a writer; the busy timeout: a writer waits for another's write."""
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute(f"PRAGMA busy_timeout={BUSY_SECONDS * 1000}")
    cursor.close()


def _without_credentials(text: str) -> str:
    """A string that is no URL, shown without whatever may be a password in it: everything before
    the last ``@`` (after a scheme, when it has one) is masked."""
    scheme, sep, rest = text.rpartition("//") if "//" in text else ("", "", text)
    if "@" not in rest:
        return text
    return f"{scheme}{sep}***@{rest.rsplit('@', 1)[1]}"


def _reason(exc: BaseException) -> str:
    text = str(getattr(exc, "orig", None) or exc)
    return " ".join(text.split())[:200]
