# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""The node_state module: one read must answer exactly what the single-concern modules answer."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import json
import os

import pytest

from ansible.module_utils.testing import patch_module_args

from ansible_collections.gpuprov.gpu.plugins.modules import gpu_facts, kubelet_config, mps_daemon, node_state
from ansible_collections.gpuprov.gpu.tests.unit.plugins.module_utils.fake_sysfs import build_sysfs
from ansible_collections.gpuprov.gpu.tests.unit.plugins.module_utils.mps_node import mps_node  # noqa: F401  pylint: disable=unused-import

FIXTURE = os.path.join(os.path.dirname(__file__), "..", "module_utils", "fixtures", "kubelet-config-kubeadm.yaml")
NUMA = {"cpu_manager_policy": "static", "topology_manager_policy": "single-numa-node",
        "reserved_system_cpus": "auto"}


def kubelet_node(tmp_path):
    config = tmp_path / "config.yaml"
    with open(FIXTURE) as handle:
        config.write_text(handle.read())
    sysfs = str(tmp_path / "sys")
    if not os.path.exists(sysfs):
        build_sysfs(sysfs, numa_nodes=2, cores_per_node=4, smt=True)
    return str(config), sysfs


def test_gpu_facts_are_those_of_gpu_facts(fake_node, run_module):
    state = fake_node.setup([("A100-80GB", 1), ("T4", 1)])
    fake_node.pynvml.set_mig_mode(state, 0, True)
    fake_node.pynvml.create_instances(state, 0, [("3g.40gb", 4)])
    fake_node.save(state)
    build_sysfs(fake_node.sysfs, numa_nodes=1, cores_per_node=2, smt=False)

    alone = run_module(gpu_facts.main, {"sysfs_root": fake_node.sysfs})
    together = run_module(node_state.main, {"sysfs_root": fake_node.sysfs})

    assert not together.failed and together["changed"] is False
    assert together["ansible_facts"] == alone["ansible_facts"]
    assert together["ansible_facts"]["gpu_facts"]["gpus"][0]["gpu_instances"][0]["profile"] == "3g.40gb"
    # Nothing asked, nothing read.
    assert "kubelet" not in together and "mps" not in together and "mig_restore" not in together


def test_kubelet_keys_are_those_kubelet_config_would_change(fake_node, run_module, tmp_path):
    fake_node.setup([("T4", 1)])
    config, sysfs = kubelet_node(tmp_path)
    before = open(config).read()

    check = run_module(kubelet_config.main, dict(NUMA, path=config, sysfs_root=sysfs), check_mode=True)
    read = run_module(node_state.main, {"sysfs_root": sysfs, "kubelet": {"path": config, "settings": NUMA}})

    assert check["changed_keys"]  # the kubeadm fixture is not NUMA-aligned
    assert read["kubelet"] == {"changed_keys": check["changed_keys"], "error": None}
    assert open(config).read() == before

    run_module(kubelet_config.main, dict(NUMA, path=config, sysfs_root=sysfs))
    again = run_module(node_state.main, {"sysfs_root": sysfs, "kubelet": {"path": config, "settings": NUMA}})
    assert again["kubelet"] == {"changed_keys": [], "error": None}


def test_an_unreadable_kubelet_config_is_an_error_text_not_a_failure(fake_node, run_module, tmp_path):
    fake_node.setup([("T4", 1)])
    config, sysfs = kubelet_node(tmp_path)
    with open(config, "w") as handle:
        handle.write("kind: KubeletConfiguration\ncpuManagerPolicy: [not, a, policy\n")

    read = run_module(node_state.main, {"sysfs_root": sysfs, "kubelet": {"path": config, "settings": NUMA}})

    assert not read.failed
    assert read["kubelet"]["changed_keys"] == [] and config in read["kubelet"]["error"]
    assert read["ansible_facts"]["gpu_facts"]["gpu_count"] == 1


def test_an_unknown_kubelet_setting_is_an_error_text(fake_node, run_module, tmp_path):
    fake_node.setup([("T4", 1)])
    config, sysfs = kubelet_node(tmp_path)
    read = run_module(node_state.main, {"sysfs_root": sysfs,
                                        "kubelet": {"path": config, "settings": {"cpu_policy": "static"}}})
    assert "cpu_policy" in read["kubelet"]["error"]


def run_raw(capsys, main, args, check_mode=False):
    params = dict(args, _ansible_check_mode=check_mode, _ansible_diff=False)
    with patch_module_args(params):
        with pytest.raises(SystemExit):
            main()
    return json.loads(capsys.readouterr().out)


