# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""The kubelet_config module end to end: arguments in, JSON out, files and fake sysfs below."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import stat
import os

import pytest
import yaml

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.testing import patch_module_args

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
    real_rename = os.rename

    def broken_rename(src, dst):
        if os.fsdecode(dst) == node.config:
            raise OSError(28, "No space left on device")
        return real_rename(src, dst)

    monkeypatch.setattr(os, "rename", broken_rename)
    result = run(capsys, node, backup=False, **NUMA_ARGS)
    assert result["failed"] is True
    assert result["msg"] == ("could not write kubelet config %s: No space left on device; the "
                             "file is unchanged" % node.config)
    assert result["cpu_manager_state_reset_required"] is True
    assert node.text() == node.original
    assert node.files() == ["config.yaml"]


def test_the_file_is_moved_into_place_by_ansibles_atomic_move(capsys, node, monkeypatch):
    # atomic_move keeps the SELinux context and file attributes; a plain rename does not.
    moves = []
    real_atomic_move = AnsibleModule.atomic_move

    def recording_atomic_move(self, src, dest, *args, **kwargs):
        moves.append(dest)
        return real_atomic_move(self, src, dest, *args, **kwargs)

    monkeypatch.setattr(AnsibleModule, "atomic_move", recording_atomic_move)
    assert run(capsys, node, **NUMA_ARGS)["changed"] is True
    assert moves == [node.config]


def test_a_symlinked_config_is_written_through_and_the_link_kept(capsys, node, tmp_path):
    target_dir = tmp_path / "etc"
    target_dir.mkdir()
    target = str(target_dir / "kubelet.yaml")
    os.rename(node.config, target)
    os.symlink(target, node.config)
    result = run(capsys, node, **NUMA_ARGS)
    assert result["changed"] is True
    assert os.path.islink(node.config) and os.readlink(node.config) == target
    assert yaml.safe_load(open(target).read())["cpuManagerPolicy"] == "static"
    # The backup sits beside the file that changed, not beside the link.
    assert result["backup_file"].startswith(target + ".")


def test_a_config_reached_through_a_folder_others_can_write_is_refused_unchanged(capsys, node, tmp_path):
    # Anyone could have replaced the link in an open folder: root must not write through it.
    open_dir = tmp_path / "open"
    open_dir.mkdir()
    os.chmod(str(open_dir), 0o777)
    target = str(open_dir / "kubelet.yaml")
    os.rename(node.config, target)
    os.symlink(target, node.config)
    for check_mode in (True, False):
        result = run(capsys, node, check_mode=check_mode, **NUMA_ARGS)
        assert result["failed"] is True
        assert result["msg"].startswith("kubelet config %s: %s can be written by other users" % (node.config, open_dir))
        assert "nothing was changed" in result["msg"]
    assert open(target).read() == node.original
    assert sorted(os.listdir(str(open_dir))) == ["kubelet.yaml"]  # no backup, no temporary file


def test_a_fifo_is_refused_without_hanging(capsys, node):
    os.unlink(node.config)
    os.mkfifo(node.config)
    result = run(capsys, node, **NUMA_ARGS)
    assert result["failed"] is True
    assert result["msg"] == ("kubelet config %s is a FIFO, not a regular file: refusing to read "
                             "or replace it" % node.config)
    assert node.files() == ["config.yaml"]


@pytest.mark.parametrize("text, message", [
    ("", "is empty, not a KubeletConfiguration"),
    ("# only a comment\n", "is empty, not a KubeletConfiguration"),
    ("apiVersion: v1\nkind: ConfigMap\ndata: {}\n", "is not a KubeletConfiguration (found "
     "apiVersion 'v1', kind 'ConfigMap'"),
    ("cpuManagerPolicy: none\n", "is not a KubeletConfiguration (found apiVersion None, kind "
     "None"),
])
def test_an_empty_or_foreign_document_is_refused_not_rewritten(capsys, node, text, message):
    with open(node.config, "w") as handle:
        handle.write(text)
    result = run(capsys, node, **NUMA_ARGS)
    assert result["failed"] is True
    assert message in result["msg"]
    assert node.text() == text


