# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)

"""The kubelet's KubeletConfiguration file, edited for CPU, topology and memory management.

The file is read into PyYAML's node graph (``yaml.compose``), only the managed keys are
replaced, and the graph is written back with ``yaml.serialize``. Working on nodes rather than
on Python dicts keeps, for every key this code does not manage, the key order, the scalar
quoting style (``containerRuntimeEndpoint: ""``, ``infoBufferSize: "0"``) and flow style
(``memorySwap: {}``). A file in the layout kubeadm writes (sorted keys, two-space indent,
sequences not indented under their key) therefore comes back byte for byte apart from the
managed keys. Other layouts are normalised to that one. PyYAML drops comments: the file is only
rewritten when a managed value changes, and a backup of the previous file is kept.

New keys go where kubeadm would put them (sorted position) when the existing keys are sorted,
otherwise at the end; new maps are written with sorted keys, as the kubelet's own marshalling
does.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import bisect
import errno
import os
import re
import shutil
import stat
import tempfile
import time
import traceback
from fractions import Fraction

try:
    import yaml
    HAS_YAML = True
    YAML_IMPORT_ERROR = None
except ImportError:  # pragma: no cover - PyYAML ships with ansible-core
    yaml = None
    HAS_YAML = False
    YAML_IMPORT_ERROR = traceback.format_exc()

from ansible_collections.gpuprov.gpu.plugins.module_utils.cpuset import (
    CpuTopology,
    CpusetError,
    DEFAULT_SYSFS_ROOT,
    SysfsError,
    auto_reserved_cpus,
    format_cpuset,
    parse_cpuset,
    read_numa_node_memory,
)

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

_DURATION_RE = re.compile(r"^[-+]?(?:(?:\d+(?:\.\d*)?|\.\d+)(?:ns|us|\u00b5s|\u03bcs|ms|s|m|h))+$|^0$")
_QUANTITY_RE = re.compile(
    r"^(?P<number>[+-]?(?:\d+(?:\.\d*)?|\.\d+))"
    r"(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E|[eE][+-]?\d+)?$")
_BINARY_SUFFIXES = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}
_DECIMAL_SUFFIXES = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12,
                     "P": 15, "E": 18}

STR_TAG = "tag:yaml.org,2002:str"
INT_TAG = "tag:yaml.org,2002:int"
BOOL_TAG = "tag:yaml.org,2002:bool"
MAP_TAG = "tag:yaml.org,2002:map"
SEQ_TAG = "tag:yaml.org,2002:seq"

# Sentinel: the managed key is to be removed from the file.
REMOVE = object()


class KubeletConfigError(Exception):
    """Bad input or a config the kubelet would reject. ``errors`` lists one line per field."""

    def __init__(self, message, errors=None):
        super(KubeletConfigError, self).__init__(message)
        self.errors = list(errors or [])


# --------------------------------------------------------------------------------------------
# Kubernetes quantities and durations


def parse_quantity(value):
    """Parse a Kubernetes resource quantity (``"100Mi"``, ``"1.5"``, ``"500m"``, ``"1e3"``).

    :returns: the amount in base units as an exact ``Fraction`` (bytes for memory, cores for
        CPU).
    :raises ValueError: for anything the API server would not accept.
    """
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise ValueError("%r is not a quantity" % (value,))
    text = str(value).strip()
    match = _QUANTITY_RE.match(text)
    if not match:
        raise ValueError("%r is not a Kubernetes quantity (examples: 100Mi, 1Gi, 500m, 2)"
                         % (value,))
    number = Fraction(match.group("number"))
    suffix = match.group("suffix") or ""
    if suffix in _BINARY_SUFFIXES:
        return number * (1024 ** _BINARY_SUFFIXES[suffix])
    if suffix in _DECIMAL_SUFFIXES:
        return number * (Fraction(10) ** _DECIMAL_SUFFIXES[suffix])
    return number * (Fraction(10) ** int(suffix[1:]))


def format_bytes(amount):
    """Format a byte count for an error message (``Fraction(1073741824)`` -> ``"1Gi"``)."""
    if amount.denominator == 1:
        whole = int(amount)
        for suffix, power in sorted(_BINARY_SUFFIXES.items(), key=lambda item: -item[1]):
            unit = 1024 ** power
            if whole and whole % unit == 0:
                return "%d%s" % (whole // unit, suffix)
        return str(whole)
    return str(float(amount))


def is_duration(value):
    """True for a Go duration string such as ``10s``, ``1m30s`` or ``0``."""
    return isinstance(value, str) and bool(_DURATION_RE.match(value))


# --------------------------------------------------------------------------------------------
# Desired settings


class KubeletSettings(object):
    """The managed settings, in the module's snake_case vocabulary.

    Every attribute is ``None`` when that key is left alone. Empty values remove a key:
    ``{}`` for the option maps, ``[]`` for ``reserved_memory`` and ``""`` for
    ``reserved_system_cpus``, ``kube_reserved_cpu`` and ``system_reserved_cpu``.
    """

    FIELDS = (
        "cpu_manager_policy", "cpu_manager_policy_options", "cpu_manager_reconcile_period",
        "topology_manager_policy", "topology_manager_scope", "topology_manager_policy_options",
        "reserved_system_cpus", "kube_reserved_cpu", "system_reserved_cpu",
        "memory_manager_policy", "reserved_memory",
    )

    def __init__(self, **kwargs):
        unknown = set(kwargs) - set(self.FIELDS)
        if unknown:
            raise TypeError("unknown kubelet settings: %s" % ", ".join(sorted(unknown)))
        for field in self.FIELDS:
            setattr(self, field, kwargs.get(field))

    @classmethod
    def from_params(cls, params):
        return cls(**dict((field, params.get(field)) for field in cls.FIELDS))


def _settings_error(message):
    """A setting that cannot be turned into a config value; ``message`` starts with the field."""
    return KubeletConfigError(message, [message])


def _option_map(value, field):
    """Normalise a policy-options map to the kubelet's map[string]string form."""
    if not isinstance(value, dict):
        raise _settings_error("%s: must be a map of option name to value" % field)
    normalised = {}
    for name, option_value in value.items():
        if isinstance(option_value, bool):
            option_value = "true" if option_value else "false"
        elif isinstance(option_value, int):
            option_value = str(option_value)
        elif not isinstance(option_value, str):
            raise _settings_error("%s.%s: value %r must be a string, boolean or integer"
                                  % (field, name, option_value))
        normalised[str(name)] = option_value
    return dict(sorted(normalised.items()))


