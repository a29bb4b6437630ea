# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""gpuprov.gpu.kubelet_restart end to end against the fake kubelet and its fake systemd unit:
a restart that comes up, stale checkpoints deleted with the kubelet stopped, a kubelet that
crash-loops while answering ok between crashes, one whose config never loads, check mode, and
bad checkpoint paths refused before the kubelet is touched."""

import json
import os
import sys

import pytest

from ansible.module_utils.testing import patch_module_args

from ansible_collections.gpuprov.gpu.plugins.modules import kubelet_restart
from test_fake_kubelet import CONFIG, FAKE_BIN, FAKE_KUBELET, KubeletNode


@pytest.fixture
def node(tmp_path, monkeypatch):
    node = KubeletNode(tmp_path)
    # The module finds systemctl on PATH and passes its environment on, as on a node.
    for key in ("GPUPROV_FAKE_SYSTEMD_STATE", "GPUPROV_FAKE_CALL_LOG"):
        monkeypatch.setenv(key, node.env[key])
    monkeypatch.setenv("PATH", FAKE_BIN + os.pathsep + os.environ["PATH"])
    monkeypatch.delenv("GPUPROV_KUBELET_PEER", raising=False)
    serve = node.run(FAKE_KUBELET, "serve", "--daemonize", "--status", str(node.status),
                     "--port-file", str(node.port_file), "--pid-file", str(node.pid_file))
    assert serve.returncode == 0, serve.stderr
    yield node
    node.run(FAKE_KUBELET, "stop", "--pid-file", str(node.pid_file))


def unit(node, **settings):
    """The kubelet unit as kubeadm runs it (Restart=always), with short intervals."""
    node.systemd_state.write_text(json.dumps({"units": {"kubelet.service": dict({
        "active": False, "restart": "always", "restart_sec": 0.3,
        "exec_main": [[sys.executable, FAKE_KUBELET] + node.boot_args() + ["--exit-status"]],
    }, **settings)}}))


def run(capsys, node, check_mode=False, **args):
    params = dict(dict(service="kubelet", healthz_url="http://127.0.0.1:%s/healthz" % node.port_file.read_text().strip(),
                       retries=10, delay=0.3, stable_intervals=2, startup_seconds=1, _ansible_check_mode=check_mode),
                  **args)
    capsys.readouterr()
    with patch_module_args(params):
        with pytest.raises(SystemExit):
            kubelet_restart.main()
    return json.loads(capsys.readouterr().out)


def systemctl_calls(node):
    if not node.call_log.exists():
        return []
    calls = [json.loads(line) for line in node.call_log.read_text().splitlines() if line]
    return [" ".join(call["argv"][1:]) for call in calls if call["tool"] == "systemctl" and call["argv"][1] != "show"]


def start(node):
    assert node.run(FAKE_BIN + "/systemctl", "start", "kubelet").returncode == 0


def test_a_kubelet_restarted_for_a_new_config_comes_up_and_stays_up(capsys, node):
    unit(node, main_runtime_sec=60)
    start(node)
    result = run(capsys, node)
    assert "failed" not in result, result["msg"]
    assert result["changed"] is True and result["actions"] == ["restarted kubelet"]
    assert systemctl_calls(node)[-1] == "restart kubelet"
    assert result["restart_seconds"] == pytest.approx(0.3)
    assert result["stable_seconds"] == 2  # 2 x 0.3 s + 1 s, rounded up
    assert result["restarts_before"] == result["restarts_after"]
    assert result["active_state"] == "active" and result["content"] == "ok"


def test_stale_checkpoints_are_deleted_with_the_kubelet_stopped_then_it_comes_up(capsys, node):
    unit(node, main_runtime_sec=60)
    node.checkpoint("cpu_manager_state", "none")
    start(node)
    node.config.write_text(CONFIG + "cpuManagerPolicy: static\nreservedSystemCPUs: \"0\"\n")
    checkpoint = node.root / "cpu_manager_state"
    missing = node.root / "no_such_checkpoint"
    result = run(capsys, node, reset_checkpoints=[str(checkpoint), str(missing)])
    assert "failed" not in result, result["msg"]
    assert result["actions"] == ["stopped kubelet", "deleted %s" % checkpoint, "started kubelet"]
    assert systemctl_calls(node)[-2:] == ["stop kubelet", "start kubelet"]
    # The kubelet wrote a new checkpoint for its new policy when it started.
    assert node.policy_in("cpu_manager_state") == "static"


def test_a_kubelet_refusing_its_checkpoint_fails_though_it_answered_ok(capsys, node):
    # Each run lives 1.5 s before its container manager refuses the checkpoint.
    unit(node, main_runtime_sec=1.5)
    node.checkpoint("cpu_manager_state", "none")
    node.config.write_text(CONFIG + "cpuManagerPolicy: static\nreservedSystemCPUs: \"0\"\n")
    result = run(capsys, node, stable_intervals=2, startup_seconds=2)
    assert result["failed"] is True and result["actions"] == ["restarted kubelet"]
    assert "kubelet answered /healthz but did not stay up: over 3s its NRestarts went from" in result["msg"]
    assert result["restarts_after"] > result["restarts_before"]


def test_a_config_that_never_loads_fails_with_what_healthz_said(capsys, node):
    unit(node, main_runtime_sec=5)
    node.config.write_text("kind: Pod\n")
    result = run(capsys, node, retries=2, delay=0.2)
    assert result["failed"] is True and result["changed"] is True
    assert result["msg"].startswith("kubelet did not answer ok at http://127.0.0.1:")
    assert "in 3 tries" in result["msg"] and "its last answer: HTTP 503: " in result["msg"]
    assert result["status"] == 503 and "failed to load kubelet config file" in result["content"]
    assert "restarts_before" not in result


def test_nothing_listening_is_no_answer(capsys, node):
    unit(node, main_runtime_sec=60)
    result = run(capsys, node, healthz_url="http://127.0.0.1:9/healthz", retries=1, delay=0.1)
    assert result["failed"] is True and result["status"] == -1
    assert "its last answer: no answer (" in result["msg"]


def test_check_mode_says_what_it_would_do_and_does_nothing(capsys, node):
    unit(node, main_runtime_sec=60)
    node.checkpoint("cpu_manager_state", "none")
    checkpoint = node.root / "cpu_manager_state"
    result = run(capsys, node, check_mode=True, reset_checkpoints=[str(checkpoint), str(node.root / "absent")])
    assert result["changed"] is True
    assert result["actions"] == ["would stop kubelet", "would delete %s" % checkpoint, "would start kubelet"]
    assert systemctl_calls(node) == [] and checkpoint.exists()


@pytest.mark.parametrize("bad", ["directory", "relative", "dotdot", "doubled"])
def test_a_checkpoint_path_that_is_not_a_file_is_refused_before_the_kubelet_is_stopped(capsys, node, bad):
    unit(node, main_runtime_sec=60)
    start(node)
    before = systemctl_calls(node)
    path = {"directory": str(node.root), "relative": "cpu_manager_state",
            "dotdot": str(node.root / ".." / "cpu_manager_state"),
            "doubled": "/" + str(node.root / "cpu_manager_state")}[bad]
    result = run(capsys, node, reset_checkpoints=[path])
    assert result["failed"] is True and result["actions"] == []
    assert result["msg"].startswith("reset_checkpoints: ")
    assert systemctl_calls(node) == before and node.root.is_dir()


def test_negative_settings_are_refused_before_anything_is_done(capsys, node):
    result = run(capsys, node, retries=-1)
    assert result["failed"] is True and result["msg"] == "retries must not be negative, got -1"
    assert systemctl_calls(node) == []
