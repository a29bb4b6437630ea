# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)

"""Linux cpusets ("0-3,8,10-11") and the CPU/NUMA topology that sysfs exposes.

Parsing
-------
``parse_cpuset`` accepts the list format the kernel prints in ``cpulist`` files and the
kubelet accepts in ``reservedSystemCPUs``: comma-separated CPU numbers and inclusive
``first-last`` ranges. Surrounding whitespace (the kernel's trailing newline) is ignored and
the empty string is the empty set (a memory-only NUMA node has an empty ``cpulist``).

Rejected, with a ``CpusetError`` that quotes the offending element:

* reversed ranges (``3-1``), empty elements (``0,,2``, a trailing comma), signs, letters and
  anything else that is not a decimal CPU number;
* the kernel's stride syntax (``0-31:2/4``), which the kubelet's cpuset parser does not read;
* by default, a CPU listed twice (``0-3,2``). The kubelet would silently take the union, but
  an overlap in a hand-written reservation is almost always a typo. Pass
  ``allow_duplicates=True`` to take the union instead; the sysfs readers below do.

``format_cpuset`` writes the canonical form: sorted, consecutive CPUs folded into ranges.

Topology from sysfs
-------------------
The readers below take ``sysfs_root`` (default ``/sys``) so tests and tools can point them at
a fake tree with the same layout:

* ``<root>/devices/system/cpu/online``                             online CPUs
* ``<root>/devices/system/node/node<N>/cpulist``                   CPUs of NUMA node N
* ``<root>/devices/system/node/node<N>/meminfo``                   memory of NUMA node N
* ``<root>/devices/system/cpu/cpu<C>/topology/thread_siblings_list``  hyperthreads of CPU C

They are pure stdlib and raise ``SysfsError`` (naming the file) when a file is missing or
unreadable, so the same code serves modules that must explain a failure on a node.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re

DEFAULT_SYSFS_ROOT = "/sys"
# The largest CPU id Linux can have: CONFIG_NR_CPUS is at most 8192 (arch/x86/Kconfig
# NR_CPUS_RANGE_END with MAXSMP; arm64 allows up to 4096). A bigger id is no CPU, and
# refusing it keeps "0-999999999" from building a billion-element set.
MAX_CPU_ID = 8191
# A cpuset string longer than this is refused before it is split (every CPU listed one by
# one, "0,1,...,8191", is about 40 KB).
MAX_CPUSET_LENGTH = 65536
# Only ASCII whitespace is ignored (the kernel's trailing newline); CPU numbers are ASCII
# digits, as the kubelet's cpuset parser (k8s.io/utils/cpuset, strconv.Atoi) reads them.
_ASCII_SPACE = " \t\n\r\v\f"

_NODE_DIR_RE = re.compile(r"^node(\d+)\Z", re.ASCII)
_CPU_DIR_RE = re.compile(r"^cpu(\d+)\Z", re.ASCII)
_CPU_NUMBER_RE = re.compile(r"^\d{1,9}\Z", re.ASCII)
_MEMINFO_TOTAL_RE = re.compile(r"^Node\s+\d+\s+MemTotal:\s+(\d+)\s+kB\s*\Z", re.ASCII)


class CpusetError(ValueError):
    """A cpuset string that does not parse; the message quotes the bad element."""


class SysfsError(Exception):
    """A topology file that is missing or unreadable; ``path`` names it."""

    def __init__(self, path, message):
        super(SysfsError, self).__init__("%s: %s" % (path, message))
        self.path = path


def _parse_cpu_number(text, element):
    if not _CPU_NUMBER_RE.match(text):
        raise CpusetError(
            "invalid CPU number %r in cpuset element %r: expected a decimal CPU number or a "
            "range like 0-3" % (text[:20], element[:40]))
    number = int(text)
    if number > MAX_CPU_ID:
        raise CpusetError("CPU %d in cpuset element %r is above the largest CPU id Linux has (%d)"
                          % (number, element[:40], MAX_CPU_ID))
    return number


def parse_cpuset(text, allow_duplicates=False):
    """Parse a cpuset string into a sorted list of CPU numbers.

    :arg text: the cpuset, for example ``"0-3,8,10-11"``; ``""`` is the empty set.
    :kwarg allow_duplicates: take the union when a CPU is listed more than once instead of
        raising ``CpusetError``.
    :returns: sorted list of ints without repeats.
    """
    if not isinstance(text, str):
        raise CpusetError("a cpuset must be a string like '0-3,8', got %r" % (text,))
    if len(text) > MAX_CPUSET_LENGTH:
        raise CpusetError("a cpuset of %d characters is over the limit of %d" % (len(text), MAX_CPUSET_LENGTH))
    stripped = text.strip(_ASCII_SPACE)
    if not stripped:
        return []
    cpus = set()
    listed = 0
    quoted = text if len(text) <= 80 else text[:80] + "..."
    for element in stripped.split(","):
        item = element.strip(_ASCII_SPACE)
        if not item:
            raise CpusetError("empty element in cpuset %r (doubled or trailing comma?)" % quoted)
        if ":" in item or "/" in item:
            raise CpusetError(
                "stride syntax %r in cpuset %r is not supported: list the CPUs or ranges "
                "explicitly" % (item[:40], quoted))
        if "-" in item:
            first_text, _sep, last_text = item.partition("-")
            first = _parse_cpu_number(first_text.strip(_ASCII_SPACE), item)
            last = _parse_cpu_number(last_text.strip(_ASCII_SPACE), item)
            if last < first:
                raise CpusetError(
                    "reversed range %r in cpuset %r: write it as %d-%d" % (item, quoted, last, first))
            members = range(first, last + 1)
        else:
            members = [_parse_cpu_number(item, item)]
        listed += len(members)
        if listed > 2 * (MAX_CPU_ID + 1):
            # Only repeats get here (every id is <= MAX_CPU_ID); stop before they cost time.
            raise CpusetError("cpuset %r lists more than %d CPUs, counting repeats" % (quoted, 2 * (MAX_CPU_ID + 1)))
        for cpu in members:
            if cpu in cpus and not allow_duplicates:
                raise CpusetError("CPU %d is listed more than once in cpuset %r" % (cpu, quoted))
            cpus.add(cpu)
    return sorted(cpus)


def format_cpuset(cpus):
    """Format CPU numbers as a canonical cpuset string (``[0, 1, 2, 3, 8]`` -> ``"0-3,8"``)."""
    ordered = sorted(set(cpus))
    parts = []
    index = 0
    while index < len(ordered):
        first = ordered[index]
        last = first
        while index + 1 < len(ordered) and ordered[index + 1] == last + 1:
            index += 1
            last = ordered[index]
        parts.append(str(first) if first == last else "%d-%d" % (first, last))
        index += 1
    return ",".join(parts)


def _read_text(path):
    try:
        with open(path, "r") as handle:
            return handle.read()
    except (IOError, OSError) as exc:
        raise SysfsError(path, "cannot read: %s" % (exc.strerror or exc))


def read_cpulist(path):
    """Read one sysfs cpulist file (for example ``node0/cpulist``) as a sorted list of ints."""
    try:
        return parse_cpuset(_read_text(path), allow_duplicates=True)
    except CpusetError as exc:
        raise SysfsError(path, "unexpected content: %s" % exc)


def _system_dir(sysfs_root, kind):
    return os.path.join(sysfs_root, "devices", "system", kind)


def read_online_cpus(sysfs_root=DEFAULT_SYSFS_ROOT):
    """Online CPUs from ``<root>/devices/system/cpu/online``."""
    return read_cpulist(os.path.join(_system_dir(sysfs_root, "cpu"), "online"))


def _numa_node_dirs(sysfs_root):
    node_dir = _system_dir(sysfs_root, "node")
    try:
        names = os.listdir(node_dir)
    except (IOError, OSError):
        return {}
    nodes = {}
    for name in names:
        match = _NODE_DIR_RE.match(name)
        if match:
            nodes[int(match.group(1))] = os.path.join(node_dir, name)
    return nodes


def read_numa_node_cpus(sysfs_root=DEFAULT_SYSFS_ROOT):
    """CPUs per NUMA node: ``{node_id: [cpu, ...]}`` from ``node<N>/cpulist``.

    Memory-only nodes (CXL memory, the GPU memory of a Grace Hopper superchip) appear with an
    empty list. A kernel built without NUMA has no ``devices/system/node`` directory: then
    every online CPU belongs to node 0, as the kubelet assumes too.
    """
    node_dirs = _numa_node_dirs(sysfs_root)
    if not node_dirs:
        return {0: read_online_cpus(sysfs_root)}
    return dict((node, read_cpulist(os.path.join(path, "cpulist")))
                for node, path in sorted(node_dirs.items()))


def read_numa_node_memory(sysfs_root=DEFAULT_SYSFS_ROOT):
    """Total memory in bytes per NUMA node, from ``node<N>/meminfo`` (``MemTotal``).

    Returns ``{}`` on a kernel without NUMA directories.
    """
    memory = {}
    for node, path in sorted(_numa_node_dirs(sysfs_root).items()):
        meminfo = os.path.join(path, "meminfo")
        for line in _read_text(meminfo).splitlines():
            match = _MEMINFO_TOTAL_RE.match(line)
            if match:
                memory[node] = int(match.group(1)) * 1024
                break
        else:
            raise SysfsError(meminfo, "no 'Node %d MemTotal: <n> kB' line" % node)
    return memory


def read_thread_siblings(sysfs_root=DEFAULT_SYSFS_ROOT, cpus=None):
    """Hyperthread siblings per CPU: ``{cpu: [cpu, sibling, ...]}``.

    Read from ``cpu<C>/topology/thread_siblings_list`` for each CPU in ``cpus`` (default: the
    online CPUs; an offline CPU has no topology directory). A CPU without SMT is its own only
    sibling.
    """
    if cpus is None:
        cpus = read_online_cpus(sysfs_root)
    cpu_dir = _system_dir(sysfs_root, "cpu")
    return dict((cpu, read_cpulist(os.path.join(cpu_dir, "cpu%d" % cpu, "topology",
                                                "thread_siblings_list")))
                for cpu in cpus)


class CpuTopology(object):
    """Online CPUs, their NUMA nodes and hyperthread siblings, as read from sysfs.

    ``numa_nodes`` maps node id to its online CPUs; ``siblings`` maps each online CPU to its
    online siblings (itself included).
    """

    def __init__(self, online, numa_nodes, siblings):
        self.online = sorted(online)
        online_set = set(self.online)
        self.numa_nodes = dict((node, sorted(c for c in node_cpus if c in online_set))
                               for node, node_cpus in numa_nodes.items())
        self.siblings = dict((cpu, sorted(c for c in sibs if c in online_set))
                             for cpu, sibs in siblings.items())

    @classmethod
    def from_sysfs(cls, sysfs_root=DEFAULT_SYSFS_ROOT):
        online = read_online_cpus(sysfs_root)
        return cls(online, read_numa_node_cpus(sysfs_root),
                   read_thread_siblings(sysfs_root, online))

    def physical_cores(self, node):
        """The physical cores of a NUMA node, each as the sorted list of its online threads.

        Cores are ordered by their lowest CPU number, so the first entry is the core that holds
        the node's lowest-numbered CPU.
        """
        node_cpus = self.numa_nodes.get(node, [])
        node_set = set(node_cpus)
        cores = []
        seen = set()
        for cpu in node_cpus:
            if cpu in seen:
                continue
            core = [c for c in self.siblings.get(cpu, [cpu]) if c in node_set] or [cpu]
            if cpu not in core:
                core = sorted(core + [cpu])
            seen.update(core)
            cores.append(core)
        return cores


def auto_reserved_cpus(topology):
    """CPUs to reserve for the system when ``reservedSystemCPUs`` is ``auto``.

    Takes the first physical core (all its hyperthreads) of every NUMA node that has more than
    one physical core. One core per node keeps system daemons next to each node's devices,
    and whole cores keep ``full-pcpus-only`` satisfiable. A node with a single core (and a
    memory-only node) gives nothing, so no NUMA node loses all its CPUs to the reservation.

    :returns: sorted list of CPU numbers.
    :raises CpusetError: when no node has a core to spare (for example a one-core machine);
        set an explicit cpuset there.
    """
    reserved = []
    for node in sorted(topology.numa_nodes):
        cores = topology.physical_cores(node)
        if len(cores) > 1:
            reserved.extend(cores[0])
    if not reserved:
        raise CpusetError(
            "'auto' found no NUMA node with more than one physical core to spare (online CPUs: "
            "%s); set an explicit cpuset instead" % (format_cpuset(topology.online) or "none"))
    return sorted(reserved)