def _reserved_memory_list(entries):
    """Turn ``[{numa_node: 0, limits: {memory: 1Gi}}]`` into the kubelet's reservedMemory."""
    if not isinstance(entries, list):
        raise _settings_error("reservedMemory: must be a list of {numa_node, limits}")
    result = []
    for index, entry in enumerate(entries):
        field = "reservedMemory[%d]" % index
        if not isinstance(entry, dict) or "numa_node" not in entry or "limits" not in entry:
            raise _settings_error("%s: each entry needs numa_node and limits" % field)
        numa_node = entry["numa_node"]
        if isinstance(numa_node, bool) or not isinstance(numa_node, int):
            raise _settings_error("%s.numaNode: %r is not an integer" % (field, numa_node))
        limits = entry["limits"]
        if not isinstance(limits, dict) or not limits:
            raise _settings_error("%s.limits: must be a non-empty map such as {memory: 1Gi}"
                                  % field)
        result.append({
            "limits": dict(sorted((str(k), str(v)) for k, v in limits.items())),
            "numaNode": numa_node,
        })
    return result


# --------------------------------------------------------------------------------------------
# The YAML document, edited at node level


def _plain_resolves_to_str(value):
    resolver = yaml.resolver.Resolver()
    return resolver.resolve(yaml.ScalarNode, value, (True, False)) == STR_TAG