def test_memory_manager_static_with_matching_reservation(capsys, node):
    result = run(capsys, node, memory_manager_policy="Static",
                 reserved_memory=[{"numa_node": 0, "limits": {"memory": "434Mi"}},
                                  {"numa_node": 1, "limits": {"memory": "434Mi"}}])
    assert result["changed"] is True
    assert result["memory_manager_state_reset_required"] is True
    assert result["cpu_manager_state_reset_required"] is False
    assert yaml.safe_load(node.text())["reservedMemory"][1] == {
        "limits": {"memory": "434Mi"}, "numaNode": 1}


# --------------------------------------------------------------------------------------------
# Drop-in mode: the managed keys in <config_dir>/50-gpuprov.conf, the main file untouched


def drop_in_dir(node, tmp_path, files=None):
    config_dir = tmp_path / "kubelet.conf.d"
    config_dir.mkdir()
    for name, text in (files or {}).items():
        (config_dir / name).write_text(
            "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n" + text)
    return str(config_dir)


def test_drop_in_holds_only_the_managed_keys_and_the_main_file_is_untouched(capsys, node,
                                                                            tmp_path):
    config_dir = drop_in_dir(node, tmp_path)
    result = run(capsys, node, config_dir=config_dir, **NUMA_ARGS)
    drop_in = os.path.join(config_dir, "50-gpuprov.conf")
    assert result["changed"] is True
    assert result["path"] == drop_in
    assert node.text() == node.original
    assert node.files() == ["config.yaml"]
    with open(drop_in) as handle:
        written = yaml.safe_load(handle)
    assert written == {
        "apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration",
        "cpuManagerPolicy": "static", "cpuManagerPolicyOptions": {"full-pcpus-only": "true"},
        "topologyManagerPolicy": "single-numa-node", "topologyManagerScope": "pod",
        "reservedSystemCPUs": "0,4,8,12"}
    assert stat.S_IMODE(os.stat(drop_in).st_mode) == 0o644
    assert result["cpu_manager_state_reset_required"] is True
    assert "backup_file" not in result
    assert run(capsys, node, config_dir=config_dir, **NUMA_ARGS)["changed"] is False


def test_drop_in_resets_and_validation_use_the_merged_config(capsys, node, tmp_path):
    # An earlier drop-in already runs the static policy with CPU 0 reserved: moving the
    # reservation must reset the checkpoint although this drop-in is new.
    config_dir = drop_in_dir(node, tmp_path, {
        "10-site.conf": "cpuManagerPolicy: static\nreservedSystemCPUs: \"0\"\n"})
    result = run(capsys, node, config_dir=config_dir, reserved_system_cpus="0-1")
    assert result["changed_keys"] == ["reservedSystemCPUs"]
    assert result["cpu_manager_state_reset_reasons"] == [
        "reservedSystemCPUs changes under the static CPU policy"]
    # Memory Static is checked against the kube/system reservation of the merged config:
    # the fixture's 256Mi + 512Mi + 100Mi, raised to 1Gi kube-reserved by the drop-in.
    (tmp_path / "second").mkdir()
    config_dir2 = drop_in_dir(node, tmp_path / "second",
                              {"20-memory.conf": "kubeReserved:\n  memory: 1Gi\n"})
    bad = run(capsys, node, config_dir=config_dir2, memory_manager_policy="Static",
              reserved_memory=[{"numa_node": 0, "limits": {"memory": "868Mi"}}])
    assert bad["failed"] is True
    assert "is 1636Mi" in bad["msg"]
    assert node.text() == node.original


