# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The fake systemctl behaves like systemd's, including for Ansible's systemd_service module."""

import json
import os
import subprocess
import sys

import pytest

from testlib import FAKES  # noqa: E402  (the fakes' one home)

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FAKE_BIN = os.path.join(FAKES, "bin")
SYSTEMCTL = os.path.join(FAKE_BIN, "systemctl")


class FakeSystemd(object):
    def __init__(self, tmp_path):
        self.state_path = str(tmp_path / "systemd.json")
        self.log_path = str(tmp_path / "calls.jsonl")
        self.env = dict(os.environ, GPUPROV_FAKE_SYSTEMD_STATE=self.state_path,
                        GPUPROV_FAKE_CALL_LOG=self.log_path,
                        PATH=FAKE_BIN + os.pathsep + os.environ.get("PATH", ""))

    def seed(self, **units):
        with open(self.state_path, "w") as handle:
            json.dump({"units": units}, handle)

    def state(self):
        with open(self.state_path) as handle:
            return json.load(handle)

    def unit(self, name):
        return self.state()["units"][name]

    def calls(self):
        with open(self.log_path) as handle:
            return [json.loads(line) for line in handle]

    def __call__(self, *argv):
        proc = subprocess.run([sys.executable, SYSTEMCTL] + list(argv), env=self.env,
                              capture_output=True, text=True, check=False)
        return proc.returncode, proc.stdout, proc.stderr


@pytest.fixture
def systemd(tmp_path):
    return FakeSystemd(tmp_path)


@pytest.mark.parametrize("argv, rc, stream, text", [
    (["start", "nope"], 5, "err", "Failed to start nope.service: Unit nope.service not found.\n"),
    (["restart", "nope.service"], 5, "err",
     "Failed to restart nope.service: Unit nope.service not found.\n"),
    (["stop", "nope"], 5, "err", "Failed to stop nope.service: Unit nope.service not loaded.\n"),
    (["is-active", "nope"], 3, "out", "inactive\n"),
    (["is-enabled", "nope"], 1, "err",
     "Failed to get unit file state for nope.service: No such file or directory\n"),
    (["enable", "nope"], 1, "err", "Failed to enable unit: Unit file nope.service does not exist.\n"),
    (["status", "nope"], 4, "err", "Unit nope.service could not be found.\n"),
    (["frobnicate", "nope"], 1, "err", "Unknown command verb 'frobnicate'.\n"),
    (["--bogus", "start", "x"], 1, "err", "systemctl: unrecognized option '--bogus'\n"),
])
def test_unknown_units_and_bad_calls_fail_like_systemctl(systemd, argv, rc, stream, text):
    systemd.seed()
    code, out, err = systemd(*argv)
    assert code == rc
    assert (out if stream == "out" else err) == text


def test_show_of_an_unknown_unit_says_not_found_with_exit_0(systemd):
    systemd.seed()
    code, out, _err = systemd("show", "nope")
    assert code == 0
    assert "LoadState=not-found\n" in out
    assert "ActiveState=inactive\n" in out


def test_lifecycle_is_kept_in_the_state_file_and_logged(systemd):
    systemd.seed(**{"kubelet.service": {"active": False, "enabled": False}})
    assert systemd("start", "kubelet")[0] == 0
    assert systemd("is-active", "kubelet") == (0, "active\n", "")
    assert systemd("enable", "kubelet.service")[0] == 0
    assert systemd("is-enabled", "kubelet")[:2] == (0, "enabled\n")
    assert systemd("restart", "kubelet")[0] == 0
    assert systemd("stop", "kubelet")[0] == 0
    assert systemd("is-active", "-q", "kubelet") == (3, "", "")
    assert systemd("daemon-reload")[0] == 0
    unit = systemd.unit("kubelet.service")
    assert (unit["active"], unit["enabled"]) == (False, True)
    assert (unit["start_count"], unit["stop_count"]) == (2, 2)
    assert systemd.state()["daemon_reload_count"] == 1
    assert [c["argv"][1:] for c in systemd.calls()] == [
        ["start", "kubelet"], ["is-active", "kubelet"], ["enable", "kubelet.service"],
        ["is-enabled", "kubelet"], ["restart", "kubelet"], ["stop", "kubelet"],
        ["is-active", "-q", "kubelet"], ["daemon-reload"]]
    assert {c["tool"] for c in systemd.calls()} == {"systemctl"}
    assert [c["rc"] for c in systemd.calls()][-2:] == [3, 0]


def test_start_of_an_active_unit_does_nothing(systemd):
    systemd.seed(**{"kubelet.service": {"active": True}})
    assert systemd("start", "kubelet")[0] == 0
    assert systemd.unit("kubelet.service").get("start_count", 0) == 0