def to_node(value):
    """Build a YAML node for a new value, styled the way the kubelet's own marshalling is."""
    if isinstance(value, bool):
        return yaml.ScalarNode(BOOL_TAG, "true" if value else "false")
    if isinstance(value, int):
        return yaml.ScalarNode(INT_TAG, str(value))
    if isinstance(value, str):
        # Quote only what would otherwise read back as a number, bool or null ("0", "true").
        style = None if value and _plain_resolves_to_str(value) else '"'
        return yaml.ScalarNode(STR_TAG, value, style=style)
    if isinstance(value, dict):
        return yaml.MappingNode(MAP_TAG, [(to_node(str(k)), to_node(v)) for k, v in value.items()],
                                flow_style=False if value else True)
    if isinstance(value, list):
        return yaml.SequenceNode(SEQ_TAG, [to_node(item) for item in value],
                                 flow_style=False if value else True)
    raise TypeError("cannot write %r into a kubelet config" % (value,))


def node_value(node):
    """The Python value of a node, constructed the way ``yaml.safe_load`` would."""
    loader = yaml.SafeLoader("")
    try:
        return loader.construct_document(node)
    finally:
        loader.dispose()


class KubeletConfigDocument(object):
    """A KubeletConfiguration file held as a PyYAML node graph."""

    def __init__(self, text, path="<string>"):
        self.path = path
        self.original_text = text
        try:
            root = yaml.compose(text, Loader=yaml.SafeLoader)
        except yaml.YAMLError as exc:
            raise KubeletConfigError("%s is not valid YAML: %s" % (path, exc))
        if root is None:
            root = yaml.MappingNode(MAP_TAG, [], flow_style=False)
        if not isinstance(root, yaml.MappingNode):
            raise KubeletConfigError(
                "%s must hold a KubeletConfiguration mapping, found a %s" % (
                    path, type(root).__name__.replace("Node", "").lower()))
        self.root = root
        self.explicit_start = _starts_with_document_marker(text)

    # -- reading

    def _find(self, mapping, key):
        for index, (key_node, _value_node) in enumerate(mapping.value):
            if isinstance(key_node, yaml.ScalarNode) and key_node.value == key:
                return index
        return None

    def _mapping_at(self, path, create):
        mapping = self.root
        for key in path:
            index = self._find(mapping, key)
            if index is None:
                if not create:
                    return None
                child = yaml.MappingNode(MAP_TAG, [], flow_style=False)
                self._insert(mapping, key, child)
                mapping = child
                continue
            child = mapping.value[index][1]
            if create and isinstance(child, yaml.ScalarNode) and node_value(child) is None:
                # "kubeReserved:" with no value: the kubelet reads it as an empty map.
                child = yaml.MappingNode(MAP_TAG, [], flow_style=False)
                mapping.value[index] = (mapping.value[index][0], child)
            if not isinstance(child, yaml.MappingNode):
                if not create:
                    return None
                raise KubeletConfigError(
                    "%s: %s must be a map to set keys inside it" % (self.path, ".".join(path)),
                    ["%s: must be a map" % ".".join(path)])
            mapping = child
        return mapping

    def get(self, path, default=None):
        """Python value at a key path such as ``("kubeReserved", "cpu")``."""
        mapping = self._mapping_at(path[:-1], create=False)
        if mapping is None:
            return default
        index = self._find(mapping, path[-1])
        if index is None:
            return default
        return node_value(mapping.value[index][1])

    def has(self, path):
        mapping = self._mapping_at(path[:-1], create=False)
        return mapping is not None and self._find(mapping, path[-1]) is not None

    def as_dict(self):
        return node_value(self.root) or {}

    # -- writing

    def _insert(self, mapping, key, value_node):
        keys = [k.value for k, _v in mapping.value if isinstance(k, yaml.ScalarNode)]
        entry = (to_node(key), value_node)
        if len(keys) == len(mapping.value) and keys == sorted(keys):
            mapping.value.insert(bisect.bisect(keys, key), entry)
        else:
            mapping.value.append(entry)
        if mapping.flow_style:
            # A "{}" placeholder that now holds keys is written as a block map, like kubeadm.
            mapping.flow_style = False

    def set(self, path, value):
        """Set a key path to a value; returns True when the value changed."""
        if self.has(path) and self.get(path) == value:
            return False
        mapping = self._mapping_at(path[:-1], create=True)
        index = self._find(mapping, path[-1])
        if index is None:
            self._insert(mapping, path[-1], to_node(value))
        else:
            mapping.value[index] = (mapping.value[index][0], to_node(value))
        return True

    def remove(self, path):
        """Remove a key path; returns True when it was there."""
        mapping = self._mapping_at(path[:-1], create=False)
        if mapping is None:
            return False
        index = self._find(mapping, path[-1])
        if index is None:
            return False
        del mapping.value[index]
        return True

    def render(self):
        return yaml.serialize(self.root, Dumper=yaml.SafeDumper, allow_unicode=True,
                              width=1 << 30, explicit_start=self.explicit_start)


