# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Every kubelet setting of `gpuprov_kubelet` is read by the kubelet's own rules: for a table
of values, the kubelet (tests/peers kubelet-checkpoint, k8s.io/kubernetes v1.37.2) accepts what
gpuprov accepts and refuses what gpuprov refuses, at plan time (settings_problems, what `gpuprov
plan` runs; no node) and on the node (the kubelet_config module, with the node's config and
sysfs). That `gpuprov plan` reports such a refusal by host and field: tests/test_plan_cli.py."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

import pytest
import yaml

from ansible_collections.gpuprov.gpu.plugins.module_utils.kubelet_config import (
    KubeletConfigError,
    KubeletSettings,
    plan_change,
)
from ansible_collections.gpuprov.gpu.plugins.module_utils.kubelet_config.settings import settings_problems
from ansible_collections.gpuprov.gpu.tests.unit.plugins.test_support.kubelet_peerlib import KubeletFiles

pytestmark = pytest.mark.peers

STATIC = dict(cpu_manager_policy="static", reserved_system_cpus="0,8")
SINGLE_NUMA = dict(topology_manager_policy="single-numa-node")
# The kubeadm fixture reserves 256Mi + 512Mi of memory; with the 100Mi eviction default,
# reservedMemory must sum to 868Mi: NUMA node 1 takes 434Mi, node 0 the value under test.
STATIC_MEMORY = dict(memory_manager_policy="Static")

ACCEPT, REFUSE = True, False