def test_a_later_drop_in_overriding_a_managed_key_is_refused_by_name(capsys, node, tmp_path):
    config_dir = drop_in_dir(node, tmp_path, {
        "90-override.conf": "topologyManagerPolicy: best-effort\n",
        "95-same.conf": "topologyManagerScope: pod\n"})
    result = run(capsys, node, config_dir=config_dir, **NUMA_ARGS)
    assert result["failed"] is True
    assert result["errors"] == [
        "topologyManagerPolicy: %s/90-override.conf sets topologyManagerPolicy, which "
        "overrides the value gpuprov manages in %s/50-gpuprov.conf (the kubelet merges "
        "drop-ins over the main config, in name order); remove it there"
        % (config_dir, config_dir)]
    assert sorted(os.listdir(config_dir)) == ["90-override.conf", "95-same.conf"]


def test_in_place_mode_refuses_a_drop_in_that_overrides_the_main_file(capsys, node, tmp_path):
    config_dir = drop_in_dir(node, tmp_path, {"10-cpu.conf": "cpuManagerPolicy: none\n"})
    result = run(capsys, node, config_dir=config_dir, drop_in=False, **NUMA_ARGS)
    assert result["failed"] is True
    assert "10-cpu.conf sets cpuManagerPolicy" in result["msg"]
    assert node.text() == node.original


def test_a_drop_in_that_is_not_a_kubelet_configuration_is_named(capsys, node, tmp_path):
    config_dir = drop_in_dir(node, tmp_path)
    with open(os.path.join(config_dir, "20-bad.conf"), "w") as handle:
        handle.write("cpuManagerPolicy: static\n")
    result = run(capsys, node, config_dir=config_dir, **NUMA_ARGS)
    assert result["failed"] is True
    assert result["msg"].startswith("%s/20-bad.conf is not a KubeletConfiguration" % config_dir)


# --------------------------------------------------------------------------------------------
# Versions and NUMA limits


@pytest.mark.parametrize("version, args, message", [
    ("v1.31.4", dict(cpu_manager_policy_options={"strict-cpu-reservation": True}),
     "cpuManagerPolicyOptions.strict-cpu-reservation: needs kubelet 1.32 or newer; this "
     "kubelet is 1.31"),
    ("1.32", dict(cpu_manager_policy_options={"strict-cpu-reservation": True}),
     "cpuManagerPolicyOptions.strict-cpu-reservation: is alpha in kubelet 1.32 and needs "
     "featureGates CPUManagerPolicyAlphaOptions: true"),
    ("1.27", dict(topology_manager_policy_options={"prefer-closest-numa-nodes": True}),
     "topologyManagerPolicyOptions.prefer-closest-numa-nodes: is alpha in kubelet 1.27 and "
     "needs featureGates TopologyManagerPolicyAlphaOptions: true"),
    ("1.37", dict(topology_manager_policy_options={"numa-allocation-strategy": "spread"}),
     "topologyManagerPolicyOptions.numa-allocation-strategy: needs kubelet 1.38 or newer"),
])
def test_options_the_kubelet_release_refuses(capsys, node, version, args, message):
    settings = dict(NUMA_ARGS, **args)
    result = run(capsys, node, kubelet_version=version, **settings)
    assert result["failed"] is True
    assert [e for e in result["errors"] if e.startswith(message)], result["errors"]
    assert node.text() == node.original


@pytest.mark.parametrize("version, args", [
    ("1.35", dict(cpu_manager_policy_options={"strict-cpu-reservation": True})),
    ("1.28", dict(topology_manager_policy_options={"prefer-closest-numa-nodes": True})),
    ("1.23", dict(cpu_manager_policy_options={"full-pcpus-only": True})),
])
def test_options_the_kubelet_release_accepts(capsys, node, version, args):
    assert run(capsys, node, kubelet_version=version, **dict(NUMA_ARGS, **args))["changed"]