def _starts_with_document_marker(text):
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("#") or stripped.startswith("%"):
            continue
        return stripped == "---" or stripped.startswith("--- ")
    return False


# --------------------------------------------------------------------------------------------
# Validation of the config as the kubelet will read it


class NodeTopology(object):
    """Reads the node's topology from sysfs on first use, so configs that need no topology
    never touch sysfs."""

    def __init__(self, sysfs_root=DEFAULT_SYSFS_ROOT):
        self.sysfs_root = sysfs_root
        self._cpus = None
        self._memory = None

    @property
    def cpus(self):
        if self._cpus is None:
            self._cpus = CpuTopology.from_sysfs(self.sysfs_root)
        return self._cpus

    @property
    def memory(self):
        if self._memory is None:
            self._memory = read_numa_node_memory(self.sysfs_root)
        return self._memory


def _check_enum(config, key, allowed, errors):
    value = config.get(key)
    if value is not None and value not in allowed:
        errors.append("%s: %r is not one of %s" % (key, value, ", ".join(allowed)))


def _check_option_map(config, key, known, errors):
    options = config.get(key)
    if options is None:
        return
    if not isinstance(options, dict):
        errors.append("%s: must be a map of option name to string value" % key)
        return
    for name, value in options.items():
        field = "%s.%s" % (key, name)
        if name not in known:
            errors.append("%s: unknown option (known: %s)" % (field, ", ".join(sorted(known))))
            continue
        if not isinstance(value, str):
            errors.append("%s: value %r must be a quoted string such as \"true\"" % (field, value))
            continue
        kind = known[name]
        if kind == BOOL_OPTION and value not in GO_BOOL_VALUES:
            errors.append("%s: %r is not a boolean (use \"true\" or \"false\")" % (field, value))
        elif kind == INT_OPTION:
            if not re.match(r"^[+-]?\d+$", value):
                errors.append("%s: %r is not an integer" % (field, value))
            elif name == "max-allowable-numa-nodes" and int(value) <= MAX_ALLOWABLE_NUMA_NODES_DEFAULT:
                errors.append("%s: %s must be greater than %d, the kubelet's default limit"
                              % (field, value, MAX_ALLOWABLE_NUMA_NODES_DEFAULT))
        elif kind == STRING_OPTION and not value:
            errors.append("%s: must not be empty" % field)


def _reserved_quantity(config, map_key, resource, errors):
    """kubeReserved/systemReserved[resource] as a Fraction, 0 when absent."""
    reserved = config.get(map_key) or {}
    if not isinstance(reserved, dict):
        errors.append("%s: must be a map such as {cpu: \"1\", memory: 1Gi}" % map_key)
        return Fraction(0)
    value = reserved.get(resource)
    if value is None:
        return Fraction(0)
    field = "%s.%s" % (map_key, resource)
    if not isinstance(value, str):
        errors.append("%s: %r must be a quoted string (the kubelet reads these maps as strings)"
                      % (field, value))
        return Fraction(0)
    try:
        amount = parse_quantity(value)
    except ValueError as exc:
        errors.append("%s: %s" % (field, exc))
        return Fraction(0)
    if amount < 0:
        errors.append("%s: %s must not be negative" % (field, value))
        return Fraction(0)
    return amount