# setting, value, the kubelet's verdict, settings that make the value matter
ROWS = [
    # cpuManagerReconcilePeriod: time.ParseDuration
    ("cpu_manager_reconcile_period", "10s", ACCEPT, {}),
    ("cpu_manager_reconcile_period", "1m30s", ACCEPT, {}),
    ("cpu_manager_reconcile_period", "1.5h", ACCEPT, {}),
    ("cpu_manager_reconcile_period", "0", ACCEPT, {}),
    ("cpu_manager_reconcile_period", "500ms", ACCEPT, {}),
    ("cpu_manager_reconcile_period", u"1\u00b5s", ACCEPT, {}),
    ("cpu_manager_reconcile_period", "+5s", ACCEPT, {}),
    ("cpu_manager_reconcile_period", ".5s", ACCEPT, {}),
    ("cpu_manager_reconcile_period", "forever; rm -rf /", REFUSE, {}),
    ("cpu_manager_reconcile_period", "10", REFUSE, {}),
    ("cpu_manager_reconcile_period", "10 s", REFUSE, {}),
    ("cpu_manager_reconcile_period", " 10s", REFUSE, {}),
    ("cpu_manager_reconcile_period", u"\u0661\u0660s", REFUSE, {}),
    ("cpu_manager_reconcile_period", "1d", REFUSE, {}),
    ("cpu_manager_reconcile_period", "1e3s", REFUSE, {}),
    ("cpu_manager_reconcile_period", ".s", REFUSE, {}),
    ("cpu_manager_reconcile_period", "", REFUSE, {}),
    ("cpu_manager_reconcile_period", "9999999999h", REFUSE, {}),
    # kubeReserved.cpu: resource.ParseQuantity, not negative (parseResourceList)
    ("kube_reserved_cpu", "1", ACCEPT, dict(cpu_manager_policy="static")),
    ("kube_reserved_cpu", "500m", ACCEPT, dict(cpu_manager_policy="static")),
    ("kube_reserved_cpu", "1.5", ACCEPT, dict(cpu_manager_policy="static")),
    ("kube_reserved_cpu", "1e0", ACCEPT, dict(cpu_manager_policy="static")),
    ("kube_reserved_cpu", 2, ACCEPT, dict(cpu_manager_policy="static")),
    ("kube_reserved_cpu", "-1", REFUSE, dict(cpu_manager_policy="static")),
    ("kube_reserved_cpu", "1 core", REFUSE, dict(cpu_manager_policy="static")),
    ("kube_reserved_cpu", " 1", REFUSE, dict(cpu_manager_policy="static")),
    ("kube_reserved_cpu", u"\u0661", REFUSE, dict(cpu_manager_policy="static")),
    ("kube_reserved_cpu", "1Gb", REFUSE, dict(cpu_manager_policy="static")),
    ("kube_reserved_cpu", "0", REFUSE, dict(cpu_manager_policy="static")),
    ("system_reserved_cpu", "250m", ACCEPT, dict(cpu_manager_policy="static")),
    ("system_reserved_cpu", "1/2", REFUSE, dict(cpu_manager_policy="static")),
    # reservedSystemCPUs: k8s.io/utils/cpuset.Parse, then a subset of the machine's CPUs
    ("reserved_system_cpus", "0", ACCEPT, dict(cpu_manager_policy="static")),
    ("reserved_system_cpus", "0-1,8-9", ACCEPT, dict(cpu_manager_policy="static")),
    ("reserved_system_cpus", "0,8", ACCEPT, dict(cpu_manager_policy="static")),
    ("reserved_system_cpus", "0, 8", REFUSE, dict(cpu_manager_policy="static")),
    ("reserved_system_cpus", "3-1", REFUSE, dict(cpu_manager_policy="static")),
    ("reserved_system_cpus", "0-", REFUSE, dict(cpu_manager_policy="static")),
    ("reserved_system_cpus", u"\u0660", REFUSE, dict(cpu_manager_policy="static")),
    ("reserved_system_cpus", "0-3:2", REFUSE, dict(cpu_manager_policy="static")),
    # cpuManagerPolicyOptions: strconv.ParseBool
    ("cpu_manager_policy_options.full-pcpus-only", "true", ACCEPT, STATIC),
    ("cpu_manager_policy_options.full-pcpus-only", "T", ACCEPT, STATIC),
    ("cpu_manager_policy_options.full-pcpus-only", "0", ACCEPT, STATIC),
    ("cpu_manager_policy_options.full-pcpus-only", True, ACCEPT, STATIC),
    ("cpu_manager_policy_options.full-pcpus-only", "yes", REFUSE, STATIC),
    ("cpu_manager_policy_options.full-pcpus-only", "tRUE", REFUSE, STATIC),
    ("cpu_manager_policy_options.strict-cpu-reservation", "on", REFUSE, STATIC),
    ("cpu_manager_policy_options.no-such-option", "true", REFUSE, STATIC),
    # topologyManagerPolicyOptions: strconv.Atoi, at least 8; ParseBool
    ("topology_manager_policy_options.max-allowable-numa-nodes", "8", ACCEPT, SINGLE_NUMA),
    ("topology_manager_policy_options.max-allowable-numa-nodes", "+16", ACCEPT, SINGLE_NUMA),
    ("topology_manager_policy_options.max-allowable-numa-nodes", 1024, ACCEPT, SINGLE_NUMA),
    ("topology_manager_policy_options.max-allowable-numa-nodes", "7", REFUSE, SINGLE_NUMA),
    ("topology_manager_policy_options.max-allowable-numa-nodes", "-8", REFUSE, SINGLE_NUMA),
    ("topology_manager_policy_options.max-allowable-numa-nodes", u"\u0669", REFUSE, SINGLE_NUMA),
    ("topology_manager_policy_options.max-allowable-numa-nodes", "1e3", REFUSE, SINGLE_NUMA),
    ("topology_manager_policy_options.prefer-closest-numa-nodes", "true", ACCEPT, SINGLE_NUMA),
    ("topology_manager_policy_options.prefer-closest-numa-nodes", "enabled", REFUSE, SINGLE_NUMA),
    ("topology_manager_policy_options.numa-allocation-strategy", "most-allocated", REFUSE, SINGLE_NUMA),
    # reservedMemory limits: resource.ParseQuantity, not zero
    ("reserved_memory.memory", "434Mi", ACCEPT, STATIC_MEMORY),
    ("reserved_memory.memory", "444416Ki", ACCEPT, STATIC_MEMORY),
    ("reserved_memory.memory", "455081984", ACCEPT, STATIC_MEMORY),
    ("reserved_memory.memory", "434 Mi", REFUSE, STATIC_MEMORY),
    ("reserved_memory.memory", "434MiB", REFUSE, STATIC_MEMORY),
    ("reserved_memory.memory", u"\u0664\u0663\u0664Mi", REFUSE, STATIC_MEMORY),
    ("reserved_memory.memory", "0", REFUSE, STATIC_MEMORY),
    ("reserved_memory.memory", "400Mi", REFUSE, STATIC_MEMORY),  # the sum is wrong
    ("reserved_memory.twice", "217Mi", REFUSE, STATIC_MEMORY),  # node 0 reserves memory twice
    # enums
    ("cpu_manager_policy", "static", ACCEPT, dict(reserved_system_cpus="0")),
    ("cpu_manager_policy", "Static", REFUSE, dict(reserved_system_cpus="0")),
    ("topology_manager_policy", "single-numa-node", ACCEPT, {}),
    ("topology_manager_policy", "single-numa", REFUSE, {}),
    ("topology_manager_scope", "Pod", REFUSE, {}),
    ("memory_manager_policy", "static", REFUSE, {}),
]

# Where gpuprov is stricter than the kubelet, and why. Nothing else may differ.
GPUPROV_STRICTER = [
    ("cpu_manager_reconcile_period", "-5s", {},
     "the kubelet takes a negative period and runs its reconcile loop without pause"),
    ("reserved_system_cpus", "+1", dict(cpu_manager_policy="static"),
     "a sign before a CPU number (strconv.Atoi takes it)"),
    ("reserved_system_cpus", "0,0", dict(cpu_manager_policy="static"),
     "a CPU listed twice (the kubelet takes the union)"),
    ("topology_manager_policy_options.max-allowable-numa-nodes", "2000", SINGLE_NUMA,
     "more than 1024 NUMA nodes (the kubelet only warns)"),
]


