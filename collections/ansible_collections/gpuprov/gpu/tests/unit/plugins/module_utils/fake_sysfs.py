# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)

"""Build fake sysfs CPU/NUMA trees for tests, in the layout the kernel uses.

``build_sysfs(root, numa_nodes=2, cores_per_node=4, smt=True)`` writes::

    <root>/devices/system/cpu/online
    <root>/devices/system/cpu/cpu<C>/topology/thread_siblings_list
    <root>/devices/system/node/node<N>/cpulist
    <root>/devices/system/node/node<N>/meminfo

CPU numbering follows the common x86 enumeration: the first thread of every core comes first
(0 .. cores-1, node by node), then the second threads (``sibling_layout="split"``, so CPU 0's
sibling is CPU ``total_cores``). ``sibling_layout="adjacent"`` numbers the threads of a core
next to each other (0,1 / 2,3), as some AMD and ARM firmware does.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

from ansible_collections.gpuprov.gpu.plugins.module_utils.cpuset import format_cpuset


def _write(path, text):
    directory = os.path.dirname(path)
    if not os.path.isdir(directory):
        os.makedirs(directory)
    with open(path, "w") as handle:
        handle.write(text)


def build_sysfs(root, numa_nodes=2, cores_per_node=4, smt=True, sibling_layout="split",
                memory_only_nodes=0, node_memory_kb=16 * 1024 * 1024, offline=(),
                numa_dirs=True):
    """Write a fake topology under ``root`` and return ``{node: [cpus]}`` as written.

    :arg memory_only_nodes: extra NUMA nodes with memory and no CPUs (numbered after the
        others, like the GPU memory nodes of a Grace Hopper system).
    :arg offline: CPUs to leave out of ``online`` (their topology directory is not written,
        as the kernel hides it).
    :arg numa_dirs: False writes no ``devices/system/node`` directory (a non-NUMA kernel).
    """
    total_cores = numa_nodes * cores_per_node
    threads = 2 if smt else 1
    cores = []  # cores[n] = list of threads of core n, cores numbered node by node
    for core in range(total_cores):
        if sibling_layout == "split":
            cores.append([core + thread * total_cores for thread in range(threads)])
        elif sibling_layout == "adjacent":
            cores.append([core * threads + thread for thread in range(threads)])
        else:
            raise ValueError("sibling_layout must be split or adjacent")

    offline = set(offline)
    node_cpus = {}
    for node in range(numa_nodes):
        cpus = []
        for core in cores[node * cores_per_node:(node + 1) * cores_per_node]:
            cpus.extend(core)
        node_cpus[node] = sorted(cpus)

    all_cpus = sorted(cpu for core in cores for cpu in core)
    online = [cpu for cpu in all_cpus if cpu not in offline]
    cpu_dir = os.path.join(root, "devices", "system", "cpu")
    _write(os.path.join(cpu_dir, "online"), format_cpuset(online) + "\n")
    _write(os.path.join(cpu_dir, "possible"), format_cpuset(all_cpus) + "\n")
    for core in cores:
        siblings = [cpu for cpu in core if cpu not in offline]
        for cpu in siblings:
            _write(os.path.join(cpu_dir, "cpu%d" % cpu, "topology", "thread_siblings_list"),
                   format_cpuset(siblings) + "\n")

    for node in range(numa_nodes, numa_nodes + memory_only_nodes):
        node_cpus[node] = []
    if numa_dirs:
        for node, cpus in node_cpus.items():
            node_dir = os.path.join(root, "devices", "system", "node", "node%d" % node)
            _write(os.path.join(node_dir, "cpulist"),
                   format_cpuset([cpu for cpu in cpus if cpu not in offline]) + "\n")
            _write(os.path.join(node_dir, "meminfo"),
                   "Node %d MemTotal:       %d kB\nNode %d MemFree:        %d kB\n"
                   % (node, node_memory_kb, node, node_memory_kb // 2))
    return node_cpus
