"""Evaluating checkpoints as training writes them (``gym eval watch``): each look scans the
directory, asks the cluster about the checkpoints still pending (one probe per host), lets
``checkpoints.next_steps`` decide, and carries its actions out — a new checkpoint submitted as a
run of the watch's one sweep (its training step recorded for the exports), a failed one
resubmitted with ``gym eval resubmit``'s recovery — writing the watch's state into the sweep's
record in the local index after every change, so a watcher stopped anywhere starts again where
it was and never submits a checkpoint twice."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from pydantic import ValidationError

from nemo_gym.orchestration.api import SubmitConfig
from nemo_gym.orchestration.connection import Connect, connect
from nemo_gym.orchestration.errors import ConnectionLost, UserError
from nemo_gym.orchestration.library.composing import Composition, compose
from nemo_gym.orchestration.library.observing import status
from nemo_gym.orchestration.library.storing import feed_store_of
from nemo_gym.orchestration.overrides import hydra_value
from nemo_gym.orchestration.record import (
    SubmissionRecord,
    SweepRecord,
    all_sweeps,
    current_user,
    indexed_run,
    now_utc,
    submission_origin,
    write_sweep_index,
)
from nemo_gym.orchestration.verbs.resubmit.use_case import RunResubmit, resubmit
from nemo_gym.orchestration.verbs.submit.use_case import prepare, submit
from nemo_gym.orchestration.verbs.watch.checkpoints import (
    Resubmit,
    RunView,
    Submit,
    Update,
    next_steps,
    scan,
)
from nemo_gym.orchestration.watch_state import Checkpoint, CheckpointPhase, WatchState


@dataclass(frozen=True)
class WatchEvent:
    """One thing that happened to a checkpoint, as one line."""

    step: int
    path: str
    phase: CheckpointPhase
    text: str

    def line(self) -> str:
        return f"step {self.step} ({self.path}): {self.text}"


@dataclass(frozen=True)
class WatchSettings:
    """What ``gym eval watch`` was told."""

    config: str
    overrides: tuple[str, ...]
    directory: str
    pattern: str = "*"
    ready_file: str | None = None
    settle_seconds: float = 60.0
    every_seconds: float = 60.0
    max_pending: int | None = None
    max_attempts: int = 3
    key: str | None = None  # the config key a checkpoint's path goes in (default: the policy's model)


def watch_checkpoints(
    settings: WatchSettings,
    *,
    once: bool = False,
    on_event: Callable[[WatchEvent], None] = lambda event: None,
    on_start: Callable[[SweepRecord], None] = lambda sweep: None,
    connect: Connect = connect,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.time,
) -> SweepRecord:
    """Watch ``settings.directory`` until stopped (KeyboardInterrupt, between two looks or in a
    sleep: the state is written after every change), or for one look with ``once``; the watch's
    sweep as it stands. ``on_start`` is told the sweep (new, or the one this watch goes on with)."""
    sweep = _watch_sweep(settings)
    on_start(sweep)
    while True:
        sweep = look(sweep, settings, on_event, connect, clock)
        if once:
            return sweep
        sleep(settings.every_seconds)


def look(
    sweep: SweepRecord,
    settings: WatchSettings,
    on_event: Callable[[WatchEvent], None],
    connect: Connect = connect,
    clock: Callable[[], float] = time.time,
) -> SweepRecord:
    """One look: scan, probe the pending checkpoints, decide, act; the sweep after it."""
    state = _state(sweep)
    found = scan(state.directory, state.pattern, state.ready_file, state.settle_seconds, clock())
    records = {c.run_id: record for c in state.checkpoints if c.run_id for record in [indexed_run(c.run_id)] if record}
    pending = [records[c.run_id] for c in state.checkpoints if c.phase.pending and c.run_id in records]
    views = _views(pending, state, connect)
    watcher = _Watcher(sweep, settings, on_event, connect)
    for action in next_steps(state, found, views, set(records)):
        watcher.act(action)
    watcher.flush()
    return watcher.sweep


# -- the watch's sweep -----------------------------------------------------------------------------


def _watch_sweep(settings: WatchSettings) -> SweepRecord:
    """The sweep of this watch in the local index (the same directory, config, overrides, key and
    pattern), or a new one."""
    from nemo_gym.orchestration.sweep import new_sweep_id

    config = _config_of(settings)
    wanted = _watch_state(settings, config)
    for sweep in reversed(all_sweeps()):
        if sweep.watch is not None and sweep.watch.same_watch(wanted):
            # The settings that only pace the watch are this command's.
            kept = wanted.model_copy(update={"checkpoints": sweep.watch.checkpoints})
            return sweep.model_copy(update={"watch": kept})
    return SweepRecord(
        sweep_id=new_sweep_id(),
        submitted_at=now_utc(),
        submitted_by=current_user(),
        submitted_from=submission_origin(),
        config=wanted.config,
        swept=[wanted.key],
        executor=next(iter(config.compute.values())).type,
        hostname=next(iter(config.compute.values())).hostname,
        runs=[],
        watch=wanted,
    )


def _config_of(settings: WatchSettings) -> SubmitConfig:
    """The watch's config with its overrides, validated (a checkpoint's path goes in later)."""
    [combination] = compose(settings.config, list(settings.overrides)).combinations
    return combination.config


def _watch_state(settings: WatchSettings, config: SubmitConfig) -> WatchState:
    config_path = str(Path(settings.config).expanduser().resolve())
    directory = os.path.abspath(os.path.expanduser(settings.directory))
    if not os.path.isdir(directory):
        raise UserError(
            f"{settings.directory} is no directory; name the one the training run writes its checkpoints into"
        )
    key = settings.key or _policy_model_key(config)
    if settings.key:
        _check_key(settings, key)
    try:
        return WatchState(
            directory=directory,
            pattern=settings.pattern,
            ready_file=settings.ready_file,
            settle_seconds=settings.settle_seconds,
            key=key,
            config=config_path,
            overrides=list(settings.overrides),
            max_pending=settings.max_pending,
            max_attempts=settings.max_attempts,
        )
    except ValidationError as exc:
        raise UserError([f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()]) from None


def _check_key(settings: WatchSettings, key: str) -> None:
    """``--key`` must name a key the config has: each checkpoint's path is set there, and a key the
    config lacks would fail every checkpoint (and --once would exit 0 having evaluated nothing)."""
    probe = [*settings.overrides, f"{key}={hydra_value('/checkpoint/probe')}"]
    try:
        compose(settings.config, probe)
    except UserError as exc:
        raise UserError(f"--key {key}: the config cannot take a checkpoint's path there ({exc.problems[0]})") from None


def _policy_model_key(config: SubmitConfig) -> str:
    """``services.<policy>.model``: where a checkpoint's path goes, unless ``--key`` says."""
    policy = config.driver.policy_model
    if not policy or not hasattr(config.services[policy], "model"):
        raise UserError(
            "driver.policy_model names no model service, so the watch does not know where a checkpoint's path "
            "goes; give it with --key, e.g. --key services.judge.model"
        )
    return f"services.{policy}.model"


