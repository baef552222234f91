"""``gym eval view [RUN|SWEEP ...]``: a read-only web view of runs and sweeps (their state, a sweep's
curves, every sample, two runs side by side), served on this machine, or written as files."""

from __future__ import annotations

import argparse
import sys

from nemo_gym.orchestration.cli.common import add_metric_option, number_in

DEFAULT_PORT = 8765


def register(verbs: argparse._SubParsersAction) -> None:
    p = verbs.add_parser(
        "view",
        help="a web view of runs and sweeps: state, curves, every sample, two runs side by side",
        description=(
            "Serves the runs and sweeps named (the local index's, without names) on this machine, read-only: "
            "open the address it prints. Loopback unless --host says otherwise, and then only with --token."
        ),
    )
    p.add_argument("names", nargs="*", metavar="RUN|SWEEP", help="runs and sweeps (default: every one in the index)")
    p.add_argument("--host", default="127.0.0.1", help="where to listen (default 127.0.0.1)")
    p.add_argument(
        "--port",
        type=number_in(0, 65535, integer=True),
        default=DEFAULT_PORT,
        help=f"port (default {DEFAULT_PORT}; 0: any free one)",
    )
    p.add_argument("--token", help="required off loopback: the view asks for it once (or set GYM_VIEW_TOKEN)")
    p.add_argument("--static", metavar="DIR", help="write the pages as files into DIR instead of serving them")
    add_metric_option(p, "the metric of the tables and curves")
    p.add_argument(
        "--results-url",
        metavar="URL",
        help="the results store its history page reads (default: $GYM_RESULTS_URL, else results.sqlite beside "
        "the local index)",
    )
    p.set_defaults(handler=run_view)


def run_view(args: argparse.Namespace) -> int:
    from nemo_gym.orchestration.display import echo, terminal
    from nemo_gym.orchestration.errors import UserError
    from nemo_gym.orchestration.library import Viewer, check_binding, environment_token, serve, write_static

    viewer = Viewer(args.names, **({"metric": args.metric} if args.metric else {}), results_url=args.results_url)
    viewer.parts()  # names that name nothing: said now, not on the first page
    if args.static:
        written = write_static(viewer, args.static)
        where = terminal(args.static)
        echo(f"wrote {len(written)} page(s) into {where}: open {terminal(str(written[0])) if written else where}")
        return 0
    token = args.token or environment_token()
    check_binding(args.host, token)
    try:
        server = serve(viewer, args.host, args.port, token)
    except OSError as exc:
        raise UserError(f"cannot listen on {args.host}:{args.port} ({exc.strerror or exc}); try --port 0") from None
    host, port = str(server.server_address[0]), int(server.server_address[1])
    shown = f"[{host}]" if ":" in host else host
    # The token is never printed (a terminal's scrollback, a shared screen, a CI log): its owner has it.
    asks = "  (it asks for the token once: add ?token=YOUR_TOKEN)" if token else ""
    print(f"gym eval view: http://{shown}:{port}/{asks}  (Ctrl-C stops)", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        print("stopped", file=sys.stderr)
    finally:
        server.server_close()
    return 0