def _check_cpu_manager(config, topology, errors):
    policy = config.get("cpuManagerPolicy", DEFAULT_CPU_MANAGER_POLICY)
    _check_enum(config, "cpuManagerPolicy", CPU_MANAGER_POLICIES, errors)
    _check_option_map(config, "cpuManagerPolicyOptions", CPU_MANAGER_POLICY_OPTIONS, errors)
    # The none policy refuses any options. UNVERIFIED against every release: read from the
    # kubelet's none policy constructor, which errors on a non-empty options map.
    if policy == "none" and config.get("cpuManagerPolicyOptions"):
        errors.append("cpuManagerPolicyOptions: options need cpuManagerPolicy static; the none "
                      "policy rejects them")
    period = config.get("cpuManagerReconcilePeriod")
    if period is not None and not is_duration(period):
        errors.append("cpuManagerReconcilePeriod: %r is not a duration such as 10s or 1m0s"
                      % (period,))

    kube_cpu = _reserved_quantity(config, "kubeReserved", "cpu", errors)
    system_cpu = _reserved_quantity(config, "systemReserved", "cpu", errors)

    reserved_cpus = config.get("reservedSystemCPUs")
    has_reserved_cpus = False
    if reserved_cpus is not None:
        if not isinstance(reserved_cpus, str):
            errors.append("reservedSystemCPUs: %r must be a cpuset string such as \"0-1\""
                          % (reserved_cpus,))
        else:
            try:
                cpus = parse_cpuset(reserved_cpus)
            except CpusetError as exc:
                errors.append("reservedSystemCPUs: %s" % exc)
            else:
                has_reserved_cpus = bool(cpus)
                if cpus:
                    try:
                        online = set(topology.cpus.online)
                    except SysfsError as exc:
                        errors.append("reservedSystemCPUs: cannot check the CPUs against this "
                                      "node: %s" % exc)
                    else:
                        missing = [cpu for cpu in cpus if cpu not in online]
                        if missing:
                            errors.append(
                                "reservedSystemCPUs: CPUs %s do not exist (or are offline) on "
                                "this node; online CPUs are %s" % (
                                    format_cpuset(missing), format_cpuset(online) or "none"))
    if policy == "static" and not has_reserved_cpus and kube_cpu + system_cpu <= 0:
        errors.append(
            "cpuManagerPolicy: static needs CPUs reserved for the system: set "
            "reservedSystemCPUs, or kubeReserved.cpu / systemReserved.cpu above zero (the "
            "kubelet fails with \"the static policy requires systemreserved.cpu + "
            "kubereserved.cpu to be greater than zero\")")


def _eviction_hard_memory(config, topology, errors):
    eviction = config.get("evictionHard")
    if eviction is None:
        eviction = {}
    if not isinstance(eviction, dict):
        errors.append("evictionHard: must be a map such as {memory.available: 100Mi}")
        return Fraction(0)
    value = eviction.get("memory.available", DEFAULT_EVICTION_HARD_MEMORY)
    field = "evictionHard.memory.available"
    if isinstance(value, str) and value.endswith("%"):
        try:
            percent = Fraction(value[:-1])
        except ValueError:
            errors.append("%s: %r is not a percentage" % (field, value))
            return Fraction(0)
        try:
            total = sum(topology.memory.values())
        except SysfsError as exc:
            errors.append("%s: %s is relative to node memory, which could not be read: %s"
                          % (field, value, exc))
            return Fraction(0)
        return total * percent / 100
    try:
        return parse_quantity(value)
    except ValueError as exc:
        errors.append("%s: %s" % (field, exc))
        return Fraction(0)


