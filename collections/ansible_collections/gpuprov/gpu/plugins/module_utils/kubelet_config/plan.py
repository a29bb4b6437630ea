# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)

"""Planning a change to one kubelet config file: the desired values, the new text, and
whether the CPU or memory manager state file must be reset."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno

from ansible_collections.gpuprov.gpu.plugins.module_utils.cpuset import (
    CpusetError,
    DEFAULT_SYSFS_ROOT,
    SysfsError,
    auto_reserved_cpus,
    format_cpuset,
    parse_cpuset,
)
from ansible_collections.gpuprov.gpu.plugins.module_utils.kubelet_config.document import HAS_YAML, KubeletConfigDocument
from ansible_collections.gpuprov.gpu.plugins.module_utils.kubelet_config.errors import KubeletConfigError
from ansible_collections.gpuprov.gpu.plugins.module_utils.kubelet_config.fields import AUTO, DEFAULT_CPU_MANAGER_POLICY, DEFAULT_MEMORY_MANAGER_POLICY
from ansible_collections.gpuprov.gpu.plugins.module_utils.kubelet_config.settings import normalise_option_map, reserved_memory_entries, settings_error
from ansible_collections.gpuprov.gpu.plugins.module_utils.kubelet_config.validation import NodeTopology, validate_config


# Sentinel: the managed key is to be removed from the file.
REMOVE = object()


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
        return lambda: normalise_option_map(value, field) or REMOVE

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
             lambda: reserved_memory_entries(settings.reserved_memory) or REMOVE)
    return desired, errors


def _desired_reserved_cpus(requested, document, topology):
    requested = str(requested).strip()
    if requested == "":
        return REMOVE
    if requested == AUTO:
        try:
            cpus = auto_reserved_cpus(topology.cpus)
        except (CpusetError, SysfsError) as exc:
            raise settings_error("reservedSystemCPUs: auto: %s" % exc)
    else:
        try:
            cpus = parse_cpuset(requested)
        except CpusetError as exc:
            raise settings_error("reservedSystemCPUs: %s" % exc)
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
