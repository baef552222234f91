"""SSHConnection's master, opened by the first script it carries, against a fake `ssh` first on
PATH (the unit tier has no sshd; tests/cluster/test_ssh_submit.py drives the real one): one round
trip per script, a host that cannot be reached told from a connection lost part way whatever
ssh's own log level."""

from __future__ import annotations

import pytest

from nemo_gym.orchestration.connection import SSHConnection
from nemo_gym.orchestration.errors import ConnectionLost, UserError

FAKE_SSH = r"""#!/bin/bash
printf '%s\n' "$*" >>"$FAKE_SSH_LOG"
socket=''
for arg in "$@"; do case $arg in ControlPath=*) socket=${arg#ControlPath=} ;; esac; done
case " $* " in *" -O exit "*) rm -f "$socket"; exit 0 ;; esac
master=0; case " $* " in *ControlMaster=yes*) master=1 ;; esac
case $FAKE_SSH in
  refuse) echo "ssh: connect to host login port 22: Connection refused" >&2; exit 255 ;;
  lose-after-start)
    : >"$socket"; IFS= read -r first; eval "$first"; rm -f "$socket"; exit 255 ;;
  lose-before-start)
    : >"$socket"; sleep 0.2; rm -f "$socket"; exit 255 ;;
  killed)
    : >"$socket"; IFS= read -r first; eval "$first"; kill -9 $$ ;;
esac
[ "$master" = 1 ] && : >"$socket"
[ -e "$socket" ] || { echo "Control socket connect($socket): No such file or directory" >&2; exit 255; }
exec bash -c "${!#}"  # the remote command, as sshd's shell runs it
"""


@pytest.fixture
def fake_ssh(tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "ssh").write_text(FAKE_SSH)
    (bin_dir / "ssh").chmod(0o755)
    log = tmp_path / "ssh.log"
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    monkeypatch.setenv("FAKE_SSH_LOG", str(log))
    monkeypatch.setenv("FAKE_SSH", "ok")
    return lambda: log.read_text().splitlines() if log.exists() else []


def test_the_first_script_opens_the_master_and_the_next_reuse_it(fake_ssh) -> None:
    with SSHConnection("login", ["-q"]) as conn:
        first = conn.run_script("echo one; echo said >&2; exit 3")
        second = conn.run_script("echo two")
    assert (first.returncode, first.stdout, first.stderr) == (3, "one\n", "said\n")  # the start marker taken off
    assert second.stdout == "two\n" and conn.round_trips == 2
    calls = fake_ssh()
    assert ["ControlMaster=yes" in c for c in calls[:2]] == [True, False] and "ControlMaster=no" in calls[1]
    assert "-O exit" in calls[-1]


def test_a_host_that_cannot_be_reached_is_a_plain_error_naming_what_ssh_said(fake_ssh, monkeypatch) -> None:
    monkeypatch.setenv("FAKE_SSH", "refuse")
    with SSHConnection("login", ["-q"]) as conn:
        for _ in range(2):  # still not connected: the next script tries again
            with pytest.raises(UserError) as raised:
                conn.run_script("touch /never")
            assert not isinstance(raised.value, ConnectionLost)
            assert str(raised.value).startswith("cannot connect to login over ssh (ssh: connect to host login port 22")
    assert not any("-O exit" in c for c in fake_ssh())  # no master to stop


@pytest.mark.parametrize("how", ["lose-after-start", "lose-before-start", "killed"])
def test_a_connection_lost_once_up_is_a_lost_connection_whatever_ssh_logs(fake_ssh, monkeypatch, how) -> None:
    """Up once the master's socket appeared, or once the script said it started: what ran is unknown."""
    monkeypatch.setenv("FAKE_SSH", how)
    with SSHConnection("login", ["-q", "-o", "LogLevel=QUIET"]) as conn, pytest.raises(ConnectionLost):
        conn.run_script("sbatch job.sh")


def test_a_stream_first_opens_the_master_so_that_probes_beside_it_find_it(fake_ssh) -> None:
    with SSHConnection("login") as conn:
        stream = conn.stream_script("echo streamed")
        assert stream.stdout is not None and stream.stdout.read() == "streamed\n"
        stream.wait()
        assert conn.run_script("echo probe").stdout == "probe\n"
    calls = fake_ssh()
    assert "ControlMaster=yes" in calls[0] and all("ControlMaster=no" in c for c in calls[1:3])


def test_an_ssh_killed_part_way_says_so_and_that_what_ran_is_unknown(fake_ssh, monkeypatch) -> None:
    monkeypatch.setenv("FAKE_SSH", "killed")
    with SSHConnection("login", ["-q"]) as conn, pytest.raises(ConnectionLost) as raised:
        conn.run_script("echo probing")
    assert str(raised.value).startswith("the ssh connection to login was killed (signal 9) part way; what ran")
