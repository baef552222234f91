"""Stands in for ssh running a streamed script whose connection breaks.

    python _stream_relay.py before|after|during TEXT SCRIPT_FILE

before: nothing runs. after: the script runs to its end and its output is lost. during: output
passes through until it holds TEXT, then the script's process group is killed. The relay exits
255 every time, as ssh does when the connection drops.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys

SSH_FAILED = 255


def main(mode: str, text: str, script_file: str) -> int:
    with open(script_file) as fh:
        script = fh.read()
    if mode == "before":
        return SSH_FAILED
    stdout = subprocess.PIPE if mode == "during" else subprocess.DEVNULL
    proc = subprocess.Popen(["bash", "-c", script], stdout=stdout, start_new_session=True)
    stop_with(proc)
    if mode == "during":
        relay_until(proc, text.encode())
    proc.wait()
    return SSH_FAILED


def relay_until(proc: subprocess.Popen[bytes], text: bytes) -> None:
    assert proc.stdout is not None
    seen = b""
    while chunk := os.read(proc.stdout.fileno(), 4096):
        sys.stdout.buffer.write(chunk)
        sys.stdout.buffer.flush()
        seen += chunk
        if text in seen:
            os.killpg(proc.pid, signal.SIGKILL)
            return


def stop_with(proc: subprocess.Popen[bytes]) -> None:
    """A reader that stops the stream (terminate()) stops the script too, as closing ssh would."""

    def stop(signum: int, _frame: object) -> None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        sys.exit(128 + signum)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:4]))