def _state(sweep: SweepRecord) -> WatchState:
    assert sweep.watch is not None
    return sweep.watch


# -- what the cluster says of the pending checkpoints ---------------------------------------------


def _views(records: list[SubmissionRecord], state: WatchState, connect: Connect) -> dict[str, RunView]:
    """Each pending checkpoint's run, as a probe finds it; a failed one with whether resubmit would
    queue it again. A host that cannot be reached tells nothing (its checkpoints keep their phase)."""
    if not records:
        return {}
    try:
        runs = status(records, connect=connect)
    except (UserError, ConnectionLost):
        return {}
    feed_store_of(runs, connect=connect)  # as a status read does: a final run's results kept in the history
    views = {}
    failed = []
    for run in runs:
        running = any(job.state in ("running", "starting") for job in run.jobs)
        detail = "; ".join(f"{job.benchmark}: {job.state} ({job.detail})" for job in run.jobs)
        # Ended only once the scheduler has let go of its jobs too: until then they count against
        # --max-pending (and the site's limits).
        final = run.final and not any(job.held for job in run.jobs)
        views[run.record.gym_job_id] = RunView(final, final and run.succeeded, running, detail)
        if final and not run.succeeded:
            failed.append(run.record)
    if failed:
        try:
            plans = resubmit(failed, max_attempts=state.max_attempts, dry_run=True, connect=connect)
        except (UserError, ConnectionLost):
            plans = []
        for plan in plans:
            view = views[plan.record.gym_job_id]
            views[plan.record.gym_job_id] = replace(view, retry=_infrastructure_only(plan))
    return views


