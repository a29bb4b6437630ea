# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The fake kubelet: start-up checks like the kubelet's, and /healthz tied to the fake unit."""

import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest

from testlib import FAKES  # noqa: E402  (the fakes' one home)

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FAKE_BIN = os.path.join(FAKES, "bin")
FAKE_KUBELET = os.path.join(FAKE_BIN, "fake-kubelet")
SYSTEMCTL = os.path.join(FAKE_BIN, "systemctl")

CONFIG = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"


class KubeletNode(object):
    def __init__(self, tmp_path):
        self.root = tmp_path / "kubelet"
        self.root.mkdir()
        self.config = self.root / "config.yaml"
        self.config.write_text(CONFIG)
        self.status = tmp_path / "status.json"
        self.reject = tmp_path / "reject.yaml"
        self.systemd_state = tmp_path / "systemd.json"
        self.call_log = tmp_path / "calls.jsonl"
        self.port_file = tmp_path / "port"
        self.pid_file = tmp_path / "pid"
        self.env = dict(os.environ, GPUPROV_FAKE_SYSTEMD_STATE=str(self.systemd_state),
                        GPUPROV_FAKE_CALL_LOG=str(self.call_log))
        # The fake's own model; tests/test_fake_kubelet_peer.py runs it with the peer.
        self.env.pop("GPUPROV_KUBELET_PEER", None)
        self.systemd_state.write_text(json.dumps({"units": {"kubelet.service": {
            "active": False,
            "exec_start_pre": [[sys.executable, FAKE_KUBELET] + self.boot_args()]}}}))

    def boot_args(self):
        return ["boot", "--config", str(self.config), "--root-dir", str(self.root),
                "--status", str(self.status), "--reject-file", str(self.reject)]

    def run(self, *argv):
        return subprocess.run([sys.executable] + list(argv), env=self.env, capture_output=True,
                              text=True, check=False)

    def boot(self):
        assert self.run(FAKE_KUBELET, *self.boot_args()).returncode == 0
        return json.loads(self.status.read_text())

    def checkpoint(self, name, policy):
        (self.root / name).write_text(json.dumps({"policyName": policy, "checksum": 1}))

    def policy_in(self, name):
        return json.loads((self.root / name).read_text())["policyName"]


@pytest.fixture
def node(tmp_path):
    return KubeletNode(tmp_path)


def test_boot_writes_checkpoints_for_the_configured_policies(node):
    node.config.write_text(CONFIG + "cpuManagerPolicy: static\nreservedSystemCPUs: \"0\"\n")
    status = node.boot()
    assert status["healthy"] is True
    assert node.policy_in("cpu_manager_state") == "static"
    assert node.policy_in("memory_manager_state") == "None"


@pytest.mark.parametrize("checkpoint, policy_line, manager", [
    ("cpu_manager_state", "cpuManagerPolicy: static\nreservedSystemCPUs: \"0\"\n", "CPU manager"),
    ("memory_manager_state", "memoryManagerPolicy: Static\n", "memory manager"),
])
def test_boot_refuses_a_checkpoint_from_another_policy(node, checkpoint, policy_line, manager):
    node.checkpoint(checkpoint, "none" if checkpoint == "cpu_manager_state" else "None")
    node.config.write_text(CONFIG + policy_line)
    status = node.boot()
    assert status["healthy"] is False
    assert status["error"].startswith("could not restore state from checkpoint: configured "
                                      "policy \"")
    assert ("please drain this node and delete the %s checkpoint file \"%s\" before restarting "
            "Kubelet" % (manager, node.root / checkpoint)) in status["error"]

    (node.root / checkpoint).unlink()
    assert node.boot()["healthy"] is True


def test_boot_refuses_static_without_reserved_cpus(node):
    node.config.write_text(CONFIG + "cpuManagerPolicy: static\nkubeReserved:\n  cpu: 0m\n")
    assert "unable to determine reserved CPU resources for static policy" in node.boot()["error"]
    node.config.write_text(CONFIG + "cpuManagerPolicy: static\nkubeReserved:\n  cpu: 100m\n")
    assert node.boot()["healthy"] is True


