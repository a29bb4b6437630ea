# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The controller side of the one-call node read: node_state's arguments and the comparison."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import os

import yaml

from ansible_collections.gpuprov.gpu.plugins.plugin_utils import node_state_client
from ansible_collections.gpuprov.gpu.tests.unit.plugins.plugin_utils.test_drift import (
    H100_MIG,
    boot_as_installed,
    facts_as_planned,
    plan_for,
)

ROLE = os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "roles", "gpu_mig")
NUMA = {"cpu_manager_policy": "static", "topology_manager_policy": "single-numa-node",
        "reserved_system_cpus": "auto"}
HOST_MPS = {"gpuprov_gpu_model": "L40S", "gpuprov_gpu_count": 2,
            "gpuprov_sharing": {"strategy": "mps", "replicas": 4, "mps": {"provider": "host"}}}


def test_restore_sources_are_those_persist_yml_installs():
    with open(os.path.join(ROLE, "tasks", "persist.yml")) as handle:
        tasks = yaml.safe_load(handle)
    lists = [task["vars"]["_sources"] for task in tasks if "_sources" in task.get("vars", {})]
    assert lists == [list(node_state_client.RESTORE_SOURCES)]


def test_kubelet_settings_keep_only_what_the_plan_sets():
    plan = plan_for(dict(H100_MIG, gpuprov_kubelet=NUMA))
    assert node_state_client.kubelet_settings(plan) == NUMA
    assert node_state_client.kubelet_settings(plan_for(H100_MIG)) is None


def test_mps_args_only_for_host_mps_with_a_limit_per_gpu():
    plan = plan_for(HOST_MPS)
    args = node_state_client.mps_args(plan, "gpuprov-mps.service", "/tmp/nvidia-mps", "/var/log/nvidia-mps")
    assert args["active_thread_percentage"] == plan["mps"]["active_thread_percentage"]
    assert sorted(args["pinned_memory_limit"]) == ["0", "1"]
    assert args["pinned_memory_limit"]["1"] == plan["mps"]["devices"][1]["pinned_memory_limit_mib"]
    assert node_state_client.mps_args(plan_for(H100_MIG), "s", "/p", "/l") is None


def test_sha1_is_that_of_the_utf8_bytes():
    assert node_state_client.sha1(u"r\u00e9sum\u00e9\n") == hashlib.sha1(u"r\u00e9sum\u00e9\n".encode("utf-8")).hexdigest()
    assert node_state_client.sha1(b"\xff") == hashlib.sha1(b"\xff").hexdigest()


def record(path, mode="0644", isdir=False, checksum="abc", exists=True):
    return {"path": path, "exists": exists, "isdir": isdir, "islnk": False, "mode": mode,
            "checksum": None if isdir else checksum}


EXPECTED = ["/etc/gpuprov 0755 True -", "/etc/gpuprov/mig-state.json 0644 False abc"]


def answer_for(plan, facts, files, **boot):
    restore = dict(boot_as_installed(plan, facts), files=files, error=None)
    restore.update(boot)
    return {"mig_restore": restore}


def test_in_sync_when_every_installed_file_is_as_expected():
    plan = plan_for(H100_MIG)
    facts = facts_as_planned(plan)
    files = [record("/etc/gpuprov", "0755", True), record("/etc/gpuprov/mig-state.json")]
    assert node_state_client.compare(plan, facts, answer_for(plan, facts, files), EXPECTED) == {
        "status": "in-sync", "drift": []}


def test_a_changed_mode_or_content_or_missing_file_is_drift():
    plan = plan_for(H100_MIG)
    facts = facts_as_planned(plan)
    for files, word in (([record("/etc/gpuprov", "0755", True), record("/etc/gpuprov/mig-state.json", "0600")],
                         "differs"),
                        ([record("/etc/gpuprov", "0755", True), record("/etc/gpuprov/mig-state.json", checksum="x")],
                         "differs"),
                        ([record("/etc/gpuprov", "0755", True),
                          record("/etc/gpuprov/mig-state.json", exists=False)], "missing")):
        result = node_state_client.compare(plan, facts, answer_for(plan, facts, files), EXPECTED)
        assert result["status"] == "drifted"
        assert [i["message"] for i in result["drift"]] == [
            "installed files differ from what gpuprov installs: /etc/gpuprov/mig-state.json (%s)" % word]


def test_files_are_not_compared_before_the_unit_is_enabled():
    plan = plan_for(H100_MIG)
    facts = facts_as_planned(plan)
    answer = answer_for(plan, facts, [], unit_enabled="disabled")
    result = node_state_client.compare(plan, facts, answer, EXPECTED)
    assert [i["message"].split(" (")[0] for i in result["drift"]] == [
        "gpuprov-mig-restore.service is not enabled"]


def test_what_could_not_be_read_is_drift():
    plan = plan_for(H100_MIG)
    facts = facts_as_planned(plan)
    files = [record("/etc/gpuprov", "0755", True), record("/etc/gpuprov/mig-state.json")]
    result = node_state_client.compare(plan, facts, answer_for(plan, facts, files, error="/etc/gpuprov: Permission denied"),
                                       EXPECTED, unread=["gpu_mig_restore_program is not a safe absolute path"])
    assert [i["message"] for i in result["drift"]] == [
        "the boot-time MIG restore was not read: gpu_mig_restore_program is not a safe absolute path",
        "the boot-time MIG restore could not be read: /etc/gpuprov: Permission denied"]


def test_kubelet_and_mps_answers_reach_the_comparison():
    plan = plan_for(dict(HOST_MPS, gpuprov_kubelet=NUMA))
    facts = {"driver_available": True, "gpus": [
        {"index": i, "name": "NVIDIA L40S", "pci_device_id": "0x26B9", "error": None, "mig_capable": False,
         "mig_mode_current": None, "mig_mode_pending": None, "gpu_instances": []} for i in range(2)]}
    answer = {"kubelet": {"changed_keys": ["cpuManagerPolicy"], "error": None},
              "mps": {"running": False, "changed": False, "error": None}}
    result = node_state_client.compare(plan, facts, answer, [])
    assert [i["area"] for i in result["drift"]] == ["kubelet", "mps"]