def _infrastructure_only(plan: RunResubmit) -> bool:
    """Whether resubmit would queue the run again and every benchmark it would queue failed for a
    cause a rerun need not repeat (a node, a walltime, a service dying mid-run: the infrastructure),
    not its config's own fault (a driver that failed, a service that never started: said, for a
    person to look at; ``gym eval resubmit`` still retries those once when asked)."""
    acting = [b for b in plan.benchmarks if b.plan.remedy.acts]
    causes = [b.info.status.history[-1].cause if b.info.status.history else None for b in acting]
    return bool(acting) and not any(cause is not None and cause.repeats_on_rerun for cause in causes)


# -- acting ----------------------------------------------------------------------------------------


class _Watcher:
    """Carries out a look's actions, writing the sweep's record after each that must survive a stop
    (``flush`` writes the rest at the end of the look)."""

    def __init__(
        self, sweep: SweepRecord, settings: WatchSettings, on_event: Callable[[WatchEvent], None], connect: Connect
    ) -> None:
        self.sweep = sweep
        self.settings = settings
        self.on_event = on_event
        self.connect = connect
        self._base = sweep  # the sweep's runs (a submission's sweep once it has added one)
        self._checkpoints = {c.path: c for c in _state(sweep).checkpoints}
        self._unwritten = False

    def act(self, action: Submit | Resubmit | Update) -> None:
        if isinstance(action, Update):
            cp = action.checkpoint
            self._set(cp, phase=action.phase, detail=action.detail, retry=action.retry)
            self._say(cp, action.phase, self._update_text(action))
        elif isinstance(action, Submit):
            self._submit(action.checkpoint)
        else:
            self._resubmit(action.checkpoint)

    def _submit(self, cp: Checkpoint) -> None:
        state = _state(self.sweep)
        overrides = [*state.overrides, f"{state.key}={hydra_value(cp.path)}", f"++job.training_step={cp.step}"]
        try:
            [combination] = compose(state.config, overrides).combinations
            combination = replace(combination, values=((state.key, cp.path),))
            prepared = prepare(Composition([combination], self.sweep.sweep_id, state.config))
        except UserError as exc:
            self._set(cp, phase=CheckpointPhase.FAILED, detail=f"not submitted: {exc.problems[0]}", retry=False)
            self._say(cp, CheckpointPhase.FAILED, f"not submitted: {'; '.join(exc.problems)}")
            return
        run_id = prepared.runs[0].plan.run_id
        # Recorded before it is queued: a watcher stopped from here on never submits it again.
        self._set(cp, phase=CheckpointPhase.SUBMITTING, run_id=run_id, attempts=1, detail="submitting")
        try:
            submission = submit(prepared, connect=self.connect, joining=self.sweep)
        except UserError as exc:
            self._set(cp, phase=CheckpointPhase.FAILED, detail=f"not submitted: {exc.problems[0]}", retry=False)
            self._say(cp, CheckpointPhase.FAILED, f"not submitted: {'; '.join(exc.problems)}")
            return
        [record] = submission.records
        refused = [b for b in record.units if not b.queued]
        if refused or submission.interrupted:
            why = submission.interrupted or "; ".join(f"{b.benchmark}: {b.error}" for b in refused)
            self._set(cp, phase=CheckpointPhase.FAILED, detail=why, retry=False, sweep=submission.sweep)
            self._say(cp, CheckpointPhase.FAILED, f"run {run_id} was not queued whole: {why}")
            return
        self._set(cp, phase=CheckpointPhase.QUEUED, detail="queued", sweep=submission.sweep)
        jobs = ", ".join(f"{b.benchmark} -> {b.job_id}" for b in record.units if b.job_id) or "its lanes"
        self._say(cp, CheckpointPhase.QUEUED, f"submitted as run {run_id} ({jobs})")

    def _resubmit(self, cp: Checkpoint) -> None:
        record = indexed_run(cp.run_id or "")
        if record is None:
            self._set(cp, retry=False)
            return
        try:
            [run] = resubmit([record], max_attempts=_state(self.sweep).max_attempts, connect=self.connect)
        except UserError as exc:
            self._set(cp, retry=False, detail=f"not resubmitted: {exc.problems[0]}")
            self._say(cp, CheckpointPhase.FAILED, f"not resubmitted: {'; '.join(exc.problems)}")
            return
        if run.queued:
            self._set(cp, phase=CheckpointPhase.QUEUED, attempts=cp.attempts + 1, retry=False, detail="resubmitted")
            jobs = ", ".join(f"{b.benchmark} -> {b.job_id}" for b in run.queued)
            self._say(cp, CheckpointPhase.QUEUED, f"resubmitted run {cp.run_id} (attempt {cp.attempts + 1}: {jobs})")
        else:
            self._set(cp, retry=False)
            self._say(
                cp,
                CheckpointPhase.FAILED,
                f"not resubmitted: {'; '.join(b.refused or b.plan.text for b in run.benchmarks)}",
            )

    # -- the record --------------------------------------------------------------------------------

    def _set(self, cp: Checkpoint, sweep: SweepRecord | None = None, **changes: object) -> None:
        """The checkpoint changed as said (added when new). Written at once, unless all that changed
        is that a checkpoint was seen (a scan finds it again after a stop): those are written once
        at the end of the look, so that a look costs per new checkpoint, not per seen one."""
        if sweep is not None:
            self._base = sweep
        self._checkpoints[cp.path] = self._checkpoints.get(cp.path, cp).model_copy(update=changes)
        self._unwritten = True
        if changes.get("phase") not in (None, CheckpointPhase.WAITING) or "run_id" in changes or sweep is not None:
            self.flush()

    def flush(self) -> None:
        """The sweep as it stands, runs and checkpoints in step order, written to the index."""
        if not self._unwritten:
            return
        checkpoints = sorted(self._checkpoints.values(), key=lambda c: (c.step, c.path))
        steps = {c.run_id: c.step for c in checkpoints if c.run_id}
        runs = sorted(self._base.runs, key=lambda r: (steps.get(r.run_id, -1), r.run_id))
        state = _state(self.sweep)
        self.sweep = self._base.model_copy(
            update={"runs": runs, "watch": state.model_copy(update={"checkpoints": checkpoints})}
        )
        self._base = self.sweep
        write_sweep_index(self.sweep)
        self._unwritten = False

    def _say(self, cp: Checkpoint, phase: CheckpointPhase, text: str) -> None:
        self.on_event(WatchEvent(cp.step, cp.path, phase, text))

    @staticmethod
    def _update_text(update: Update) -> str:
        if update.phase == CheckpointPhase.WAITING:
            return "seen"
        if update.phase == CheckpointPhase.FAILED and update.retry:
            return f"failed: {update.detail}; to be resubmitted"
        return f"{update.phase}: {update.detail}" if update.detail else str(update.phase)