@pytest.mark.parametrize("config", ["kind: Pod\n", "a: [\n", ""])
def test_boot_refuses_what_is_not_a_kubelet_config(node, config):
    node.config.write_text(config)
    assert "failed to load kubelet config file" in node.boot()["error"]


def test_reject_switch_matches_every_key(node):
    node.reject.write_text("cpuManagerPolicy: static\ntopologyManagerPolicy: restricted\n")
    node.config.write_text(CONFIG + "cpuManagerPolicy: static\nreservedSystemCPUs: \"0\"\n")
    assert node.boot()["healthy"] is True
    node.config.write_text(CONFIG + "cpuManagerPolicy: static\nreservedSystemCPUs: \"0\"\n"
                           "topologyManagerPolicy: restricted\n")
    assert "rejected by test switch" in node.boot()["error"]
    node.reject.write_text("")
    node.config.write_text(CONFIG + "cpuManagerPolicy: static\nreservedSystemCPUs: \"0\"\n")
    assert "rejected by test switch" in node.boot()["error"]


def test_boot_is_logged_with_the_checkpoints_it_found(node):
    node.checkpoint("cpu_manager_state", "none")
    node.boot()
    entry = [json.loads(line) for line in node.call_log.read_text().splitlines()][-1]
    assert entry["tool"] == "fake-kubelet"
    assert entry["argv"][:2] == ["fake-kubelet", "boot"]
    assert entry["checkpoints"] == {"cpu_manager_state": "none", "memory_manager_state": None}
    assert entry["healthy"] is True


def get(port, path="/healthz"):
    try:
        with urllib.request.urlopen("http://127.0.0.1:%d%s" % (port, path), timeout=5) as reply:
            return reply.status, reply.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


def test_healthz_follows_the_unit_and_the_last_boot(node):
    serve = node.run(FAKE_KUBELET, "serve", "--daemonize", "--status", str(node.status),
                     "--port-file", str(node.port_file), "--pid-file", str(node.pid_file))
    assert serve.returncode == 0, serve.stderr
    try:
        port = int(node.port_file.read_text())
        assert get(port) == (503, "kubelet.service is not active")

        start = node.run(SYSTEMCTL, "start", "kubelet")
        assert start.returncode == 0, start.stderr
        assert get(port) == (200, "ok")
        assert get(port, "/metrics")[0] == 404

        node.config.write_text(CONFIG + "cpuManagerPolicy: static\nreservedSystemCPUs: \"0\"\n")
        assert node.run(SYSTEMCTL, "restart", "kubelet").returncode == 0
        code, body = get(port)
        assert code == 503
        assert body.startswith("kubelet crash-looping: could not restore state from checkpoint")

        assert node.run(SYSTEMCTL, "stop", "kubelet").returncode == 0
        (node.root / "cpu_manager_state").unlink()
        assert node.run(SYSTEMCTL, "start", "kubelet").returncode == 0
        assert get(port) == (200, "ok")
    finally:
        stop = node.run(FAKE_KUBELET, "stop", "--pid-file", str(node.pid_file))
    assert stop.returncode == 0
    assert not node.pid_file.exists()


def systemctl_show(node, props="ActiveState,NRestarts"):
    out = node.run(SYSTEMCTL, "show", "-p", props, "kubelet").stdout
    return dict(line.split("=", 1) for line in out.splitlines() if line)