def test_mps_daemon_down_then_as_planned_then_other_limits(capsys, mps_node):
    node = mps_node()
    mps = {"pipe_directory": node.pipe, "log_directory": node.log, "active_thread_percentage": 50,
           "pinned_memory_limit": "10G", "timeout": 5}

    down = run_raw(capsys, node_state.main, {"mps": mps})
    assert (down["mps"]["running"], down["mps"]["changed"], down["mps"]["error"]) == (False, True, None)
    assert node.daemon() is None and node.compute_modes() == ["DEFAULT", "DEFAULT"]
    # As the playbooks ask: the daemon belongs to a systemd unit.
    by_unit = run_raw(capsys, node_state.main, {"mps": dict(mps, service="gpuprov-mps.service")})
    assert by_unit["mps"]["running"] is False

    run_raw(capsys, mps_daemon.main, {"pipe_directory": node.pipe, "log_directory": node.log, "timeout": 5,
                                      "active_thread_percentage": 50, "pinned_memory_limit": "10G"})
    commands = len(node.commands())
    read = run_raw(capsys, node_state.main, {"mps": mps})["mps"]
    assert read == {"running": True, "changed": False, "error": None, "without_limits": False, "differences": []}

    other = run_raw(capsys, node_state.main, {"mps": dict(mps, active_thread_percentage=25)})
    assert other["mps"] == {"running": True, "changed": True, "error": None, "without_limits": False,
                            "differences": ["active thread percentage 50 (plan 25)"]}
    # Reads only: the daemon was asked, never told.
    assert not [c for c in node.commands()[commands:] if c.startswith("set_")]
    assert node.daemon()["default_active_thread_percentage"] == 50.0


def test_a_daemon_running_without_its_limits_is_told_apart(capsys, mps_node):
    # A daemon (re)started by something that did not set the limits: MPS's own defaults.
    node = mps_node()
    node.start_by_hand(node.uuids())
    mps = {"pipe_directory": node.pipe, "log_directory": node.log, "active_thread_percentage": 25,
           "pinned_memory_limit": "10G", "timeout": 5, "service": "gpuprov-mps.service"}
    read = run_raw(capsys, node_state.main, {"mps": mps})["mps"]
    assert read["running"] is True and read["changed"] is True and read["without_limits"] is True
    uuid0, uuid1 = node.uuids()
    assert read["differences"] == [
        "compute mode of %s DEFAULT (plan EXCLUSIVE_PROCESS)" % uuid0,
        "compute mode of %s DEFAULT (plan EXCLUSIVE_PROCESS)" % uuid1,
        "active thread percentage 100 (plan 25)",
        "pinned memory limit of %s none (plan 10240 MiB)" % uuid0,
        "pinned memory limit of %s none (plan 10240 MiB)" % uuid1]


def test_mps_on_a_mig_gpu_is_an_error_text(capsys, mps_node):
    node = mps_node(gpus=[("A100-80GB", 1)])
    node.set_mig(0, True)
    read = run_raw(capsys, node_state.main, {"mps": {"pipe_directory": node.pipe, "log_directory": node.log}})
    assert read.get("failed") is not True
    assert read["mps"]["running"] is False and "MIG mode enabled" in read["mps"]["error"]


@pytest.fixture
def restore_node(fake_node, tmp_path, monkeypatch):
    fake_node.setup([("H100-80GB", 1)])
    root = tmp_path / "root"
    (root / "etc" / "systemd" / "system").mkdir(parents=True)
    (root / "etc" / "gpuprov").mkdir()
    systemd_state = tmp_path / "systemd.json"
    monkeypatch.setenv("GPUPROV_FAKE_SYSTEMD_STATE", str(systemd_state))
    monkeypatch.setenv("GPUPROV_FAKE_SYSTEMD_UNIT_PATH", str(root / "etc" / "systemd" / "system"))
    return root, systemd_state


def restore_args(root, paths=()):
    return {"mig_restore": {"unit": "gpuprov-mig-restore.service",
                            "unit_path": str(root / "etc/systemd/system/gpuprov-mig-restore.service"),
                            "state_file": str(root / "etc/gpuprov/mig-state.json"),
                            "paths": [str(root / p) for p in paths]}}


