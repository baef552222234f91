"""``gym eval watch DIR -c CONFIG``: evaluate each checkpoint a training run writes into DIR, once
it is ready, as one growing sweep; one line per event, until stopped (or one look with --once)."""

from __future__ import annotations

import argparse
import sys
import time

from nemo_gym.orchestration.cli.common import number_in
from nemo_gym.orchestration.display import terminal

WEEK = 7 * 24 * 3600.0  # watch_state.MAX_SETTLE_SECONDS: the longest wait either option takes


def register(verbs: argparse._SubParsersAction) -> None:
    p = verbs.add_parser(
        "watch",
        help="evaluate each checkpoint a training run writes, once it is ready, into one growing sweep",
        description=(
            "Each new checkpoint directory under DIR (its name says its step: step_1000, iter-500, "
            "checkpoint-2000) is evaluated once, when ready, as a run of one sweep (gym eval status/results/"
            "report/export SWEEP show every checkpoint so far, in step order). A checkpoint whose run fails "
            "for an infrastructure cause is resubmitted as gym eval resubmit would, up to --max-attempts. The "
            "state is kept in the sweep's record: a watcher stopped and started again goes on where it was."
        ),
    )
    p.add_argument("directory", metavar="DIR", help="where the training run writes its checkpoint directories")
    p.add_argument("-c", "--config", required=True, metavar="CONFIG", help="the evaluation's config (as for submit)")
    p.add_argument("overrides", nargs="*", metavar="KEY=VALUE", help="Hydra overrides, as for submit")
    p.add_argument("--pattern", default="*", metavar="GLOB", help="checkpoint directory names (default: *)")
    p.add_argument(
        "--ready", metavar="FILE", help="a checkpoint is ready once FILE is in it (default: once nothing in it changed)"
    )
    add_pacing(p)
    p.add_argument(
        "--key", metavar="KEY", help="the config key a checkpoint's path goes in (default: the policy's model)"
    )
    p.add_argument("--once", action="store_true", help="one look (submit what is new and ready), then exit: for cron")
    p.set_defaults(handler=run_watch)


def add_pacing(p: argparse.ArgumentParser) -> None:
    """How often it looks, how long a checkpoint must settle, how much it may hold and retry."""
    p.add_argument(
        "--settle",
        type=number_in(0, WEEK),
        default=60.0,
        metavar="SECONDS",
        help="without --ready: seconds unchanged (default 60)",
    )
    p.add_argument(
        "--every",
        type=number_in(0, WEEK, open_low=True),
        default=60.0,
        metavar="SECONDS",
        help="seconds between looks (default 60)",
    )
    p.add_argument(
        "--max-pending",
        type=number_in(1, 1_000_000, integer=True),
        metavar="N",
        help="never more than N of its runs queued or running",
    )
    p.add_argument(
        "--max-attempts",
        type=number_in(1, 100, integer=True),
        default=3,
        metavar="N",
        help="a checkpoint's runs, resubmits included (default 3)",
    )


def run_watch(args: argparse.Namespace) -> int:
    from nemo_gym.orchestration.errors import UserError
    from nemo_gym.orchestration.library import (
        SweepRecord,
        WatchEvent,
        WatchSettings,
        ready_file_problem,
        watch_checkpoints,
    )

    if args.ready is not None and ready_file_problem(args.ready):
        raise UserError(f"--ready: {ready_file_problem(args.ready)}")
    settings = WatchSettings(
        config=args.config,
        overrides=tuple(args.overrides),
        directory=args.directory,
        pattern=args.pattern,
        ready_file=args.ready,
        settle_seconds=args.settle,
        every_seconds=args.every,
        max_pending=args.max_pending,
        max_attempts=args.max_attempts,
        key=args.key,
    )

    def say(event: WatchEvent) -> None:
        stamp = time.strftime("%H:%M:%S")
        print(f"{stamp} {terminal(event.line())}", flush=True)

    def started(sweep: SweepRecord) -> None:
        seen = len(sweep.watch.checkpoints) if sweep.watch else 0
        going_on = (
            f"going on with sweep {sweep.sweep_id} ({seen} checkpoint(s) so far)" if seen else f"sweep {sweep.sweep_id}"
        )
        print(f"watching {terminal(args.directory)} for checkpoints: {going_on}; Ctrl-C stops", flush=True)

    try:
        sweep = watch_checkpoints(settings, once=args.once, on_event=say, on_start=started)
    except KeyboardInterrupt:
        print("stopped; the watch's state is kept: run the same command to go on", file=sys.stderr)
        return 0
    done = sum(1 for c in sweep.watch.checkpoints if c.phase == "done") if sweep.watch else 0
    pending = sum(1 for c in sweep.watch.checkpoints if c.phase.pending) if sweep.watch else 0
    print(
        f"sweep {sweep.sweep_id}: {len(sweep.runs)} run(s), {done} done, {pending} pending "
        f"(gym eval status {sweep.sweep_id})"
    )
    return 0