def test_a_beta_option_whose_gate_is_switched_off_is_refused(capsys, node):
    text = node.original.replace("  CPUManagerPolicyAlphaOptions: false\n",
                                 "  CPUManagerPolicyAlphaOptions: false\n  CPUManagerPolicyBetaOptions: false\n")
    with open(node.config, "w") as handle:
        handle.write(text)
    result = run(capsys, node, kubelet_version="1.30", **NUMA_ARGS)
    assert result["errors"] == [
        "cpuManagerPolicyOptions.full-pcpus-only: is beta in kubelet 1.30 and needs "
        "featureGates CPUManagerPolicyBetaOptions: true"]


def test_drop_ins_need_a_kubelet_that_reads_them(capsys, node, tmp_path):
    result = run(capsys, node, config_dir=drop_in_dir(node, tmp_path), kubelet_version="1.29",
                 **NUMA_ARGS)
    assert result["failed"] is True
    assert result["msg"].startswith("config_dir: kubelet 1.29 does not read --config-dir")


def test_a_bad_version_is_refused(capsys, node):
    result = run(capsys, node, kubelet_version="latest", **NUMA_ARGS)
    assert result["msg"] == ("kubelet_version: 'latest' is not a kubelet version such as 1.31 "
                             "or v1.31.2")


def test_topology_policy_on_more_than_8_numa_nodes(capsys, tmp_path):
    node = Node(tmp_path, numa_nodes=9, cores_per_node=2, smt=False)
    result = run(capsys, node, **NUMA_ARGS)
    assert result["failed"] is True
    assert ("topologyManagerPolicy: single-numa-node needs the Topology Manager, which the "
            "kubelet refuses on a node with more than 8 NUMA nodes; this node has 9"
            in result["msg"])
    raised = run(capsys, node, topology_manager_policy_options={"max-allowable-numa-nodes": 9},
                 **NUMA_ARGS)
    assert raised["changed"] is True


# With ``service`` the module reads the unit first, as kubelet_launch does (one module run for
# the kubelet_topology role instead of two).
def unit_root(tmp_path, exec_start, env_file=None, binary_version=None, name="root"):
    """A node root with a kubelet unit; the kubelet binary answers --version when given one."""
    root = tmp_path / name if name else tmp_path
    unit = root / "etc" / "systemd" / "system" / "kubelet.service"
    unit.parent.mkdir(parents=True)
    lines = ["[Service]"]
    if env_file is not None:
        lines.append("EnvironmentFile=-/etc/default/kubelet")
        (root / "etc" / "default").mkdir(parents=True)
        (root / "etc" / "default" / "kubelet").write_text(env_file)
    lines.append("ExecStart=" + exec_start)
    unit.write_text("\n".join(lines) + "\n")
    if binary_version is not None:
        binary = root / "usr" / "bin" / "kubelet"
        binary.parent.mkdir(parents=True)
        binary.write_text("#!/bin/sh\necho 'Kubernetes %s'\n" % binary_version)
        binary.chmod(0o755)
    return root


def run_with_unit(capsys, node, root, **args):
    params = {"service": "kubelet", "launch_root": str(root), "sysfs_root": node.sysfs}
    params.update(NUMA_ARGS)
    params.update(args)
    with patch_module_args(params):
        with pytest.raises(SystemExit):
            kubelet_config.main()
    return json.loads(capsys.readouterr().out)


def test_service_gives_the_config_file_the_drop_ins_and_the_version(capsys, node, tmp_path):
    root = unit_root(tmp_path, "/usr/bin/kubelet --config=/kubelet.yaml --config-dir=/conf.d",
                     binary_version="v1.31.2")
    (root / "kubelet.yaml").write_text(node.original)
    (root / "conf.d").mkdir()
    result = run_with_unit(capsys, node, root, _ansible_check_mode=True)
    assert result.get("failed") is None, result
    assert result["config_file"] == str(root / "kubelet.yaml")
    assert result["config_dir"] == str(root / "conf.d")
    # Drop-in mode follows --config-dir: the managed keys would go to 50-gpuprov.conf there.
    assert result["path"] == str(root / "conf.d" / "50-gpuprov.conf") and result["changed"] is True
    assert result["kubelet_version"] == "v1.31.2"
    assert result["launch"]["found"] is True and result["launch"]["kubelet_version"] == "v1.31.2"
    assert result["launch"]["layers"] == [str(root / "etc" / "systemd" / "system" / "kubelet.service")]
    assert not os.path.exists(str(root / "conf.d" / "50-gpuprov.conf"))  # check mode


