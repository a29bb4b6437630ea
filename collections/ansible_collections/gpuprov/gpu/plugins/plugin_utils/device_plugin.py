# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""NVIDIA device-plugin configs (``version: v1``) for node plans.

The plugin reads one named config per node, chosen by the node label
``nvidia.com/device-plugin.config=<name>``. Names here are derived from the config's content,
so nodes with the same sharing setup share one config and a name always means the same thing:
``exclusive``, ``ts-4``, ``mps-8``, ``mig-single``, ``mig-mixed``, ``mig-single-ts-4``, and
``mig-mixed-ts-4-<hash>`` (the hash covers the MIG resources listed, which differ by layout).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import json

CONFIG_LABEL = "nvidia.com/device-plugin.config"
GPU_RESOURCE = "nvidia.com/gpu"


def _time_slicing(resources, replicas):
    return {
        "timeSlicing": {
            "renameByDefault": False,
            # NVIDIA recommends true: a pod asking for 2 shared slots would otherwise get two
            # slices of the same GPU and believe it has two GPUs.
            "failRequestsGreaterThanOne": True,
            "resources": [{"name": name, "replicas": replicas} for name in resources],
        }
    }


def render(strategy, replicas=None, mig_strategy=None, mig_resources=(), mps_provider=None):
    """Return (name, config) for one node's sharing setup.

    ``strategy``: exclusive | time-slicing | mps | mig. ``replicas``: time-slicing or MPS
    replicas (for mig: time-slicing replicas of each MIG device, or None).
    ``mig_resources``: resource names the node advertises under the mixed strategy.
    """
    if strategy == "exclusive" or (strategy == "mps" and mps_provider == "host"):
        return "exclusive", {"version": "v1", "flags": {"migStrategy": "none"}}
    if strategy == "time-slicing":
        return "ts-%d" % replicas, {
            "version": "v1",
            "flags": {"migStrategy": "none"},
            "sharing": _time_slicing([GPU_RESOURCE], replicas),
        }
    if strategy == "mps":
        return "mps-%d" % replicas, {
            "version": "v1",
            "flags": {"migStrategy": "none"},
            "sharing": {"mps": {"renameByDefault": False,
                                "resources": [{"name": GPU_RESOURCE, "replicas": replicas}]}},
        }
    if strategy == "mig":
        config = {"version": "v1", "flags": {"migStrategy": mig_strategy}}
        if not replicas:
            return "mig-%s" % mig_strategy, config
        if mig_strategy == "single":
            config["sharing"] = _time_slicing([GPU_RESOURCE], replicas)
            return "mig-single-ts-%d" % replicas, config
        resources = sorted(mig_resources)
        config["sharing"] = _time_slicing(resources, replicas)
        digest = hashlib.sha1(json.dumps(resources).encode("utf-8")).hexdigest()[:8]
        return "mig-mixed-ts-%d-%s" % (replicas, digest), config
    raise ValueError("unknown sharing strategy %r" % (strategy,))
