# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Every config the kubelet_config module writes, alone and among drop-ins, passes the kubelet's
own loading, validation and resource-manager start-up (tests/peers, k8s.io/kubernetes v1.37.2),
and the /configz the kubelet then serves is what gpuprov's model says it runs with, compared by
meaning (gpuprov.gpu.kubelet_configz_mismatches)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import pytest

from ansible_collections.gpuprov.gpu.plugins.module_utils.kubelet_config import KubeletSettings, plan_change
from ansible_collections.gpuprov.gpu.plugins.module_utils.kubelet_config.configz import configz_mismatches
from ansible_collections.gpuprov.gpu.tests.unit.plugins.test_support.kubelet_peerlib import KubeletFiles, configz

pytestmark = pytest.mark.peers

ROLE_DEFAULTS = dict(cpu_manager_policy="static", topology_manager_policy="single-numa-node",
                     reserved_system_cpus="auto")
SETTINGS = {
    "role defaults": ROLE_DEFAULTS,
    "example inventory": dict(ROLE_DEFAULTS, cpu_manager_policy_options={"full-pcpus-only": True},
                              topology_manager_scope="pod"),
    "memory manager": dict(ROLE_DEFAULTS, memory_manager_policy="Static",
                           cpu_manager_policy_options={"full-pcpus-only": True},
                           reserved_memory=[{"numa_node": 0, "limits": {"memory": "444416Ki"}},
                                            {"numa_node": 1, "limits": {"memory": "434Mi"}}]),
    "counted reservation": dict(cpu_manager_policy="static", kube_reserved_cpu="1500m",
                                system_reserved_cpu="0.5", cpu_manager_reconcile_period="90s",
                                topology_manager_policy="restricted",
                                topology_manager_policy_options={"prefer-closest-numa-nodes": True,
                                                                 "max-allowable-numa-nodes": 8}),
    "reserved CPUs rewrite the counts": dict(cpu_manager_policy="static",
                                             reserved_system_cpus="0-1,8-9", kube_reserved_cpu="1",
                                             system_reserved_cpu="500m",
                                             cpu_manager_policy_options={"strict-cpu-reservation": "True"}),
}
# Back to the kubelet's defaults, from "reserved CPUs rewrite the counts".
REMOVE_ALL = dict(cpu_manager_policy="none", cpu_manager_policy_options={}, reserved_system_cpus="",
                  kube_reserved_cpu="", system_reserved_cpu="", cpu_manager_reconcile_period="0s",
                  topology_manager_policy="none", memory_manager_policy="None", reserved_memory=[])

SITE_DROP_INS = {
    # A distribution's drop-in before gpuprov's, a subfolder, and a site override after it,
    # none of them touching a managed key.
    "10-distro.conf": "evictionHard:\n  nodefs.available: 5%\nkubeReserved:\n  memory: 256Mi\n",
    "40-site/30-logging.conf": "logging:\n  verbosity: 2\n",
    "90-site.conf": "maxPods: 64\n",
}
LAYOUTS = ("main file", "drop-in", "drop-in among site drop-ins")


def write_plan(files, settings, layout):
    config_dir = None if layout == "main file" else files.config_dir
    plan = plan_change(files.config, KubeletSettings(**settings), sysfs_root=files.sysfs,
                       config_dir=config_dir, kubelet_version=(1, 37))
    with open(plan.path, "w") as handle:
        handle.write(plan.after)
    return plan


def node(tmp_path, layout):
    files = KubeletFiles(tmp_path)
    if layout == "drop-in among site drop-ins":
        for name, text in SITE_DROP_INS.items():
            files.drop_in(name, text)
    return files


def check_running(files, plan, layout):
    result = files.kubelet_config(config_dir=layout != "main file")
    running = configz(result)
    assert configz_mismatches(running, plan.configz) == [], (plan.configz, running)
    started = files.kubelet_start(config_dir=layout != "main file")
    assert started.returncode == 0, started
    return running


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("name", sorted(SETTINGS))
def test_what_gpuprov_writes_is_what_the_kubelet_runs(tmp_path, name, layout):
    files = node(tmp_path, layout)
    plan = write_plan(files, SETTINGS[name], layout)
    assert plan.changed
    running = check_running(files, plan, layout)
    if name == "reserved CPUs rewrite the counts":
        # The kubelet's rewrite, which a comparison by text would call a difference.
        assert plan.managed["kubeReserved.cpu"] == "1" and "cpu" not in running.get("kubeReserved", {})
        assert running["systemReserved"]["cpu"] == "4"
    if name == "memory manager":
        assert running["reservedMemory"][0]["limits"]["memory"] == "434Mi"  # 444416Ki, canonical
    if name == "counted reservation":
        assert running["cpuManagerReconcilePeriod"] == "1m30s"


@pytest.mark.parametrize("layout", LAYOUTS)
def test_removed_keys_show_the_kubelets_defaults(tmp_path, layout):
    files = node(tmp_path, layout)
    write_plan(files, SETTINGS["reserved CPUs rewrite the counts"], layout)
    plan = write_plan(files, REMOVE_ALL, layout)
    running = check_running(files, plan, layout)
    assert running["cpuManagerPolicy"] == "none" and running["cpuManagerReconcilePeriod"] == "10s"
    assert plan.configz["topologyManagerPolicy"] == "none" and plan.configz["reservedSystemCPUs"] is None
    assert "reservedSystemCPUs" not in running and "reservedMemory" not in running


def test_a_kubelet_running_other_values_is_a_mismatch(tmp_path):
    files = node(tmp_path, "drop-in")
    plan = write_plan(files, SETTINGS["example inventory"], "drop-in")
    # A flag the role would refuse, as a kubelet started by hand might have it.
    running = configz(files.kubelet_config("--cpu-manager-policy=none", "--cpu-manager-policy-options="
                                           "full-pcpus-only=false"))
    assert configz_mismatches(running, plan.configz) == [
        'cpuManagerPolicy is "none", written "static"',
        'cpuManagerPolicyOptions is {"full-pcpus-only": "false"}, written {"full-pcpus-only": "true"}']


def test_a_kubelet_left_on_another_config_file_is_a_mismatch(tmp_path):
    files = node(tmp_path, "main file")
    plan = write_plan(files, SETTINGS["role defaults"], "main file")
    other = KubeletFiles(tmp_path / "other")
    running = configz(other.kubelet_config(config_dir=False))
    mismatches = configz_mismatches(running, plan.configz)
    assert [m.split(" ", 1)[0] for m in mismatches] == [
        "cpuManagerPolicy", "reservedSystemCPUs", "topologyManagerPolicy"], mismatches
    assert os.path.exists(files.config)
