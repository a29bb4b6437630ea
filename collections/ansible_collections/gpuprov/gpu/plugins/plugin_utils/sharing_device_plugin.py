# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The NVIDIA device plugin as a sharing provider: exclusive, time-slicing, MPS, MIG.

Owns ``time_slicing_replicas`` (with MIG: an integer for every device, or a mapping from MIG
profile, or ``gpu`` for GPUs without MIG, to replicas) and ``device_plugin``
(``rename_by_default``, ``fail_requests_greater_than_one``: the plugin's
``renameByDefault`` / ``failRequestsGreaterThanOne``, NVIDIA/k8s-device-plugin v0.20.0 api/config/v1/replicas.go).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpuprov.gpu.plugins.plugin_utils import device_plugin, device_plugin_schema
from ansible_collections.gpuprov.gpu.plugins.plugin_utils import sharing_base as sharing

MAX_REPLICAS = sharing.MAX_REPLICAS

GPU_RESOURCE = device_plugin.GPU_RESOURCE
OPTION_KEYS = {"rename_by_default": "renameByDefault", "fail_requests_greater_than_one": "failRequestsGreaterThanOne"}
# The plugin's defaults as gpuprov writes them: no rename; multi-slot requests fail (NVIDIA's
# recommendation; a pod asking for 2 slots could otherwise get 2 slices of one GPU).
DEFAULT_OPTIONS = {"rename_by_default": False, "fail_requests_greater_than_one": True}
# The mapping key for GPUs that have no MIG instances.
WHOLE_GPU_KEY = "gpu"
SHARED_SUFFIX = ".shared"  # renameByDefault advertises <name>.shared


def _is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