def test_show_properties_and_values(systemd):
    systemd.seed(**{"kubelet.service": {"active": True, "enabled": True}})
    assert systemd("show", "-p", "ActiveState,UnitFileState", "kubelet")[1] == (
        "ActiveState=active\nUnitFileState=enabled\n")
    assert systemd("show", "--property=SubState", "--value", "kubelet")[1] == "running\n"


def test_show_of_several_units_after_the_end_of_options(systemd):
    """systemctl parses its options with getopt: "--" ends them; show prints one block per
    unit, in the order asked, an unknown one as not-found (what gpu_mig reads its host
    services with, in one call)."""
    systemd.seed(**{"nvidia-dcgm.service": {"active": True, "enabled": True}})
    code, out, _err = systemd("show", "--property=Id,LoadState,ActiveState", "--", "nvidia-dcgm.service", "nvsm")
    assert code == 0
    assert out == ("Id=nvidia-dcgm.service\nLoadState=loaded\nActiveState=active\n\n"
                   "Id=nvsm.service\nLoadState=not-found\nActiveState=inactive\n")


def test_failing_start_hook_fails_the_start_like_systemd(systemd, tmp_path):
    marker = str(tmp_path / "hook-ran")
    systemd.seed(**{"kubelet.service": {"exec_start_pre": [
        ["touch", marker], ["false"]]}})
    code, _out, err = systemd("start", "kubelet")
    assert code == 1
    assert err.startswith("Job for kubelet.service failed because the control process exited "
                          "with error code.")
    assert os.path.exists(marker)
    assert systemd("is-active", "kubelet")[:2] == (3, "failed\n")
    assert systemd("is-failed", "kubelet")[:2] == (0, "failed\n")
    assert "ActiveState=failed\n" in systemd("show", "kubelet")[1]


def test_stop_hooks_run_when_an_active_unit_stops_or_restarts(systemd, tmp_path):
    log = str(tmp_path / "hooks.log")
    systemd.seed(**{"mps.service": {"exec_start_pre": [["sh", "-c", "echo start >> " + log]],
                                    "exec_stop": [["sh", "-c", "echo stop >> " + log], ["false"]]}})
    assert systemd("stop", "mps")[0] == 0  # inactive: nothing to stop, no hook
    assert not os.path.exists(log)
    assert systemd("start", "mps")[0] == 0
    assert systemd("restart", "mps")[0] == 0
    # a failing ExecStop does not keep the unit from stopping
    assert systemd("stop", "mps")[0] == 0
    with open(log) as handle:
        assert handle.read().split() == ["start", "stop", "start", "stop"]
    assert systemd.unit("mps.service")["active"] is False
    assert systemd.unit("mps.service")["stop_count"] == 2


def test_reload_needs_an_active_unit(systemd):
    systemd.seed(**{"a.service": {"active": False}, "b.service": {"active": True},
                    "c.service": {"active": True, "reloadable": False}})
    assert systemd("reload", "a")[0] == 1
    assert systemd("reload", "b")[0] == 0
    assert systemd.unit("b.service")["reload_count"] == 1
    assert "not applicable" in systemd("reload", "c")[2]


def test_masked_unit_refuses_to_start(systemd):
    systemd.seed(**{"kubelet.service": {}})
    assert systemd("mask", "kubelet")[0] == 0
    code, _out, err = systemd("start", "kubelet")
    assert code == 1 and "masked" in err
    assert "LoadState=masked\n" in systemd("show", "kubelet")[1]


