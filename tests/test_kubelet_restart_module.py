# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""gpuprov.gpu.kubelet_restart end to end against the fake kubelet and its fake systemd unit:
a kubelet that comes up, one that crash-loops while answering ok between crashes, and one
whose config never loads."""

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


def run(capsys, node, **args):
    params = dict(dict(healthz_url="http://127.0.0.1:%s/healthz" % node.port_file.read_text().strip(),
                       retries=10, delay=0.3, stable_intervals=2, startup_seconds=1), **args)
    capsys.readouterr()
    with patch_module_args(params):
        with pytest.raises(SystemExit):
            kubelet_restart.main()
    return json.loads(capsys.readouterr().out)


def test_a_kubelet_that_comes_up_and_stays_up_passes(capsys, node):
    unit(node, main_runtime_sec=60)
    assert node.run(FAKE_BIN + "/systemctl", "start", "kubelet").returncode == 0
    result = run(capsys, node)
    assert "failed" not in result, result["msg"]
    assert result["changed"] is False
    assert result["restart_seconds"] == pytest.approx(0.3)
    assert result["stable_seconds"] == 2  # 2 x 0.3 s + 1 s, rounded up
    assert result["restarts_before"] == result["restarts_after"]
    assert result["active_state"] == "active" and result["content"] == "ok"


def test_a_kubelet_refusing_its_checkpoint_fails_though_it_answered_ok(capsys, node):
    # Each run lives 1.5 s before its container manager refuses the checkpoint.
    unit(node, main_runtime_sec=1.5)
    node.checkpoint("cpu_manager_state", "none")
    node.config.write_text(CONFIG + "cpuManagerPolicy: static\nreservedSystemCPUs: \"0\"\n")
    assert node.run(FAKE_BIN + "/systemctl", "start", "kubelet").returncode == 0
    result = run(capsys, node, stable_intervals=2, startup_seconds=2)
    assert result["failed"] is True
    assert "kubelet.service answered /healthz but did not stay up: over 3s its NRestarts went from" in result["msg"]
    assert result["restarts_after"] > result["restarts_before"]


def test_a_config_that_never_loads_fails_with_what_healthz_said(capsys, node):
    unit(node, main_runtime_sec=5)
    node.config.write_text("kind: Pod\n")
    assert node.run(FAKE_BIN + "/systemctl", "start", "kubelet").returncode == 0
    result = run(capsys, node, retries=2, delay=0.2)
    assert result["failed"] is True
    assert result["msg"].startswith("kubelet.service did not answer ok at http://127.0.0.1:")
    assert "in 3 tries" in result["msg"] and "its last answer: HTTP 503: " in result["msg"]
    assert result["status"] == 503 and "failed to load kubelet config file" in result["content"]
    assert "restarts_before" not in result


def test_nothing_listening_is_no_answer(capsys, node):
    unit(node, main_runtime_sec=60)
    result = run(capsys, node, healthz_url="http://127.0.0.1:9/healthz", retries=1, delay=0.1)
    assert result["failed"] is True and result["status"] == -1
    assert "its last answer: no answer (" in result["msg"]


def test_negative_settings_are_refused_before_anything_is_asked(capsys, node):
    result = run(capsys, node, retries=-1)
    assert result["failed"] is True and result["msg"] == "retries must not be negative, got -1"
