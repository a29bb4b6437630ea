# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""NVIDIA mig-parted config files (``version: v1``, ``mig-configs:``): read, check, resolve.

The format (mig-parted api/spec/v1): each named config is a list of entries with
``devices`` (``all`` or a list of GPU indices), ``mig-enabled``, ``mig-devices``
({profile: count}, required when enabled, empty when not) and an optional
``device-filter`` (a PCI id ``0x<device><vendor>`` or a list of them). An entry applies to
GPU i when the filter matches the GPU's PCI id and the index is selected. ``devices: all``
skips GPUs without MIG; naming such a GPU by index is an error. GPUs no entry selects are
left as they are by mig-parted.

Parsing is structural only, so files that mention GPUs gpuprov does not know (NVIDIA's own
config-default.yaml names several) load fine; profiles are checked against the catalog only
for the GPUs of the node the config is resolved for.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

from ansible_collections.gpuprov.gpu.plugins.plugin_utils import catalog, safe_files

ENTRY_KEYS = {"devices", "device-filter", "mig-enabled", "mig-devices"}
# Bounds, checked before anything is built from a count. No MIG-capable GPU has more than 7
# GPU instances (7 compute slices on A100/H100/H200/B200; NVIDIA MIG user guide, "Supported
# MIG Profiles"); a node has at most intent.MAX_GPUS_PER_NODE (64) GPUs, so no entry needs
# more indices or filters than that.
MAX_INSTANCES_PER_GPU = 7
MAX_GPU_INDEX = 63
MAX_ENTRIES = 64
MAX_CONFIGS = 1000
MAX_NAME_LENGTH = 128


class MigPartedError(ValueError):
    """A problem in a mig-parted file; ``field`` is the path inside the file."""

    def __init__(self, field, reason):
        self.field = field
        self.reason = reason
        super(MigPartedError, self).__init__("%s: %s" % (field, reason))


class GpuMigRequest:
    """What one named config asks of one GPU."""

    __slots__ = ("enabled", "counts", "entry", "field")

    def __init__(self, enabled, counts, entry, field):
        self.enabled = enabled
        self.counts = counts
        self.entry = entry  # index of the entry that selected the GPU, for messages
        self.field = field  # where the entry lives, for messages


def load_file(path):
    """Read and structurally check a mig-parted file. Returns {config name: [entries]}."""
    if not os.path.exists(path):
        raise MigPartedError(path, "file not found")
    try:
        data = safe_files.load(path, kind="yaml")
    except safe_files.FileInputError as exc:
        raise MigPartedError(path, exc.reason)
    return parse(data, path)


def parse(data, source="mig-parted config"):
    if not isinstance(data, dict):
        raise MigPartedError(source, "expected a mapping with `version: v1` and `mig-configs:`")
    version = data.get("version")
    if version != "v1":
        raise MigPartedError("%s: version" % source, "unknown version %r; mig-parted files use `version: v1`" % (version,))
    configs = data.get("mig-configs")
    if not isinstance(configs, dict) or not configs:
        raise MigPartedError("%s: mig-configs" % source, "must be a non-empty mapping of config names to entry lists")
    if len(configs) > MAX_CONFIGS:
        raise MigPartedError("%s: mig-configs" % source, "%d configs; the limit is %d" % (len(configs), MAX_CONFIGS))
    result = {}
    for name, entries in configs.items():
        if not isinstance(name, (str, int)) or isinstance(name, bool) or len(str(name)) > MAX_NAME_LENGTH:
            raise MigPartedError("%s: mig-configs" % source, "config names are strings of at most %d characters"
                                 % MAX_NAME_LENGTH)
        field = "%s: mig-configs.%s" % (source, name)
        result[str(name)] = parse_entries(entries, field)
    return result


