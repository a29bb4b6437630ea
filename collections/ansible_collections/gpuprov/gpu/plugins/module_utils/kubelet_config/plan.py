# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)

"""Planning a change to one kubelet config file: the desired values, the new text, and
whether the CPU or memory manager state file must be reset."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

from ansible_collections.gpuprov.gpu.plugins.module_utils.cpuset import (
    CpusetError,
    DEFAULT_SYSFS_ROOT,
    MAX_CPU_ID,
    SysfsError,
    auto_reserved_cpus,
    format_cpuset,
)
from ansible_collections.gpuprov.gpu.plugins.module_utils.kubelet_config.checkpoints import (
    cpu_manager_reset_reasons,
    memory_manager_reset_reasons,
)
from ansible_collections.gpuprov.gpu.plugins.module_utils.kubelet_config.configz import expected_configz
from ansible_collections.gpuprov.gpu.plugins.module_utils.kubelet_config.document import (
    HAS_YAML,
    KUBELET_CONFIG_API_VERSION,
    KUBELET_CONFIG_KIND,
    KubeletConfigDocument,
)
from ansible_collections.gpuprov.gpu.plugins.module_utils.kubelet_config.grammar import kubelet_cpuset
from ansible_collections.gpuprov.gpu.plugins.module_utils.kubelet_config.layers import (
    DROP_IN_NAME,
    EMPTY_DROP_IN,
    drop_in_paths,
    effective_config,
    merged_before,
    read_regular_text,
    sets_key,
)
from ansible_collections.gpuprov.gpu.plugins.module_utils.kubelet_config.errors import KubeletConfigError
from ansible_collections.gpuprov.gpu.plugins.module_utils.kubelet_config.fields import AUTO
from ansible_collections.gpuprov.gpu.plugins.module_utils.kubelet_config.settings import normalise_option_map, reserved_memory_entries, settings_error
from ansible_collections.gpuprov.gpu.plugins.module_utils.kubelet_config.validation import NodeTopology, validate_config
from ansible_collections.gpuprov.gpu.plugins.module_utils.kubelet_config.versions import config_dir_error, version_errors


# Sentinel: the managed key is to be removed from the file.
REMOVE = object()


class KubeletConfigPlan(object):
    """What applying a set of settings does to the file gpuprov writes (the main config, or
    its drop-in in ``--config-dir``)."""

    def __init__(self, path, before, after, changed_keys, cpu_reasons, memory_reasons,
                 reserved_system_cpus, created=False, managed=None, configz=None):
        self.path = path
        self.before = before
        self.after = after
        self.changed_keys = changed_keys
        self.cpu_manager_state_reset_reasons = cpu_reasons
        self.memory_manager_state_reset_reasons = memory_reasons
        self.reserved_system_cpus = reserved_system_cpus
        self.created = created
        # Managed key path -> value in the effective config after the change (None: unset).
        self.managed = managed or {}
        # Managed key path -> what the kubelet's /configz will show for it (configz.py).
        self.configz = configz or {}

    @property
    def cpu_manager_state_reset_required(self):
        return bool(self.cpu_manager_state_reset_reasons)

    @property
    def memory_manager_state_reset_required(self):
        return bool(self.memory_manager_state_reset_reasons)

    @property
    def changed(self):
        return bool(self.changed_keys)

    def kubeadm_patch(self):
        """The managed keys as a KubeletConfiguration merge patch (RFC 7386: null removes a
        key), in the form kubeadm's ``--patches`` directory takes for the
        ``kubeletconfiguration`` target (kubeadm 1.25 and newer)."""
        patch = {"apiVersion": KUBELET_CONFIG_API_VERSION, "kind": KUBELET_CONFIG_KIND}
        for dotted in sorted(self.managed):
            node = patch
            keys = dotted.split(".")
            for key in keys[:-1]:
                node = node.setdefault(key, {})
            node[keys[-1]] = self.managed[dotted]
        return patch


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
    requested = str(requested)
    if requested == "":
        return REMOVE
    if requested == AUTO:
        try:
            cpus = auto_reserved_cpus(topology.cpus)
        except (CpusetError, SysfsError) as exc:
            raise settings_error("reservedSystemCPUs: auto: %s" % exc)
    else:
        try:
            cpus = kubelet_cpuset(requested, MAX_CPU_ID, repeats=False)
        except ValueError as exc:
            raise settings_error("reservedSystemCPUs: %s" % exc)
    # Keep the file's spelling when it already names the same CPUs ("0,1" vs "0-1").
    current = document.get(("reservedSystemCPUs",))
    if isinstance(current, str):
        try:
            if kubelet_cpuset(current) == cpus:
                return current
        except ValueError:
            pass
    return format_cpuset(cpus)


def _value_at(config, key_path):
    for key in key_path:
        config = config.get(key) if isinstance(config, dict) else None
    return config


def _load(path, text=None, what="kubelet config"):
    document = KubeletConfigDocument(read_regular_text(path, what) if text is None else text,
                                     path)
    document.require_kubelet_configuration()
    return document


def _effective(main, drop_ins):
    return effective_config(main, [layer for _path, layer in drop_ins])


def plan_change(path, settings, sysfs_root=DEFAULT_SYSFS_ROOT, text=None, config_dir=None,
                drop_in=None, kubelet_version=None):
    """Work out the new config text for ``settings`` without writing anything.

    :arg path: the kubelet's main config (``--config``).
    :arg config_dir: the kubelet's ``--config-dir``, if it has one. Its drop-ins are merged
        over the main file to get the config the kubelet really runs with.
    :arg drop_in: write the managed keys into ``<config_dir>/50-gpuprov.conf`` (the default
        when ``config_dir`` is given) instead of editing ``path``, which is then only read.
    :arg kubelet_version: ``(1, minor)``; options this release refuses are errors.
    :raises KubeletConfigError: a file is unreadable or not a KubeletConfiguration, a later
        layer overrides a managed key, or the effective config after the change is one the
        kubelet would reject (``errors`` holds one line per field).
    """
    if not HAS_YAML:
        raise KubeletConfigError("PyYAML is required to edit %s" % path)
    if drop_in is None:
        drop_in = config_dir is not None
    if drop_in and config_dir is None:
        raise KubeletConfigError("drop_in needs config_dir, the kubelet's --config-dir")
    main_document = _load(path, text)

    target_path = path
    target = main_document
    created = False
    layers = []  # (path, dict) of the drop-ins, in the kubelet's order
    if config_dir is not None:
        if drop_in and kubelet_version is not None:
            refusal = config_dir_error(kubelet_version)
            if refusal:
                raise KubeletConfigError(refusal, [refusal])
        target_path = os.path.join(config_dir, DROP_IN_NAME)
        for layer_path in drop_in_paths(config_dir):
            if drop_in and layer_path == target_path:
                continue
            layers.append((layer_path, _load(layer_path, what="kubelet drop-in").as_dict()))
        if drop_in:
            if os.path.lexists(target_path):
                target = _load(target_path, what="kubelet drop-in")
            else:
                target = KubeletConfigDocument(EMPTY_DROP_IN, target_path)
                created = True
        else:
            target_path = path

    def effective(target_dict):
        if target is main_document:
            return _effective(target_dict, layers)
        before_ours = [(p, c) for p, c in layers if merged_before(p, config_dir)]
        after_ours = [(p, c) for p, c in layers if not merged_before(p, config_dir)]
        return _effective(main_document.as_dict(),
                          before_ours + [(target_path, target_dict)] + after_ours)

    topology = NodeTopology(sysfs_root)
    original_text = target.original_text
    before = effective(target.as_dict())

    desired, errors = _desired_values(settings, target, topology)
    changed_keys = []
    for key_path, value in desired:
        if value is REMOVE:
            changed = target.remove(key_path)
        else:
            changed = target.set(key_path, value)
        if changed:
            changed_keys.append(".".join(key_path))
    after = effective(target.as_dict())

    # A layer the kubelet reads after the file written here would win over it.
    for layer_path, layer in layers:
        if target is not main_document and merged_before(layer_path, config_dir):
            continue
        for key_path, value in desired:
            if sets_key(layer, key_path) and (value is REMOVE
                                              or _value_at(layer, key_path) != value):
                errors.append(
                    "%s: %s sets %s, which overrides the value gpuprov manages in %s (the "
                    "kubelet merges drop-ins over the main config, in name order); remove it "
                    "there" % (".".join(key_path), layer_path, ".".join(key_path), target_path))

    errors.extend(validate_config(after, topology))
    if kubelet_version is not None:
        errors.extend(version_errors(after, kubelet_version))
    if errors:
        raise KubeletConfigError(
            "%s would not be a config the kubelet accepts: %s" % (
                target_path, "; ".join(errors)), errors)

    managed = {}
    for key_path, _value in desired:
        managed[".".join(key_path)] = _value_at(after, key_path)
    if created and changed_keys:
        after_text = target.render()
    else:
        after_text = target.render() if changed_keys else original_text
    return KubeletConfigPlan(target_path, "" if created else original_text, after_text,
                             changed_keys, cpu_manager_reset_reasons(before, after),
                             memory_manager_reset_reasons(before, after),
                             after.get("reservedSystemCPUs"), created=created,
                             managed=managed,
                             configz=expected_configz(after, sorted(managed),
                                                      merged_drop_ins=config_dir is not None))
