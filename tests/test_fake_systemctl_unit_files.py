# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The fake systemctl loads a unit from its unit file, as systemd does, and forgets it on
daemon-reload once the file is gone."""

import json
import os
import signal
import subprocess
import time

from testlib import FAKES  # noqa: E402  (the fakes' one home)

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SYSTEMCTL = os.path.join(FAKES, "bin", "systemctl")


def test_unit_file_on_disk_defines_the_unit(tmp_path):
    unit_dir = tmp_path / "system"
    unit_dir.mkdir()
    state_path = tmp_path / "systemd.json"
    env = dict(os.environ, GPUPROV_FAKE_SYSTEMD_STATE=str(state_path),
               GPUPROV_FAKE_SYSTEMD_UNIT_PATH=str(unit_dir))

    def systemctl(*argv):
        proc = subprocess.run([SYSTEMCTL] + list(argv), env=env, capture_output=True, text=True, check=False)
        return proc.returncode, proc.stdout, proc.stderr

    assert systemctl("enable", "restore.service")[0] == 1  # no unit file, no unit
    (unit_dir / "restore.service").write_text("[Service]\nType=oneshot\nExecStart=/bin/true\n")

    assert systemctl("is-enabled", "restore.service") == (1, "disabled\n", "")
    assert systemctl("enable", "restore.service")[0] == 0
    assert systemctl("is-enabled", "restore.service") == (0, "enabled\n", "")
    assert "LoadState=loaded" in systemctl("show", "restore.service")[1]

    (unit_dir / "restore.service").unlink()
    systemctl("disable", "restore.service")
    systemctl("daemon-reload")

    assert "restore.service" not in json.loads(state_path.read_text())["units"]
    assert systemctl("status", "restore.service")[0] == 4


def test_stop_ends_the_main_process_of_a_simple_unit(tmp_path):
    """systemd sends SIGTERM to a stopping unit's processes (systemd.kill(5)); a Type=simple
    service's process outlives the systemctl call that started it."""
    unit_dir = tmp_path / "system"
    unit_dir.mkdir()
    env = dict(os.environ, GPUPROV_FAKE_SYSTEMD_STATE=str(tmp_path / "systemd.json"),
               GPUPROV_FAKE_SYSTEMD_UNIT_PATH=str(unit_dir))
    (unit_dir / "sleeper.service").write_text("[Service]\nType=simple\nExecStart=/bin/sleep 300\n")
    assert subprocess.run([SYSTEMCTL, "start", "sleeper"], env=env, check=False).returncode == 0
    pid = json.loads((tmp_path / "systemd.json").read_text())["units"]["sleeper.service"]["main_pid"]
    with open("/proc/%d/cmdline" % pid, "rb") as handle:
        assert handle.read().split(b"\0")[:2] == [b"/bin/sleep", b"300"]
    assert subprocess.run([SYSTEMCTL, "stop", "sleeper"], env=env, check=False).returncode == 0
    state = open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()[0] if os.path.exists("/proc/%d" % pid) else "gone"
    assert state in ("gone", "Z")
    assert "main_pid" not in json.loads((tmp_path / "systemd.json").read_text())["units"]["sleeper.service"]


def _uptime_ticks():
    with open("/proc/uptime") as handle:
        return int(float(handle.read().split()[0]) * os.sysconf("SC_CLK_TCK"))


def test_stop_never_kills_a_process_that_took_over_an_ended_main_process_pid(tmp_path):
    """systemd kills a unit's control group, never a bare pid; pids are reused (pid_max is
    32768 by default), so a main process that ended on its own must not make a stop kill
    whatever process has its pid now."""
    unit_dir = tmp_path / "system"
    unit_dir.mkdir()
    state_file = tmp_path / "systemd.json"
    env = dict(os.environ, GPUPROV_FAKE_SYSTEMD_STATE=str(state_file), GPUPROV_FAKE_SYSTEMD_UNIT_PATH=str(unit_dir))
    (unit_dir / "brief.service").write_text("[Service]\nType=simple\nExecStart=/bin/sleep 300\n")
    assert subprocess.run([SYSTEMCTL, "start", "brief"], env=env, check=False).returncode == 0
    state = json.loads(state_file.read_text())
    os.kill(state["units"]["brief.service"]["main_pid"], signal.SIGKILL)
    # A process is told apart by its pid and its start time, which /proc/PID/stat gives in clock
    # ticks. A real pid comes back only after the pid counter wraps, long after the tick its
    # first owner started in; so the process standing in for the new owner starts a tick later.
    started = state["units"]["brief.service"]["main_start_ticks"]
    while _uptime_ticks() <= started:
        time.sleep(0.005)
    # Another process now has the pid the state names (as after pid reuse).
    other = subprocess.Popen(["sleep", "300"], start_new_session=True)
    try:
        state["units"]["brief.service"]["main_pid"] = other.pid
        state_file.write_text(json.dumps(state))
        assert subprocess.run([SYSTEMCTL, "stop", "brief"], env=env, check=False).returncode == 0
        assert other.poll() is None, "the stop killed a process that was never the unit's"
    finally:
        other.kill()
        other.wait()
