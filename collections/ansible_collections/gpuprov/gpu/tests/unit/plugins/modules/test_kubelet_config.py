# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""The kubelet_config module end to end: arguments in, JSON out, files and fake sysfs below."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os

import pytest
import yaml

from ansible.module_utils.testing import patch_module_args

from ansible_collections.gpuprov.gpu.plugins.module_utils.kubelet_config import atomic_write
from ansible_collections.gpuprov.gpu.plugins.modules import kubelet_config
from ansible_collections.gpuprov.gpu.tests.unit.plugins.module_utils.fake_sysfs import build_sysfs

FIXTURE = os.path.join(os.path.dirname(__file__), "..", "module_utils", "fixtures",
                       "kubelet-config-kubeadm.yaml")

NUMA_ARGS = dict(
    cpu_manager_policy="static",
    cpu_manager_policy_options={"full-pcpus-only": True},
    topology_manager_policy="single-numa-node",
    topology_manager_scope="pod",
    reserved_system_cpus="auto",
)


class Node(object):
    """A kubelet directory with the kubeadm fixture and a fake sysfs tree."""

    def __init__(self, tmp_path, **topology):
        self.kubelet_dir = tmp_path / "kubelet"
        self.kubelet_dir.mkdir()
        self.config = str(self.kubelet_dir / "config.yaml")
        with open(FIXTURE) as handle:
            self.original = handle.read()
        with open(self.config, "w") as handle:
            handle.write(self.original)
        self.sysfs = str(tmp_path / "sys")
        build_sysfs(self.sysfs, **topology)

    def text(self):
        with open(self.config) as handle:
            return handle.read()

    def files(self):
        return sorted(os.listdir(str(self.kubelet_dir)))


@pytest.fixture
def node(tmp_path):
    return Node(tmp_path, numa_nodes=2, cores_per_node=4, smt=True)


def run(capsys, node, check_mode=False, diff=False, **args):
    params = {"path": node.config, "sysfs_root": node.sysfs}
    params.update(args)
    params["_ansible_check_mode"] = check_mode
    params["_ansible_diff"] = diff
    with patch_module_args(params):
        with pytest.raises(SystemExit):
            kubelet_config.main()
    return json.loads(capsys.readouterr().out)


def test_first_run_writes_second_run_changes_nothing(capsys, node):
    first = run(capsys, node, **NUMA_ARGS)
    assert first["changed"] is True
    assert first["changed_keys"] == ["cpuManagerPolicy", "cpuManagerPolicyOptions",
                                     "topologyManagerPolicy", "topologyManagerScope",
                                     "reservedSystemCPUs"]
    assert first["cpu_manager_state_reset_required"] is True
    assert first["memory_manager_state_reset_required"] is False
    assert first["reserved_system_cpus"] == "0,4,8,12"
    assert "diff" not in first

    config = yaml.safe_load(node.text())
    assert config["cpuManagerPolicy"] == "static"
    assert config["reservedSystemCPUs"] == "0,4,8,12"
    with open(first["backup_file"]) as handle:
        assert handle.read() == node.original
    files_after_first = node.files()

    second = run(capsys, node, **NUMA_ARGS)
    assert second["changed"] is False
    assert second["changed_keys"] == []
    assert second["cpu_manager_state_reset_required"] is False
    assert second["reserved_system_cpus"] == "0,4,8,12"
    assert "backup_file" not in second
    assert node.files() == files_after_first


def test_check_mode_writes_nothing(capsys, node):
    result = run(capsys, node, check_mode=True, diff=True, **NUMA_ARGS)
    assert result["changed"] is True
    assert result["cpu_manager_state_reset_required"] is True
    assert "backup_file" not in result
    assert node.text() == node.original
    assert node.files() == ["config.yaml"]
    assert result["diff"]["before"] == node.original
    assert "cpuManagerPolicy: static\n" in result["diff"]["after"]