def parse_entries(entries, field):
    """Check a list of mig-parted entries; returns normalised dicts."""
    if not isinstance(entries, list) or not entries:
        raise MigPartedError(field, "must be a non-empty list of entries")
    if len(entries) > MAX_ENTRIES:
        raise MigPartedError(field, "%d entries; the limit is %d" % (len(entries), MAX_ENTRIES))
    parsed = []
    for i, entry in enumerate(entries):
        efield = "%s[%d]" % (field, i)
        if not isinstance(entry, dict):
            raise MigPartedError(efield, "each entry must be a mapping with devices and mig-enabled")
        unknown = sorted(set(entry) - ENTRY_KEYS)
        if unknown:
            raise MigPartedError(efield, "unknown key(s) %s; allowed: %s" % (", ".join(unknown), ", ".join(sorted(ENTRY_KEYS))))
        devices = entry.get("devices")
        if devices is None:
            raise MigPartedError(efield + ".devices", "required: `all` or a list of GPU indices")
        if devices != "all":
            if isinstance(devices, list) and len(devices) > MAX_GPU_INDEX + 1:
                raise MigPartedError(efield + ".devices", "%d GPU indices; a node has at most %d GPUs"
                                     % (len(devices), MAX_GPU_INDEX + 1))
            if not isinstance(devices, list) or not devices or not all(
                    isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in devices):
                raise MigPartedError(efield + ".devices", "must be `all` or a non-empty list of GPU indices, got %s" % _short(devices))
            if max(devices) > MAX_GPU_INDEX:
                raise MigPartedError(efield + ".devices", "GPU index %d; a node has at most %d GPUs (indices 0-%d)"
                                     % (max(devices), MAX_GPU_INDEX + 1, MAX_GPU_INDEX))
        if "mig-enabled" not in entry or not isinstance(entry["mig-enabled"], bool):
            raise MigPartedError(efield + ".mig-enabled", "required: true or false")
        enabled = entry["mig-enabled"]
        mig_devices = entry.get("mig-devices")
        if mig_devices is None:
            if enabled:
                raise MigPartedError(efield + ".mig-devices", "required when mig-enabled is true (use {} for none)")
            mig_devices = {}
        if not isinstance(mig_devices, dict):
            raise MigPartedError(efield + ".mig-devices", "must map profile names to counts")
        if len(mig_devices) > MAX_INSTANCES_PER_GPU * 4:
            raise MigPartedError(efield + ".mig-devices", "%d profiles; a GPU has at most %d instances"
                                 % (len(mig_devices), MAX_INSTANCES_PER_GPU))
        if not enabled and mig_devices:
            raise MigPartedError(efield + ".mig-devices", "must be empty when mig-enabled is false")
        counts = {}
        for profile, count in mig_devices.items():
            pfield = "%s.mig-devices.%s" % (efield, str(profile)[:MAX_NAME_LENGTH])
            if not isinstance(count, int) or isinstance(count, bool) or count < 0:
                raise MigPartedError(pfield, "count must be a non-negative integer, got %s" % _short(count))
            if count > MAX_INSTANCES_PER_GPU:
                raise MigPartedError(pfield, "%d instances; a GPU has at most %d" % (count, MAX_INSTANCES_PER_GPU))
            if count:
                counts[str(profile)] = count
        filters = entry.get("device-filter")
        if filters is not None:
            filters = [filters] if isinstance(filters, str) else filters
            if not isinstance(filters, list) or not filters or len(filters) > MAX_ENTRIES or not all(
                    isinstance(f, str) and len(f) <= MAX_NAME_LENGTH for f in filters):
                raise MigPartedError(efield + ".device-filter", "must be a PCI id string like 0x20B210DE or a list of them")
            for f in filters:
                try:
                    catalog.lookup_pci_filter(f)
                except ValueError as exc:
                    raise MigPartedError(efield + ".device-filter", str(exc))
        parsed.append({"devices": devices, "device-filter": filters, "mig-enabled": enabled, "mig-devices": counts})
    return parsed


def _short(value, limit=60):
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "...(%d characters)" % len(text)


def _filter_matches(filters, model):
    if filters is None:
        return True
    return any(catalog.lookup_pci_filter(f) is model for f in filters)


def resolve(entries, models, field):
    """Apply entries to a node's GPUs (``models``: catalog models by GPU index).

    Returns (requests, problems): requests[i] is a GpuMigRequest or None (no entry selects
    GPU i); problems is a list of (field, reason).
    """
    requests = [None] * len(models)
    problems = []
    for e_index, entry in enumerate(entries):
        efield = "%s[%d]" % (field, e_index)
        devices = entry["devices"]
        if devices == "all":
            selected = [i for i, m in enumerate(models) if _filter_matches(entry["device-filter"], m)]
            if entry["mig-enabled"]:
                selected = [i for i in selected if models[i].mig_capable]
        else:
            selected = []
            for idx in devices:
                if idx >= len(models):
                    problems.append((efield + ".devices", "GPU index %d is beyond the node's %d GPU(s)" % (idx, len(models))))
                    continue
                if not _filter_matches(entry["device-filter"], models[idx]):
                    continue
                if entry["mig-enabled"] and not models[idx].mig_capable:
                    problems.append((efield + ".devices", "GPU %d is a %s, which has no MIG" % (idx, models[idx].key)))
                    continue
                selected.append(idx)
        for idx in selected:
            if requests[idx] is not None:
                problems.append((efield + ".devices", "GPU %d is already selected by entry %d; each GPU may match one entry"
                                 % (idx, requests[idx].entry)))
                continue
            requests[idx] = GpuMigRequest(entry["mig-enabled"], dict(entry["mig-devices"]), e_index,
                                          efield + ".mig-devices")
    return requests, problems


def builtin_entries(name, models):
    """Entries for a built-in config name, or None when the name is not built in.

    all-disabled, all-enabled, all-balanced, and all-<profile> for every profile of the
    node's models (as many as fit: the profile's max count), with `+me` profiles also
    spelt `.me` as in NVIDIA's files.
    """
    if name == "all-disabled":
        return [{"devices": "all", "device-filter": None, "mig-enabled": False, "mig-devices": {}}]
    if name == "all-enabled":
        return [{"devices": "all", "device-filter": None, "mig-enabled": True, "mig-devices": {}}]
    entries = []
    seen = set()
    for model in models:
        if not model.mig_capable or model.key in seen:
            continue
        seen.add(model.key)
        filters = model.mig_parted_filters
        if name == "all-balanced":
            counts = dict(model.mig.balanced)
        elif name.startswith("all-"):
            profile = name[4:]
            if profile.endswith(".me"):
                profile = profile[:-3] + "+me"
            spec = model.mig.profiles.get(profile)
            if spec is None:
                continue
            counts = {profile: spec.max_count}
        else:
            return None
        entries.append({"devices": "all", "device-filter": filters, "mig-enabled": True, "mig-devices": counts})
    if not entries:
        return None
    return entries


def builtin_names(models):
    names = ["all-disabled", "all-enabled"]
    if any(m.mig_capable for m in models):
        names.append("all-balanced")
    for model in models:
        if model.mig_capable:
            for profile in model.mig.profiles:
                name = "all-" + profile
                if name not in names:
                    names.append(name)
    return names
