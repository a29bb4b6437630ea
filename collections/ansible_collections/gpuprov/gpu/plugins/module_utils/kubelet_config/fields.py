# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)

"""The KubeletConfiguration fields gpuprov manages: their allowed values, the kubelet's
defaults, and the policy options it knows."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


DEFAULT_CONFIG_PATH = "/var/lib/kubelet/config.yaml"
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
ENUM_OPTION = "enum"

# Option name -> value type. The kubelet reads every value as a string (the maps are
# map[string]string): booleans with strconv.ParseBool, integers with strconv.Atoi
# (pkg/kubelet/cm/cpumanager/policy_options.go, pkg/kubelet/cm/topologymanager/policy_options.go,
# kubernetes v1.37.2). Which release knows which option, and behind which gate: versions.py.
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
    "numa-allocation-strategy": ENUM_OPTION,
}
# numa-allocation-strategy: "" means none. UNVERIFIED: no release has the option yet; the
# values are those of its implementation, kubernetes/kubernetes#142226 (alpha, 1.38).
NUMA_ALLOCATION_STRATEGIES = ("", "none", "most-allocated", "least-allocated")
OPTION_VALUES = {"numa-allocation-strategy": NUMA_ALLOCATION_STRATEGIES}

# The static CPU policy refuses these pairs when both are true (NewStaticPolicyOptions).
CPU_MANAGER_EXCLUSIVE_OPTIONS = (
    ("full-pcpus-only", "distribute-cpus-across-cores"),
    ("distribute-cpus-across-numa", "distribute-cpus-across-cores"),
    ("prefer-align-cpus-by-uncorecache", "distribute-cpus-across-cores"),
    ("prefer-align-cpus-by-uncorecache", "distribute-cpus-across-numa"),
)

# The Topology Manager refuses to start on a machine with more NUMA nodes than it allows: 8,
# or max-allowable-numa-nodes, which may not be less than 8 (NewPolicyOptions: "the minimum
# value ... should not be less than 8"; 8 itself is accepted).
MAX_ALLOWABLE_NUMA_NODES_DEFAULT = 8
# gpuprov's own bound, above any machine: the kubelet takes any int and only warns.
MAX_ALLOWABLE_NUMA_NODES_LIMIT = 1024

# What the kubelet gives a main config file without evictionHard, before drop-ins merge
# (cmd/kubelet/app/server.go loadConfigFile; pkg/kubelet/eviction/defaults_linux.go).
DEFAULT_EVICTION_HARD = {
    "memory.available": DEFAULT_EVICTION_HARD_MEMORY,
    "nodefs.available": "10%",
    "nodefs.inodesFree": "5%",
    "imagefs.available": "15%",
    "imagefs.inodesFree": "5%",
}