def test_missing_state_variable_fails_like_a_host_without_systemd(systemd):
    env = dict(systemd.env)
    del env["GPUPROV_FAKE_SYSTEMD_STATE"]
    proc = subprocess.run([sys.executable, SYSTEMCTL, "start", "kubelet"], env=env,
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 1
    assert "System has not been booted with systemd" in proc.stderr


def run_systemd_service(systemd, args):
    """ansible.builtin.systemd_service against the fake, as a playbook run would call it."""
    env = dict(systemd.env, ANSIBLE_INVENTORY="", ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"))
    proc = subprocess.run(
        [os.path.join(os.path.dirname(sys.executable), "ansible"), "localhost", "-i",
         "localhost,", "-c", "local", "-e", "ansible_python_interpreter=" + sys.executable,
         "-m", "ansible.builtin.systemd_service", "-a", args, "-o"],
        env=env, capture_output=True, text=True, check=False, cwd=REPO)
    return proc.returncode, proc.stdout + proc.stderr


def test_ansible_systemd_service_module_drives_the_fake(systemd):
    systemd.seed(**{"kubelet.service": {"active": True, "enabled": False}})
    code, output = run_systemd_service(systemd, "name=kubelet state=restarted enabled=true")
    assert code == 0, output
    assert "CHANGED" in output
    unit = systemd.unit("kubelet.service")
    assert (unit["active"], unit["enabled"], unit["start_count"]) == (True, True, 1)
    verbs = [c["argv"][1] for c in systemd.calls()]
    assert verbs == ["show", "is-enabled", "enable", "restart"]

    code, output = run_systemd_service(systemd, "name=nope state=started")
    assert code != 0
    assert "Could not find the requested service nope" in output


def show(systemd, name, props="ActiveState,SubState,NRestarts"):
    out = systemd("show", "-p", props, name)[1]
    return dict(line.split("=", 1) for line in out.splitlines() if line)


def test_a_failing_main_process_is_restarted_per_restart_policy(systemd, tmp_path):
    # Timestamps seeded in the past, so the replay is exact whatever the machine's load:
    # exited 9 s ago, restarted 4 s ago (RestartSec 5), that instance runs 1 s and exits
    # again 3 s ago, next restart due in 2 s.
    import time
    now = time.time()
    runs = str(tmp_path / "runs")
    systemd.seed(**{"kubelet.service": {
        "active": True, "restart": "always", "restart_sec": 5, "main_runtime_sec": 1,
        "main_started_at": now - 10, "main_exit_at": now - 9, "main_exit_status": 1,
        "exec_main": [["sh", "-c", "echo run >> %s; exit 1" % runs]]}})
    assert show(systemd, "kubelet") == {"ActiveState": "activating",
                                        "SubState": "auto-restart", "NRestarts": "1"}
    assert systemd("is-active", "kubelet")[:2] == (3, "activating\n")
    with open(runs) as handle:
        assert handle.read().split() == ["run"]
    assert show(systemd, "kubelet", "Restart,RestartUSec") == {"Restart": "always",
                                                              "RestartUSec": "5s"}


def test_restarts_missed_between_calls_are_counted(systemd):
    import time
    now = time.time()
    # Exit 100.5 s ago, cycle 1 s (0.5 s RestartSec + 0.5 s run): 100 restarts since.
    systemd.seed(**{"kubelet.service": {
        "active": True, "restart": "on-failure", "restart_sec": 0.5, "main_runtime_sec": 0.5,
        "main_started_at": now - 101, "main_exit_at": now - 100.25, "main_exit_status": 1,
        "exec_main": [["false"]]}})
    restarts = int(show(systemd, "kubelet")["NRestarts"])
    assert 99 <= restarts <= 101


def test_restart_no_leaves_a_failed_unit_and_success_keeps_running(systemd):
    import time
    now = time.time()
    systemd.seed(**{
        "a.service": {"active": True, "main_started_at": now - 5, "main_exit_at": now - 4,
                      "main_exit_status": 1, "exec_main": [["false"]]},
        "b.service": {"restart": "always", "exec_main": [["true"]]}})
    assert show(systemd, "a")["ActiveState"] == "failed"
    assert systemd("start", "b")[0] == 0
    assert show(systemd, "b") == {"ActiveState": "active", "SubState": "running",
                                  "NRestarts": "0"}


def test_an_explicit_start_flushes_the_restart_counter(systemd):
    import time
    now = time.time()
    systemd.seed(**{"kubelet.service": {
        "active": False, "restart": "always", "restart_sec": 30, "main_runtime_sec": 30,
        "restart_count": 4, "restart_at": now + 20, "exec_main": [["true"]]}})
    assert show(systemd, "kubelet")["ActiveState"] == "activating"
    assert systemd("start", "kubelet")[0] == 0
    assert show(systemd, "kubelet") == {"ActiveState": "active", "SubState": "running",
                                        "NRestarts": "0"}


@pytest.mark.parametrize("text, seconds", [("10", 10), ("100ms", 0.1), ("1min 30s", 90),
                                           ("1.5s", 1.5)])
def test_restart_sec_from_a_unit_file(systemd, tmp_path, text, seconds):
    units = tmp_path / "units"
    units.mkdir()
    (units / "k.service").write_text("[Service]\nExecStart=/bin/true\nRestart=always\n"
                                     "RestartSec=%s\n" % text)
    systemd.env["GPUPROV_FAKE_SYSTEMD_UNIT_PATH"] = str(units)
    systemd.seed()
    values = show(systemd, "k", "Restart,RestartUSec")
    assert values["Restart"] == "always"
    expected = {10: "10s", 0.1: "100ms", 90: "1min 30s", 1.5: "1.500s"}[seconds]
    assert values["RestartUSec"] == expected