def _check_memory_manager(config, topology, errors):
    _check_enum(config, "memoryManagerPolicy", MEMORY_MANAGER_POLICIES, errors)
    reserved_memory = config.get("reservedMemory")
    if reserved_memory is not None and not isinstance(reserved_memory, list):
        errors.append("reservedMemory: must be a list of {numaNode, limits}")
        return
    if config.get("memoryManagerPolicy", DEFAULT_MEMORY_MANAGER_POLICY) != "Static":
        return

    # The kubelet's rule: per resource, the reservedMemory sum over NUMA nodes must equal
    # what Node Allocatable reserves (for memory that includes the hard eviction threshold).
    expected = {"memory": (_reserved_quantity(config, "kubeReserved", "memory", errors)
                           + _reserved_quantity(config, "systemReserved", "memory", errors)
                           + _eviction_hard_memory(config, topology, errors))}
    for map_key in ("kubeReserved", "systemReserved"):
        reserved = config.get(map_key) or {}
        if isinstance(reserved, dict):
            for resource in reserved:
                if str(resource).startswith("hugepages-"):
                    expected[resource] = (expected.get(resource, Fraction(0))
                                          + _reserved_quantity(config, map_key, resource, errors))
    if not reserved_memory:
        errors.append("reservedMemory: memoryManagerPolicy Static needs reservedMemory per "
                      "NUMA node, summing to kubeReserved.memory + systemReserved.memory + "
                      "evictionHard memory.available (%s on this node)"
                      % format_bytes(expected["memory"]))
        return

    try:
        numa_nodes = set(topology.cpus.numa_nodes)
    except SysfsError as exc:
        numa_nodes = None
        errors.append("reservedMemory: cannot read this node's NUMA nodes: %s" % exc)
    totals = {}
    seen_nodes = set()
    for index, entry in enumerate(reserved_memory):
        field = "reservedMemory[%d]" % index
        if not isinstance(entry, dict):
            errors.append("%s: must be a map {numaNode, limits}" % field)
            continue
        numa_node = entry.get("numaNode")
        if isinstance(numa_node, bool) or not isinstance(numa_node, int) or numa_node < 0:
            errors.append("%s.numaNode: %r is not a NUMA node number" % (field, numa_node))
        elif numa_nodes is not None and numa_node not in numa_nodes:
            errors.append("%s.numaNode: NUMA node %d does not exist on this node (nodes: %s)"
                          % (field, numa_node, ", ".join(str(n) for n in sorted(numa_nodes))))
        elif numa_node in seen_nodes:
            errors.append("%s.numaNode: NUMA node %d is listed twice" % (field, numa_node))
        else:
            seen_nodes.add(numa_node)
        limits = entry.get("limits")
        if not isinstance(limits, dict) or not limits:
            errors.append("%s.limits: must be a non-empty map such as {memory: 1Gi}" % field)
            continue
        for resource, value in limits.items():
            if resource != "memory" and not str(resource).startswith("hugepages-"):
                errors.append("%s.limits.%s: only memory and hugepages-<size> can be reserved"
                              % (field, resource))
                continue
            try:
                amount = parse_quantity(value)
            except ValueError as exc:
                errors.append("%s.limits.%s: %s" % (field, resource, exc))
                continue
            totals[resource] = totals.get(resource, Fraction(0)) + amount

    for resource in sorted(set(expected) | set(totals)):
        want = expected.get(resource, Fraction(0))
        have = totals.get(resource, Fraction(0))
        if want != have:
            source = ("kubeReserved.memory + systemReserved.memory + evictionHard "
                      "memory.available" if resource == "memory"
                      else "kubeReserved + systemReserved %s" % resource)
            errors.append("reservedMemory: %s sums to %s over NUMA nodes but %s is %s; the "
                          "kubelet refuses to start unless they are equal"
                          % (resource, format_bytes(have), source, format_bytes(want)))


def _check_topology_manager(config, errors):
    _check_enum(config, "topologyManagerPolicy", TOPOLOGY_MANAGER_POLICIES, errors)
    _check_enum(config, "topologyManagerScope", TOPOLOGY_MANAGER_SCOPES, errors)
    _check_option_map(config, "topologyManagerPolicyOptions", TOPOLOGY_MANAGER_POLICY_OPTIONS,
                      errors)


