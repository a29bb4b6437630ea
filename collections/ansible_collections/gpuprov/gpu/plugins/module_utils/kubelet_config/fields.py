# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)

"""The KubeletConfiguration fields gpuprov manages: their allowed values, the kubelet's
defaults, and the policy options it knows."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


DEFAULT_CONFIG_PATH = "/var/lib/kubelet/config.yaml"
CPU_MANAGER_STATE_FILE = "cpu_manager_state"
MEMORY_MANAGER_STATE_FILE = "memory_manager_state"
AUTO = "auto"

CPU_MANAGER_POLICIES = ("none", "static")
TOPOLOGY_MANAGER_POLICIES = ("none", "best-effort", "restricted", "single-numa-node")
TOPOLOGY_MANAGER_SCOPES = ("container", "pod")
MEMORY_MANAGER_POLICIES = ("None", "Static")

# Values the kubelet assumes when a key is absent.
DEFAULT_CPU_MANAGER_POLICY = "none"
DEFAULT_MEMORY_MANAGER_POLICY = "None"
DEFAULT_EVICTION_HARD_MEMORY = "100Mi"

BOOL_OPTION = "bool"
INT_OPTION = "int"
STRING_OPTION = "string"

# Option name -> value type. The kubelet reads every value as a string (the maps are
# map[string]string) and parses booleans with Go's strconv.ParseBool.
CPU_MANAGER_POLICY_OPTIONS = {
    "full-pcpus-only": BOOL_OPTION,
    "distribute-cpus-across-numa": BOOL_OPTION,
    "strict-cpu-reservation": BOOL_OPTION,
    "prefer-align-cpus-by-uncorecache": BOOL_OPTION,
    "align-by-socket": BOOL_OPTION,
    "distribute-cpus-across-cores": BOOL_OPTION,
}
TOPOLOGY_MANAGER_POLICY_OPTIONS = {
    "prefer-closest-numa-nodes": BOOL_OPTION,
    "max-allowable-numa-nodes": INT_OPTION,
    # Alpha in 1.38. UNVERIFIED: the accepted values are not settled in the docs yet, so any
    # non-empty string passes here and the kubelet has the last word.
    "numa-allocation-strategy": STRING_OPTION,
}
# The kubelet refuses to run Topology Manager above 8 NUMA nodes unless this option raises the
# limit, and the value must exceed the default of 8 (kubernetes docs, topology-manager.md).
MAX_ALLOWABLE_NUMA_NODES_DEFAULT = 8

GO_BOOL_VALUES = {
    "1": True, "t": True, "T": True, "TRUE": True, "true": True, "True": True,
    "0": False, "f": False, "F": False, "FALSE": False, "false": False, "False": False,
}