# Refusals only the node can make: they need the node's config or the kubelet's release.
NODE_ONLY = {
    ("reserved_memory.memory", "400Mi"): "the sum is checked against the node's kubeReserved, "
                                         "systemReserved and evictionHard",
    ("topology_manager_policy_options.numa-allocation-strategy", "most-allocated"):
        "the option is unknown to kubelet 1.37, a release read on the node (kubelet_version)",
}


def as_settings(setting, value, extra):
    """The settings of a row, in the module's vocabulary."""
    settings = dict(extra)
    if setting.startswith(("cpu_manager_policy_options.", "topology_manager_policy_options.")):
        key, name = setting.split(".", 1)
        settings[key] = {name: value}
    elif setting == "reserved_memory.memory":
        settings["reserved_memory"] = [{"numa_node": 0, "limits": {"memory": value}},
                                       {"numa_node": 1, "limits": {"memory": "434Mi"}}]
    elif setting == "reserved_memory.twice":
        settings["reserved_memory"] = [{"numa_node": 0, "limits": {"memory": value}},
                                       {"numa_node": 0, "limits": {"memory": value}},
                                       {"numa_node": 1, "limits": {"memory": "434Mi"}}]
    else:
        settings[setting] = value
    return settings


CAMEL = {
    "cpu_manager_policy": "cpuManagerPolicy", "cpu_manager_reconcile_period": "cpuManagerReconcilePeriod",
    "topology_manager_policy": "topologyManagerPolicy", "topology_manager_scope": "topologyManagerScope",
    "memory_manager_policy": "memoryManagerPolicy", "reserved_system_cpus": "reservedSystemCPUs",
    "cpu_manager_policy_options": "cpuManagerPolicyOptions",
    "topology_manager_policy_options": "topologyManagerPolicyOptions",
}


def hand_written(settings):
    """The drop-in a hand would write for settings gpuprov refuses to write."""
    config = {}
    for key, value in settings.items():
        if key in ("kube_reserved_cpu", "system_reserved_cpu"):
            config.setdefault("kubeReserved" if key.startswith("kube") else "systemReserved",
                              {})["cpu"] = str(value)
        elif key == "reserved_memory":
            config["reservedMemory"] = [{"numaNode": e["numa_node"], "limits": e["limits"]}
                                        for e in value]
        elif key.endswith("_options"):
            config[CAMEL[key]] = dict((k, ("true" if v else "false") if isinstance(v, bool) else str(v))
                                      for k, v in value.items())
        else:
            config[CAMEL[key]] = value
    # JSON is YAML: every string stays a quoted string, escapes and all.
    return "\n".join("%s: %s" % (key, json.dumps(value)) for key, value in sorted(config.items())) + "\n"


def verdicts(tmp_path, setting, value, extra):
    files = KubeletFiles(tmp_path)
    settings = as_settings(setting, value, extra)
    plan_time = not list(settings_problems(settings))
    try:
        plan = plan_change(files.config, KubeletSettings(**settings), sysfs_root=files.sysfs,
                           config_dir=files.config_dir, kubelet_version=(1, 37))
    except KubeletConfigError as exc:
        on_node, node_errors = False, exc.errors
        files.drop_in("50-gpuprov.conf", hand_written(settings))
    else:
        on_node, node_errors = True, []
        with open(plan.path, "w") as handle:
            handle.write(plan.after)
        # What gpuprov wrote reads back as the value it was given.
        assert yaml.safe_load(plan.after)
    kubelet = files.kubelet_start()
    return plan_time, on_node, node_errors, kubelet


@pytest.mark.parametrize("setting, value, kubelet_accepts, extra", ROWS,
                         ids=["%s=%s" % (row[0], ascii(row[1])) for row in ROWS])
def test_gpuprov_and_the_kubelet_agree(tmp_path, setting, value, kubelet_accepts, extra):
    plan_time, on_node, node_errors, kubelet = verdicts(tmp_path, setting, value, extra)
    assert (kubelet.returncode == 0) is kubelet_accepts, kubelet
    assert on_node is kubelet_accepts, (node_errors, kubelet)
    if kubelet_accepts:
        assert plan_time, settings_problems(as_settings(setting, value, extra))
    elif (setting, value) not in NODE_ONLY:
        # What the kubelet refuses is refused before any node is read.
        assert not plan_time, setting


@pytest.mark.parametrize("setting, value, extra, reason", GPUPROV_STRICTER,
                         ids=["%s=%s" % (row[0], ascii(row[1])) for row in GPUPROV_STRICTER])
def test_where_gpuprov_is_stricter_the_kubelet_accepts(tmp_path, setting, value, extra, reason):
    plan_time, on_node, _errors, kubelet = verdicts(tmp_path, setting, value, extra)
    assert kubelet.returncode == 0, kubelet
    assert not plan_time and not on_node