def validate_config(config, topology):
    """Check the managed fields of a KubeletConfiguration dict as the kubelet would.

    :arg config: the whole config as a dict (after the change).
    :arg topology: a ``NodeTopology``; only read when a check needs the node's CPUs or memory.
    :returns: list of error strings, each starting with the field it is about.
    """
    errors = []
    _check_cpu_manager(config, topology, errors)
    _check_topology_manager(config, errors)
    _check_memory_manager(config, topology, errors)
    # A malformed kubeReserved/systemReserved map is found by more than one check.
    return [error for index, error in enumerate(errors) if error not in errors[:index]]


# --------------------------------------------------------------------------------------------
# Planning and applying a change


class KubeletConfigPlan(object):
    """What applying a set of settings to one config file does."""

    def __init__(self, path, before, after, changed_keys, cpu_reset, memory_reset,
                 reserved_system_cpus):
        self.path = path
        self.before = before
        self.after = after
        self.changed_keys = changed_keys
        self.cpu_manager_state_reset_required = cpu_reset
        self.memory_manager_state_reset_required = memory_reset
        self.reserved_system_cpus = reserved_system_cpus

    @property
    def changed(self):
        return bool(self.changed_keys)


def read_config_text(path):
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except (IOError, OSError) as exc:
        if exc.errno == errno.ENOENT:
            raise KubeletConfigError(
                "kubelet config %s does not exist: configure the kubelet first (kubeadm join "
                "or kubespray writes it) or set path to the file the kubelet reads with "
                "--config" % path)
        raise KubeletConfigError("cannot read kubelet config %s: %s" % (path, exc.strerror))
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise KubeletConfigError("kubelet config %s is not UTF-8 text: %s" % (path, exc))


def _desired_values(settings, document, topology):
    """Key path -> desired Python value (or REMOVE) for the settings given.

    :returns: ``(desired, errors)``; a setting that cannot be turned into a value (a bad
        cpuset, ``auto`` without a topology) is left out of ``desired`` and explained in
        ``errors``, so that it is reported together with the validation of the rest.
    """
    desired = []
    errors = []

    def want(path, value_or_factory):
        if value_or_factory is None:
            return
        try:
            value = value_or_factory() if callable(value_or_factory) else value_or_factory
        except KubeletConfigError as exc:
            errors.extend(exc.errors or [str(exc)])
            return
        desired.append((path, value))

    def option_map(value, field):
        if value is None:
            return None
        return lambda: _option_map(value, field) or REMOVE

    def quantity(value):
        if value is None:
            return None
        return str(value) if str(value) != "" else REMOVE

    want(("cpuManagerPolicy",), settings.cpu_manager_policy)
    want(("cpuManagerPolicyOptions",),
         option_map(settings.cpu_manager_policy_options, "cpuManagerPolicyOptions"))
    want(("cpuManagerReconcilePeriod",), settings.cpu_manager_reconcile_period)
    want(("topologyManagerPolicy",), settings.topology_manager_policy)
    want(("topologyManagerScope",), settings.topology_manager_scope)
    want(("topologyManagerPolicyOptions",),
         option_map(settings.topology_manager_policy_options, "topologyManagerPolicyOptions"))
    if settings.reserved_system_cpus is not None:
        want(("reservedSystemCPUs",),
             lambda: _desired_reserved_cpus(settings.reserved_system_cpus, document, topology))
    want(("kubeReserved", "cpu"), quantity(settings.kube_reserved_cpu))
    want(("systemReserved", "cpu"), quantity(settings.system_reserved_cpu))
    want(("memoryManagerPolicy",), settings.memory_manager_policy)
    if settings.reserved_memory is not None:
        want(("reservedMemory",),
             lambda: _reserved_memory_list(settings.reserved_memory) or REMOVE)
    return desired, errors


def _desired_reserved_cpus(requested, document, topology):
    requested = str(requested).strip()
    if requested == "":
        return REMOVE
    if requested == AUTO:
        try:
            cpus = auto_reserved_cpus(topology.cpus)
        except (CpusetError, SysfsError) as exc:
            raise _settings_error("reservedSystemCPUs: auto: %s" % exc)
    else:
        try:
            cpus = parse_cpuset(requested)
        except CpusetError as exc:
            raise _settings_error("reservedSystemCPUs: %s" % exc)
    # Keep the file's spelling when it already names the same CPUs ("0,1" vs "0-1").
    current = document.get(("reservedSystemCPUs",))
    if isinstance(current, str):
        try:
            if parse_cpuset(current) == cpus:
                return current
        except CpusetError:
            pass
    return format_cpuset(cpus)