def test_diff_mode_shows_the_written_file(capsys, node):
    result = run(capsys, node, diff=True, topology_manager_policy="restricted")
    assert result["diff"]["before"] == node.original
    assert result["diff"]["after"] == node.text()
    assert result["diff"]["after_header"] == node.config


def test_backup_false_writes_no_backup(capsys, node):
    result = run(capsys, node, backup=False, topology_manager_policy="best-effort")
    assert result["changed"] is True
    assert "backup_file" not in result
    assert node.files() == ["config.yaml"]


@pytest.mark.parametrize("topology, expected", [
    (dict(numa_nodes=1, cores_per_node=8, smt=False), "0"),
    (dict(numa_nodes=1, cores_per_node=8, smt=True), "0,8"),
    (dict(numa_nodes=2, cores_per_node=4, smt=False), "0,4"),
    (dict(numa_nodes=4, cores_per_node=4, smt=True), "0,4,8,12,16,20,24,28"),
    (dict(numa_nodes=4, cores_per_node=4, smt=False), "0,4,8,12"),
])
def test_auto_reservation_per_topology(capsys, tmp_path, topology, expected):
    node = Node(tmp_path, **topology)
    result = run(capsys, node, **NUMA_ARGS)
    assert result["reserved_system_cpus"] == expected
    assert yaml.safe_load(node.text())["reservedSystemCPUs"] == expected


def test_invalid_config_fails_naming_the_field_and_writes_nothing(capsys, node):
    result = run(capsys, node, cpu_manager_policy="static", reserved_system_cpus="0-99",
                 memory_manager_policy="Static")
    assert result["failed"] is True
    assert node.config in result["msg"]
    assert result["errors"] == [
        "reservedSystemCPUs: CPUs 16-99 do not exist (or are offline) on this node; online "
        "CPUs are 0-15",
        "reservedMemory: memoryManagerPolicy Static needs reservedMemory per NUMA node, summing "
        "to kubeReserved.memory + systemReserved.memory + evictionHard memory.available (868Mi "
        "on this node)",
    ]
    assert node.text() == node.original
    assert node.files() == ["config.yaml"]


def test_bad_choice_is_refused_by_the_argument_spec(capsys, node):
    result = run(capsys, node, cpu_manager_policy="Static")
    assert result["failed"] is True
    assert "cpu_manager_policy" in result["msg"]
    assert node.text() == node.original


def test_missing_config_file(capsys, node, tmp_path):
    result = run(capsys, node, path=str(tmp_path / "absent.yaml"), cpu_manager_policy="none")
    assert result["failed"] is True
    assert "absent.yaml does not exist" in result["msg"]


def test_directory_as_path(capsys, node):
    result = run(capsys, node, path=str(node.kubelet_dir), cpu_manager_policy="none")
    assert result["failed"] is True
    assert "is a directory" in result["msg"]


def test_failed_rename_reports_and_leaves_the_file(capsys, node, monkeypatch):
    def broken_replace(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(atomic_write.os, "replace", broken_replace)
    result = run(capsys, node, backup=False, **NUMA_ARGS)
    assert result["failed"] is True
    assert result["msg"] == ("could not write kubelet config %s: No space left on device; the "
                             "file is unchanged" % node.config)
    assert result["cpu_manager_state_reset_required"] is True
    assert node.text() == node.original
    assert node.files() == ["config.yaml"]


def test_memory_manager_static_with_matching_reservation(capsys, node):
    result = run(capsys, node, memory_manager_policy="Static",
                 reserved_memory=[{"numa_node": 0, "limits": {"memory": "434Mi"}},
                                  {"numa_node": 1, "limits": {"memory": "434Mi"}}])
    assert result["changed"] is True
    assert result["memory_manager_state_reset_required"] is True
    assert result["cpu_manager_state_reset_required"] is False
    assert yaml.safe_load(node.text())["reservedMemory"][1] == {
        "limits": {"memory": "434Mi"}, "numaNode": 1}