def test_a_kubelet_refusing_its_checkpoint_crash_loops_and_answers_ok_between_crashes(node):
    # As kubeadm runs it (Restart=always), with short intervals: each run lives 1.5 s before
    # its container manager fails, then the unit waits 0.3 s and starts it again.
    node.systemd_state.write_text(json.dumps({"units": {"kubelet.service": {
        "active": False, "restart": "always", "restart_sec": 0.3, "main_runtime_sec": 1.5,
        "exec_main": [[sys.executable, FAKE_KUBELET] + node.boot_args() + ["--exit-status"]],
    }}}))
    serve = node.run(FAKE_KUBELET, "serve", "--daemonize", "--status", str(node.status),
                     "--port-file", str(node.port_file), "--pid-file", str(node.pid_file))
    assert serve.returncode == 0, serve.stderr
    try:
        port = int(node.port_file.read_text())
        node.checkpoint("cpu_manager_state", "none")
        node.config.write_text(CONFIG + "cpuManagerPolicy: static\nreservedSystemCPUs: \"0\"\n")
        assert node.run(SYSTEMCTL, "start", "kubelet").returncode == 0
        # The one ping a naive health check trusts says ok ...
        assert get(port) == (200, "ok")
        # ... but the unit keeps restarting it.
        deadline = time.time() + 30
        while int(systemctl_show(node)["NRestarts"]) < 2 and time.time() < deadline:
            time.sleep(0.2)
        assert int(systemctl_show(node)["NRestarts"]) >= 2
        boots = [json.loads(line) for line in node.call_log.read_text().splitlines()
                 if '"boot"' in line]
        assert len(boots) >= 3 and not any(boot["healthy"] for boot in boots)
        assert all(boot["rc"] == 1 for boot in boots)

        # With the checkpoint gone, the next automatic restart comes up and stays up.
        (node.root / "cpu_manager_state").unlink()
        deadline = time.time() + 30
        while not json.loads(node.status.read_text())["healthy"] and time.time() < deadline:
            systemctl_show(node)
            time.sleep(0.2)
        settled = systemctl_show(node)
        time.sleep(2.0)  # longer than one run plus one restart interval
        assert systemctl_show(node) == dict(settled, ActiveState="active")
        assert get(port) == (200, "ok")
    finally:
        node.run(FAKE_KUBELET, "stop", "--pid-file", str(node.pid_file))


def test_a_config_that_does_not_load_never_answers_ok(node):
    node.systemd_state.write_text(json.dumps({"units": {"kubelet.service": {
        "active": False, "restart": "always", "restart_sec": 0.3, "main_runtime_sec": 5,
        "exec_main": [[sys.executable, FAKE_KUBELET] + node.boot_args() + ["--exit-status"]],
    }}}))
    serve = node.run(FAKE_KUBELET, "serve", "--daemonize", "--status", str(node.status),
                     "--port-file", str(node.port_file), "--pid-file", str(node.pid_file))
    assert serve.returncode == 0, serve.stderr
    try:
        node.config.write_text("kind: Pod\n")
        assert node.run(SYSTEMCTL, "start", "kubelet").returncode == 0
        code, body = get(int(node.port_file.read_text()))
        assert code == 503 and "failed to load kubelet config file" in body
    finally:
        node.run(FAKE_KUBELET, "stop", "--pid-file", str(node.pid_file))


def test_drop_ins_are_merged_over_the_config_in_name_order(node, tmp_path):
    drop_ins = tmp_path / "kubelet.conf.d"
    drop_ins.mkdir()
    (drop_ins / "50-gpuprov.conf").write_text(CONFIG + "cpuManagerPolicy: static\n"
                                              "reservedSystemCPUs: \"0\"\n")
    (drop_ins / "ignored.yaml").write_text("kind: Pod\n")
    node.checkpoint("cpu_manager_state", "none")
    args = node.boot_args() + ["--config-dir", str(drop_ins)]
    assert node.run(FAKE_KUBELET, *args).returncode == 0
    status = json.loads(node.status.read_text())
    assert 'configured policy "static" differs from state checkpoint policy "none"' in status["error"]
    # A later drop-in wins, and a drop-in that is not a KubeletConfiguration stops the kubelet.
    (drop_ins / "90-site.conf").write_text(CONFIG + "cpuManagerPolicy: none\n")
    assert node.run(FAKE_KUBELET, *args).returncode == 0
    assert json.loads(node.status.read_text())["healthy"] is True
    (drop_ins / "95-bad.conf").write_text("cpuManagerPolicy: none\n")
    assert node.run(FAKE_KUBELET, *args).returncode == 0
    assert "95-bad.conf: not a kubelet.config.k8s.io/v1beta1" in json.loads(
        node.status.read_text())["error"]