class DevicePluginProvider(sharing.SharingProvider):
    name = "device-plugin"
    strategies = ("exclusive", "time-slicing", "mps", "mig")
    keys = ("time_slicing_replicas", "device_plugin")

    # -- validation ------------------------------------------------------------------------
    def parse(self, sharing_vars, strategy, models, out):
        options = {"time_slicing_replicas": self._parse_ts(sharing_vars, strategy, out),
                   "device_plugin": self._parse_options(sharing_vars.get("device_plugin"), strategy, out)}
        return options

    @staticmethod
    def _parse_ts(sharing_vars, strategy, out):
        field = "gpuprov_sharing.time_slicing_replicas"
        value = sharing_vars.get("time_slicing_replicas")
        if value is None:
            return None
        if strategy != "mig":
            out.add(field, "only used with strategy mig; use replicas with time-slicing")
            return None
        if _is_int(value):
            if value < 2:
                out.add(field, "must be an integer >= 2, got %r" % (value,))
                return None
            if value > MAX_REPLICAS:
                out.add(field, "%d replicas; the limit is %d per device" % (value, MAX_REPLICAS))
                return None
            return value
        if not isinstance(value, dict) or not value:
            out.add(field, "must be an integer >= 2 (every MIG device and whole GPU) or a mapping from MIG "
                           "profile (or %s for GPUs without MIG) to replicas, e.g. {\"1g.10gb\": 4}, got %r"
                           % (WHOLE_GPU_KEY, value))
            return None
        result, bad = {}, False
        for key, replicas in sorted(value.items(), key=lambda item: str(item[0])):
            if not isinstance(key, str) or not key:
                out.add(field, "keys must be MIG profile names or %s, got %r" % (WHOLE_GPU_KEY, key))
                bad = True
            elif not _is_int(replicas) or replicas < 1:
                out.add("%s.%s" % (field, key), "must be an integer >= 2 (1 leaves the device whole), got %r"
                        % (replicas,))
                bad = True
            elif replicas > MAX_REPLICAS:
                out.add("%s.%s" % (field, key), "%d replicas; the limit is %d per device" % (replicas, MAX_REPLICAS))
                bad = True
            elif replicas == 1:
                continue  # the device stays whole, as if not named
            else:
                result[key] = replicas
        if not result and not bad:
            out.add(field, "no device is time-sliced (every value is 1); remove time_slicing_replicas")
        return result or None

    @staticmethod
    def _parse_options(value, strategy, out):
        field = "gpuprov_sharing.device_plugin"
        if value is None:
            return dict(DEFAULT_OPTIONS)
        if not isinstance(value, dict):
            out.add(field, "must be a mapping: {rename_by_default: BOOL, fail_requests_greater_than_one: BOOL}")
            return dict(DEFAULT_OPTIONS)
        unknown = sorted(set(map(str, value)) - set(OPTION_KEYS))
        if unknown:
            out.add(field, "unknown key(s) %s; allowed: %s" % (", ".join(unknown), ", ".join(sorted(OPTION_KEYS))))
        result = dict(DEFAULT_OPTIONS)
        for key in OPTION_KEYS:
            if key in value:
                if not isinstance(value[key], bool):
                    out.add("%s.%s" % (field, key), "must be true or false, got %r" % (value[key],))
                else:
                    result[key] = value[key]
        if strategy == "exclusive":
            out.add(field, "only used when GPUs are shared (time-slicing, mps, mig with time_slicing_replicas)")
        return result

    # -- planning --------------------------------------------------------------------------
    @staticmethod
    def _devices(intent, gpus):
        """[(base resource, profile or None, memory MiB, replicas)] for every advertised device."""
        ts = intent.time_slicing_replicas
        if intent.strategy == "time-slicing":
            whole_replicas = intent.replicas
        elif intent.strategy == "mps" and intent.mps and intent.mps["provider"] == "device-plugin":
            whole_replicas = intent.replicas
        elif intent.strategy == "mig" and _is_int(ts):
            whole_replicas = ts
        elif intent.strategy == "mig" and ts:
            whole_replicas = ts.get(WHOLE_GPU_KEY, 1)
        else:
            whole_replicas = 1
        devices = []
        for gpu in gpus:
            mig = gpu["mig"]
            model = intent.models[gpu["index"]]
            if mig and mig["enabled"]:
                for inst in mig["instances"]:
                    profile = inst["profile"]
                    if _is_int(ts):
                        replicas = ts
                    else:
                        replicas = (ts or {}).get(profile, 1)
                    name = GPU_RESOURCE if intent.mig_strategy == "single" else "nvidia.com/mig-" + profile.replace("+", ".")
                    devices.append((name, profile, int(model.profile(profile).memory_gib * 1024), replicas))
            else:
                devices.append((GPU_RESOURCE, None, gpu["memory_mib"], whole_replicas))
        return devices

    def plan(self, intent, gpus):
        problems = []
        options = (intent.options or {}).get("device_plugin") or dict(DEFAULT_OPTIONS)
        ts = intent.time_slicing_replicas
        devices = self._devices(intent, gpus)
        field = "gpuprov_sharing.time_slicing_replicas"
        if intent.strategy == "mig" and isinstance(ts, dict):
            if intent.mig_strategy == "single":
                problems.append((field, "with mig strategy single every MIG device is %s; give an integer"
                                 % GPU_RESOURCE))
            profiles = set(d[1] for d in devices if d[1] is not None)
            for key in sorted(ts):
                if key == WHOLE_GPU_KEY:
                    if not any(d[1] is None for d in devices):
                        problems.append(("%s.%s" % (field, key), "every GPU of this node has MIG instances; "
                                         "no whole GPU to time-slice"))
                elif key not in profiles:
                    problems.append(("%s.%s" % (field, key), "no GPU of this node has a %s instance; the layout has %s"
                                     % (key, ", ".join(sorted(profiles)) or "no MIG instances")))
        if problems:
            return None, problems

        # Advertised resources (renameByDefault adds .shared to each shared one).
        shared = {}
        for name, _profile, _memory, replicas in devices:
            if replicas > 1:
                if shared.setdefault(name, replicas) != replicas:  # cannot happen: one profile, one value
                    raise AssertionError("resource %s with two replica counts" % name)
        resources = {}
        for name, _profile, _memory, replicas in devices:
            advertised = name + SHARED_SUFFIX if (name in shared and options["rename_by_default"]) else name
            resources[advertised] = resources.get(advertised, 0) + replicas
        if intent.strategy == "mig" and ts and not shared:
            # The plugin refuses a time-slicing config with an empty resource list.
            return None, [(field, "the MIG layout advertises no device to time-slice (no GPU has MIG instances); "
                                  "remove time_slicing_replicas or give the GPUs MIG instances")]

        slots = {}
        for name, _profile, memory, replicas in devices:
            if replicas > 1:
                key = (name, replicas, memory)
                slots[key] = slots.get(key, 0) + 1
        slot_list = [sharing.slot(name + (SHARED_SUFFIX if options["rename_by_default"] else ""), r, m, n)
                     for (name, r, m), n in sorted(slots.items())]

        replicas_arg = intent.time_slicing_replicas if intent.strategy == "mig" else intent.replicas
        mig_resources = sorted(shared) if intent.strategy == "mig" and intent.mig_strategy == "mixed" else ()
        if intent.strategy == "mig" and intent.mig_strategy == "mixed" and isinstance(replicas_arg, dict):
            replicas_arg = dict((name, shared[name]) for name in mig_resources)
        config_name, config = device_plugin.render(
            intent.strategy, replicas_arg, intent.mig_strategy, mig_resources,
            intent.mps["provider"] if intent.mps else None, options=options)
        config_problems = device_plugin_schema.problems(config)
        if config_problems:
            return None, [("gpuprov_sharing", "the device plugin would reject config %s: %s"
                           % (config_name, "; ".join(config_problems)))]
        return {
            "resources": dict(sorted(resources.items())),
            "slots": slot_list,
            "device_plugin": {"config_name": config_name, "config": config, "options": dict(options)},
            "labels": {device_plugin.CONFIG_LABEL: config_name},
        }, []

    def warnings(self, intent, plan):
        warnings = sharing.slot_warnings(plan["slots"])
        options = plan["device_plugin"]["options"]
        shared = sorted(set(s["resource"] for s in plan["slots"]))
        if shared and options["fail_requests_greater_than_one"]:
            warnings.append("the plugin rejects a pod asking for more than one %s (failRequestsGreaterThanOne): "
                            "multi-GPU pods need whole GPUs on another node, or set "
                            "gpuprov_sharing.device_plugin.fail_requests_greater_than_one: false" % " or ".join(shared))
        elif shared:
            warnings.append("fail_requests_greater_than_one is false: a pod asking for 2 of %s may get two slots "
                            "of the same device and see one GPU" % " or ".join(shared))
        if shared and options["rename_by_default"]:
            warnings.append("rename_by_default: pods must request %s (the plugin renames shared resources)"
                            % ", ".join(shared))
        return warnings
