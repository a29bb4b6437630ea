"""The kubelet_topology role writes the kubelet config in the run that works it out only when it
has no drain to do first; with a drain to do, nothing is written before the drain.

Runs the whole role with ansible-playbook against a local fake kubelet node (the kubelet_topology
molecule scenarios' tasks/fake_node.yml: the kubelet's files, a sysfs tree, the fake systemctl
and the fake kubelet on PATH).
"""
import json
import os
import shutil
import subprocess
import sys

import pytest
import yaml

from testlib import FAKES, REPO

PLAYBOOK = shutil.which("ansible-playbook", path=os.path.dirname(sys.executable))
SCENARIO = os.path.join(REPO, "collections", "ansible_collections", "gpuprov", "gpu", "extensions", "molecule",
                        "kubelet_topology")

# The role's two writing tasks: main.yml's (which only works the change out when the role drains
# the node first) and apply.yml's (after that drain).
FIRST = "Write the kubelet config (only worked out here when the role drains the node first)"
LATE = "Write the kubelet config after the drain"

pytestmark = pytest.mark.skipif(PLAYBOOK is None, reason="ansible-playbook is not installed beside this Python")


class Node:
    def __init__(self, tmp_path):
        self.tmp = tmp_path
        self.root = tmp_path / "node"
        self.config = self.root / "var" / "lib" / "kubelet" / "config.yaml"
        self.calls = tmp_path / "calls.jsonl"
        self.env = dict(os.environ, PATH=os.path.join(FAKES, "bin") + os.pathsep + os.environ["PATH"],
                        GPUPROV_FAKE_SYSTEMD_STATE=str(tmp_path / "systemd.json"),
                        GPUPROV_FAKE_CALL_LOG=str(self.calls), GPUPROV_REPO_DIR=REPO,
                        ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"), ANSIBLE_STDOUT_CALLBACK="json",
                        ANSIBLE_LOCALHOST_WARNING="false", ANSIBLE_INVENTORY_UNPARSED_WARNING="false")
        self.variables = {
            "ansible_python_interpreter": sys.executable,
            "fake_node_root": str(self.root),
            "kubelet_topology_config_path": str(self.config),
            "fake_kubelet_config": str(self.config),
            "kubelet_topology_state_dir": str(self.root / "var" / "lib" / "kubelet"),
            "kubelet_topology_sysfs_root": str(self.root / "sys"),
            "kubelet_topology_healthz_port": "{{ lookup('ansible.builtin.file', fake_node_root ~ '/healthz.port') | int }}",
            "kubelet_topology_healthz_retries": 3,
            "kubelet_topology_healthz_delay": 1,
            "kubelet_topology_startup_seconds": 4,
            "kubelet_topology_cpu_manager_policy": "static",
            "kubelet_topology_manager_policy": "single-numa-node",
            "kubelet_topology_reserved_system_cpus": "auto",
        }

    def play(self, name, tasks, **extra):
        path = self.tmp / ("%s.yml" % name)
        path.write_text(yaml.safe_dump([{"hosts": "localhost", "connection": "local", "gather_facts": False,
                                         "vars": dict(self.variables, **extra), "tasks": tasks}]))
        proc = subprocess.run([PLAYBOOK, "-i", "localhost,", str(path)], cwd=REPO, env=self.env,
                              capture_output=True, text=True, check=False)
        try:
            return json.loads(proc.stdout)
        except ValueError:
            raise AssertionError(proc.stdout[-4000:] + proc.stderr[-3000:])

    def prepare(self):
        result = self.play("prepare", [{"ansible.builtin.import_tasks": os.path.join(SCENARIO, "tasks", "fake_node.yml")}])
        assert result["stats"]["localhost"]["failures"] == 0, tasks(result)

    def converge(self, **extra):
        return self.play("converge", [{"ansible.builtin.include_role": {"name": "gpuprov.gpu.kubelet_topology"}}],
                         **extra)

    def kubelet_calls(self):
        lines = self.calls.read_text().splitlines() if self.calls.exists() else []
        return [" ".join(c["argv"][1:]) for c in map(json.loads, lines)
                if c["tool"] == "systemctl" and "kubelet" in c["argv"][-1] and c["argv"][1] != "show"]


def tasks(result):
    """{task name (without its role): localhost's result} of every task that ran or was skipped."""
    return dict((task["task"]["name"].split(" : ", 1)[-1], task["hosts"].get("localhost", {}))
                for play in result["plays"] for task in play["tasks"])


@pytest.fixture
def node(tmp_path):
    node = Node(tmp_path)
    node.prepare()
    yield node
    subprocess.run(["fake-kubelet", "stop", "--pid-file", str(node.root / "healthz.pid")], env=node.env,
                   capture_output=True, check=False)


def test_without_a_drain_to_do_the_first_run_writes_and_the_kubelet_restarts_once(node):
    before = node.config.read_text()
    result = node.converge()
    ran = tasks(result)
    assert result["stats"]["localhost"]["failures"] == 0, ran
    assert ran[FIRST]["changed"] is True
    assert ran[LATE].get("skipped") is True
    written = yaml.safe_load(node.config.read_text())
    assert written["cpuManagerPolicy"] == "static" and written["topologyManagerPolicy"] == "single-numa-node"
    assert node.config.read_text() != before
    # The policy change resets the CPU manager checkpoint: stopped, then started.
    assert node.kubelet_calls()[-2:] == ["stop kubelet", "start kubelet"]
    calls = len(node.kubelet_calls())
    again = node.converge()
    assert again["stats"]["localhost"]["changed"] == 0, tasks(again)
    assert len(node.kubelet_calls()) == calls


def test_with_a_drain_to_do_nothing_is_written_before_the_drain(node, tmp_path):
    """A kubeconfig whose API server does not answer: the drain fails, and the config and the
    kubelet are as they were."""
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:9", "insecure-skip-tls-verify": True}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
        "users": [{"name": "u", "user": {"token": "t"}}]}))
    before = node.config.read_text()
    result = node.converge(kubelet_topology_kubeconfig=str(kubeconfig), kubelet_topology_drain_timeout=2,
                           kubelet_topology_drain_retry_delay=1)
    ran = tasks(result)
    assert result["stats"]["localhost"]["failures"] == 1, ran
    assert ran[FIRST]["changed"] is False
    assert LATE not in ran
    assert node.config.read_text() == before
    assert node.kubelet_calls() == []