def test_restore_not_installed(restore_node, run_module):
    root, _state = restore_node
    read = run_module(node_state.main, restore_args(root, ["etc/gpuprov", "etc/gpuprov/mig-state.json"]))
    restore = read["mig_restore"]
    assert restore["unit_exists"] is False and restore["unit_enabled"] is None and restore["state_text"] is None
    assert restore["files"][0]["isdir"] is True and restore["files"][0]["mode"] == "%04o" % (
        os.stat(str(root / "etc/gpuprov")).st_mode & 0o7777)
    assert restore["files"][1] == {"path": str(root / "etc/gpuprov/mig-state.json"), "exists": False,
                                   "isdir": False, "islnk": False, "mode": None, "checksum": None}


def test_restore_installed_and_enabled(restore_node, run_module):
    root, systemd_state = restore_node
    unit = root / "etc/systemd/system/gpuprov-mig-restore.service"
    unit.write_text("[Service]\nType=oneshot\nExecStart=/bin/true\n")
    state = root / "etc/gpuprov/mig-state.json"
    state.write_text('{"format": 1, "gpus": []}\n')
    state.chmod(0o644)
    systemd_state.write_text(json.dumps({"units": {"gpuprov-mig-restore.service": {"enabled": True}}}))

    read = run_module(node_state.main, restore_args(root, ["etc/gpuprov/mig-state.json"]))

    restore = read["mig_restore"]
    assert restore["unit_exists"] is True and restore["unit_enabled"] == "enabled"
    assert restore["state_text"] == '{"format": 1, "gpus": []}\n'
    assert restore["files"][0]["checksum"] == hashlib.sha1(state.read_bytes()).hexdigest()
    assert restore["files"][0]["mode"] == "0644" and restore["error"] is None

    systemd_state.write_text(json.dumps({"units": {"gpuprov-mig-restore.service": {"enabled": False}}}))
    assert run_module(node_state.main, restore_args(root))["mig_restore"]["unit_enabled"] == "disabled"


def test_a_planted_link_is_described_not_followed(restore_node, run_module, tmp_path):
    root, _state = restore_node
    secret = tmp_path / "secret"
    secret.write_text("not the state\n")
    os.symlink(str(secret), str(root / "etc/gpuprov/mig-state.json"))

    read = run_module(node_state.main, restore_args(root, ["etc/gpuprov/mig-state.json"]))

    restore = read["mig_restore"]
    assert restore["files"][0]["islnk"] is True and restore["files"][0]["checksum"] is None
    assert restore["state_text"] is None  # a link is not the state file gpuprov wrote


def kubelet_unit(root, exec_start):
    unit_dir = root / "etc" / "systemd" / "system"
    unit_dir.mkdir(parents=True)
    (unit_dir / "kubelet.service").write_text("[Service]\nExecStart=%s\n" % exec_start)


def test_kubelet_read_follows_the_units_config_like_the_role(tmp_path):
    from ansible_collections.gpuprov.gpu.plugins.module_utils.node_reader import read_kubelet

    root = tmp_path / "root"
    (root / "etc" / "kubernetes").mkdir(parents=True)
    with open(FIXTURE) as handle:
        (root / "etc" / "kubernetes" / "kubelet.yaml").write_text(handle.read())
    sysfs = str(tmp_path / "sys")
    build_sysfs(sysfs, numa_nodes=2, cores_per_node=4, smt=True)
    kubelet_unit(root, "/usr/bin/kubelet --config=/etc/kubernetes/kubelet.yaml")

    found = read_kubelet(None, NUMA, sysfs, root=str(root))
    assert found["error"] is None and "cpuManagerPolicy" in found["changed_keys"]
    # A path the kubelet does not read is an error, as kubelet_config refuses it in the role.
    other = read_kubelet("/var/lib/kubelet/config.yaml", NUMA, sysfs, root=str(root))
    assert other["error"] == ("the kubelet runs with --config=%s (%s), not /var/lib/kubelet/config.yaml; editing "
                              "that file would change nothing" % (root / "etc" / "kubernetes" / "kubelet.yaml",
                                                                  root / "etc" / "systemd" / "system" / "kubelet.service"))


def test_a_flag_overriding_a_managed_key_is_an_error_not_in_sync(tmp_path):
    from ansible_collections.gpuprov.gpu.plugins.module_utils.node_reader import read_kubelet

    root = tmp_path / "root"
    config, sysfs = kubelet_node(tmp_path)
    kubelet_unit(root, "/usr/bin/kubelet --config=%s --cpu-manager-policy=none" % config)

    found = read_kubelet(config, NUMA, sysfs, root=str(root))

    assert found["changed_keys"] == [] and "overrides keys gpuprov manages" in found["error"]
    assert "cpuManagerPolicy" in found["error"]