def plan_change(path, settings, sysfs_root=DEFAULT_SYSFS_ROOT, text=None):
    """Work out the new config text for ``settings`` without writing anything.

    :raises KubeletConfigError: the file is unreadable, or the config after the change is one
        the kubelet would reject (``errors`` holds one line per field).
    """
    if not HAS_YAML:
        raise KubeletConfigError("PyYAML is required to edit %s" % path)
    if text is None:
        text = read_config_text(path)
    document = KubeletConfigDocument(text, path)
    topology = NodeTopology(sysfs_root)
    before = document.as_dict()
    if not isinstance(before, dict):
        raise KubeletConfigError("%s must hold a KubeletConfiguration mapping" % path)

    desired, errors = _desired_values(settings, document, topology)
    changed_keys = []
    for key_path, value in desired:
        if value is REMOVE:
            changed = document.remove(key_path)
        else:
            changed = document.set(key_path, value)
        if changed:
            changed_keys.append(".".join(key_path))

    after = document.as_dict()
    errors.extend(validate_config(after, topology))
    if errors:
        raise KubeletConfigError(
            "%s would not be a config the kubelet accepts: %s" % (path, "; ".join(errors)),
            errors)

    cpu_reset = (before.get("cpuManagerPolicy", DEFAULT_CPU_MANAGER_POLICY)
                 != after.get("cpuManagerPolicy", DEFAULT_CPU_MANAGER_POLICY))
    memory_reset = (before.get("memoryManagerPolicy", DEFAULT_MEMORY_MANAGER_POLICY)
                    != after.get("memoryManagerPolicy", DEFAULT_MEMORY_MANAGER_POLICY))
    after_text = document.render() if changed_keys else text
    return KubeletConfigPlan(path, text, after_text, changed_keys, cpu_reset, memory_reset,
                             after.get("reservedSystemCPUs"))


# --------------------------------------------------------------------------------------------
# Writing


def backup_path_for(path, now=None):
    """Backup name in Ansible's style: ``<path>.<pid>.<YYYY-mm-dd@HH:MM:SS>~``."""
    stamp = time.strftime("%Y-%m-%d@%H:%M:%S", time.localtime(now))
    return "%s.%d.%s~" % (path, os.getpid(), stamp)


def _fsync_directory(directory):
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_file_atomic(path, text, backup=True):
    """Replace ``path`` with ``text`` atomically, keeping its mode and owner.

    The new content goes to a temporary file in the same directory, is fsynced, and is renamed
    over ``path`` with ``os.replace``; a failure at any step removes the temporary file and
    leaves ``path`` as it was. With ``backup`` the old content is first copied to
    ``backup_path_for(path)``.

    :returns: the backup file's path, or None.
    """
    directory = os.path.dirname(os.path.abspath(path))
    current = os.stat(path)
    backup_file = None
    if backup:
        backup_file = backup_path_for(path)
        shutil.copy2(path, backup_file)
        with open(backup_file, "rb") as handle:
            os.fsync(handle.fileno())

    fd, tmp_path = tempfile.mkstemp(prefix=".%s." % os.path.basename(path), suffix=".tmp",
                                    dir=directory)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(text.encode("utf-8"))
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp_path, stat.S_IMODE(current.st_mode))
        tmp_stat = os.stat(tmp_path)
        if (tmp_stat.st_uid, tmp_stat.st_gid) != (current.st_uid, current.st_gid):
            os.chown(tmp_path, current.st_uid, current.st_gid)
        os.replace(tmp_path, path)
    except BaseException:
        try:
            os.unlink(tmp_path)
        except OSError:
            pass
        raise
    _fsync_directory(directory)
    return backup_file