def test_service_refuses_a_flag_that_overrides_a_managed_key_naming_the_file(capsys, node, tmp_path):
    root = unit_root(tmp_path, "/usr/bin/kubelet $KUBELET_EXTRA_ARGS --config=/kubelet/config.yaml",
                     env_file='KUBELET_EXTRA_ARGS="--cpu-manager-policy=none"\n', name=None)
    result = run_with_unit(capsys, node, root)
    assert result["failed"] is True
    assert result["msg"].startswith("another layer overrides keys gpuprov manages: ")
    assert "%s: --cpu-manager-policy=none overrides cpuManagerPolicy" % (root / "etc" / "default" / "kubelet") \
        in result["msg"]
    assert result["errors"] and result["launch"]["flags"][0]["flag"] == "--cpu-manager-policy"
    assert node.text() == node.original


def test_service_refuses_a_path_the_kubelet_does_not_read(capsys, node, tmp_path):
    root = unit_root(tmp_path, "/usr/bin/kubelet --config=/etc/kubernetes/kubelet.yaml")
    result = run_with_unit(capsys, node, root, path=node.config)
    assert result["failed"] is True
    assert result["msg"] == ("the kubelet runs with --config=%s (%s), not %s; editing that file would change nothing"
                             % (root / "etc" / "kubernetes" / "kubelet.yaml",
                                root / "etc" / "systemd" / "system" / "kubelet.service", node.config))
    assert node.text() == node.original


def test_service_with_the_same_path_and_an_unset_key_flag_writes(capsys, node, tmp_path):
    # A flag for a key this run does not manage is no conflict; the user's version wins.
    # The unit's paths are taken under launch_root: /kubelet/config.yaml is the node's config.
    root = unit_root(tmp_path, "/usr/bin/kubelet --config=/kubelet/config.yaml --eviction-hard=memory.available<5%",
                     binary_version="v1.31.2", name=None)
    result = run_with_unit(capsys, node, root, path=node.config, kubelet_version="1.33")
    assert result.get("failed") is None, result
    assert result["changed"] is True and result["path"] == node.config
    assert result["kubelet_version"] == "1.33" and result["launch"]["kubelet_version"] == "v1.31.2"
    assert yaml.safe_load(node.text())["cpuManagerPolicy"] == "static"


def test_service_without_a_unit_uses_the_default_path(capsys, node, tmp_path):
    root = tmp_path / "empty"
    root.mkdir()
    result = run_with_unit(capsys, node, root, _ansible_check_mode=True)
    assert result["launch"]["found"] is False and result["launch"]["kubelet_version"] is None
    # /var/lib/kubelet/config.yaml: not under this test's root, so it is missing.
    assert result["failed"] is True and "/var/lib/kubelet/config.yaml" in result["msg"]


@pytest.mark.parametrize("service", ["", "-kubelet", "../kubelet", "/etc/systemd/system/kubelet.service"])
def test_service_that_is_not_a_unit_name_is_refused(capsys, node, tmp_path, service):
    result = run_with_unit(capsys, node, tmp_path, service=service)
    assert result["failed"] is True and result["msg"].startswith("service: ")
    assert node.text() == node.original


def test_without_service_the_unit_is_not_read(capsys, node):
    result = run(capsys, node, check_mode=True, **NUMA_ARGS)
    assert result["launch"] is None and result["config_file"] == node.config
    assert result["config_dir"] is None and result["kubelet_version"] is None
