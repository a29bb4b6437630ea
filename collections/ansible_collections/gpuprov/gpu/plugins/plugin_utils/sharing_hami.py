# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""HAMi (Project-HAMi/HAMi v2.10.0) as a sharing provider: fractional vGPU by HAMi-core.

``gpuprov_sharing: {strategy: hami, hami: {split_count, memory_scaling, core_scaling}}``; the
names follow HAMi's ``deviceSplitCount``, ``deviceMemoryScaling`` and ``deviceCoreScaling``
(Project-HAMi/HAMi v2.10.0 docs/config.md and charts/hami/values.yaml). The node advertises ``nvidia.com/gpu`` = GPUs x
split_count; pods ask for ``nvidia.com/gpu`` (physical GPUs, one slot on each) plus
``nvidia.com/gpumem`` (MiB per GPU) and ``nvidia.com/gpucores`` (percent), which HAMi's
scheduler checks against its node annotation - they are not node resources.

What HAMi cannot do on the same GPUs is refused here: MIG instances (hami-core shares whole
GPUs; HAMi's own dynamic-MIG mode would destroy instances gpuprov made, section 9) and a host
MPS daemon (HAMi replaces the device plugin that would serve it; untested together, section 10).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpuprov.gpu.plugins.module_utils.decimal_text import finite_number
from ansible_collections.gpuprov.gpu.plugins.plugin_utils import sharing_base as sharing

KEYS = {"split_count", "memory_scaling", "core_scaling"}
DEFAULTS = {"split_count": 10, "memory_scaling": 1, "core_scaling": 1}  # HAMi chart values.yaml v2.10.0
MAX_SPLIT_COUNT = 100  # gpucores is a percentage: more than 100 tasks per GPU cannot each get 1 %
MAX_SCALING = 10  # a typo guard; HAMi itself takes any positive float
# HAMi advertises memory in MiB and cores in whole percent (values.yaml v2.10.0): a scaling
# below 1 % leaves nothing to advertise. Finite, and no subnormal 5e-324 either.
MIN_SCALING = 0.01
NODE_LABEL = {"gpu": "on"}  # devicePlugin.nvidiaNodeSelector in the chart's values.yaml
OPERATING_MODE = "hami-core"
RESOURCES = {"count": "nvidia.com/gpu", "memory_mib": "nvidia.com/gpumem", "memory_percent": "nvidia.com/gpumem-percentage",
             "cores_percent": "nvidia.com/gpucores"}


class HamiProvider(sharing.SharingProvider):
    name = "hami"
    strategies = ("hami",)
    keys = ("hami",)

    def parse(self, sharing_vars, strategy, models, out):
        if strategy != "hami":
            return {}
        if "mig" in sharing_vars:
            out.add("gpuprov_sharing.mig",
                    "HAMi shares whole GPUs (hami-core) and cannot share MIG devices on the same GPUs; "
                    "gpuprov plans MIG off on a HAMi node: remove mig, or use strategy mig on this node")
        if "mps" in sharing_vars:
            out.add("gpuprov_sharing.mps", "HAMi replaces the NVIDIA device plugin and cannot run beside a host MPS "
                                           "daemon on the same GPUs; remove mps, or use strategy mps on this node")
        if "replicas" in sharing_vars:
            out.add("gpuprov_sharing.replicas", "HAMi advertises hami.split_count slots per GPU; use that instead")
        value = sharing_vars.get("hami")
        if value is None:
            value = {}
        if not isinstance(value, dict):
            out.add("gpuprov_sharing.hami", "must be a mapping: {split_count, memory_scaling, core_scaling}")
            return {"hami": dict(DEFAULTS)}
        unknown = sorted(set(map(str, value)) - KEYS)
        if unknown:
            out.add("gpuprov_sharing.hami", "unknown key(s) %s; allowed: %s" % (", ".join(unknown), ", ".join(sorted(KEYS))))
        result = dict(DEFAULTS)
        split = value.get("split_count", DEFAULTS["split_count"])
        if not isinstance(split, int) or isinstance(split, bool) or not 1 <= split <= MAX_SPLIT_COUNT:
            out.add("gpuprov_sharing.hami.split_count", "must be an integer from 1 to %d (HAMi's deviceSplitCount: "
                                                        "tasks per GPU), got %r" % (MAX_SPLIT_COUNT, split))
        else:
            result["split_count"] = split
        for key in ("memory_scaling", "core_scaling"):
            scaling = value.get(key, DEFAULTS[key])
            try:
                finite_number(scaling, MIN_SCALING, MAX_SCALING)
            except ValueError:
                out.add("gpuprov_sharing.hami.%s" % key, "must be a number above 0 (at least %g) and at most %d "
                        "(HAMi's %s), got %r" % (MIN_SCALING, MAX_SCALING,
                                                 "deviceMemoryScaling" if key == "memory_scaling"
                                                 else "deviceCoreScaling", scaling))
            else:
                result[key] = scaling
        return {"hami": result}

    def plan(self, intent, gpus):
        hami = intent.options["hami"]
        split = hami["split_count"]
        slots = {}
        for gpu in gpus:
            memory = int(gpu["memory_mib"] * hami["memory_scaling"])
            slots[memory] = slots.get(memory, 0) + 1
        return {
            "resources": {RESOURCES["count"]: len(gpus) * split},
            "slots": [sharing.slot(RESOURCES["count"], split, memory, count) for memory, count in sorted(slots.items())],
            "device_plugin": None,  # the NVIDIA device plugin must not run on a HAMi node
            "labels": dict(NODE_LABEL),
            "hami": {
                "split_count": split,
                "memory_scaling": hami["memory_scaling"],
                "core_scaling": hami["core_scaling"],
                "operating_mode": OPERATING_MODE,
                "requests": dict(RESOURCES),
                # What HAMi registers per GPU (its node annotation): memory x scaling, 100 x core scaling.
                "gpus": [{"index": g["index"], "memory_mib": int(g["memory_mib"] * hami["memory_scaling"]),
                          "cores_percent": int(100 * hami["core_scaling"])} for g in gpus],
            },
        }, []

    def warnings(self, intent, plan):
        hami = plan["hami"]
        warnings = sharing.slot_warnings(plan["slots"])
        warnings.append("HAMi isolation is soft (HAMi-core intercepts CUDA calls); a pod asking for nvidia.com/gpu: 2 "
                        "gets one slot on each of two GPUs, never two slots of one GPU")
        if hami["memory_scaling"] > 1:
            warnings.append("hami.memory_scaling %s > 1 oversubscribes GPU memory (HAMi marks it experimental)"
                            % hami["memory_scaling"])
        mig_off = [g["index"] for g in plan["gpus"] if g["mig"] is not None]
        if mig_off:
            warnings.append("GPU %s: MIG is planned off (HAMi's hami-core mode shares whole GPUs)"
                            % ",".join(str(i) for i in mig_off))
        return warnings
