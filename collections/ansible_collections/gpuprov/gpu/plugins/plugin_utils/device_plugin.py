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


def _time_slicing(resources, replicas, options=None):
    """``replicas``: one count for every resource, or {resource: count}."""
    options = options or {}
    return {
        "timeSlicing": {
            "renameByDefault": bool(options.get("rename_by_default", False)),
            # NVIDIA recommends true: a pod asking for 2 shared slots would otherwise get two
            # slices of the same GPU and believe it has two GPUs.
            "failRequestsGreaterThanOne": bool(options.get("fail_requests_greater_than_one", True)),
            "resources": [{"name": name, "replicas": replicas[name] if isinstance(replicas, dict) else replicas}
                          for name in resources],
        }
    }


def _options_suffix(options):
    """Name suffix for non-default plugin options, so a name always means one config."""
    options = options or {}
    suffix = ""
    if options.get("rename_by_default"):
        suffix += "-rename"
    if not options.get("fail_requests_greater_than_one", True):
        suffix += "-multi"
    return suffix


def render(strategy, replicas=None, mig_strategy=None, mig_resources=(), mps_provider=None, options=None):
    """Return (name, config) for one node's sharing setup.

    ``strategy``: exclusive | time-slicing | mps | mig. ``replicas``: time-slicing or MPS
    replicas (for mig: time-slicing replicas of each MIG device, a mapping {resource:
    replicas} under the mixed strategy, or None).
    ``mig_resources``: resource names to time-slice under the mixed strategy.
    ``options``: {rename_by_default, fail_requests_greater_than_one} for shared resources.
    """
    name, config = _render(strategy, replicas, mig_strategy, mig_resources, mps_provider, options)
    if "sharing" in config:
        name += _options_suffix(options)
    return name, config


def _render(strategy, replicas, mig_strategy, mig_resources, mps_provider, options):
    if strategy == "exclusive" or (strategy == "mps" and mps_provider == "host"):
        return "exclusive", {"version": "v1", "flags": {"migStrategy": "none"}}
    if strategy == "time-slicing":
        return "ts-%d" % replicas, {
            "version": "v1",
            "flags": {"migStrategy": "none"},
            "sharing": _time_slicing([GPU_RESOURCE], replicas, options),
        }
    if strategy == "mps":
        mps = {"renameByDefault": bool((options or {}).get("rename_by_default", False)),
               "resources": [{"name": GPU_RESOURCE, "replicas": replicas}]}
        if not (options or {}).get("fail_requests_greater_than_one", True):
            # The plugin's MPS default is true; v0.20.0 honours an explicit false.
            mps["failRequestsGreaterThanOne"] = False
        return "mps-%d" % replicas, {
            "version": "v1",
            "flags": {"migStrategy": "none"},
            "sharing": {"mps": mps},
        }
    if strategy == "mig":
        config = {"version": "v1", "flags": {"migStrategy": mig_strategy}}
        if not replicas:
            return "mig-%s" % mig_strategy, config
        if mig_strategy == "single":
            config["sharing"] = _time_slicing([GPU_RESOURCE], replicas, options)
            return "mig-single-ts-%d" % replicas, config
        resources = sorted(mig_resources)
        config["sharing"] = _time_slicing(resources, replicas, options)
        if isinstance(replicas, dict):
            # Per-resource replicas: the digest covers names and counts.
            digest = hashlib.sha1(json.dumps([[r, replicas[r]] for r in resources]).encode("utf-8")).hexdigest()[:8]
            return "mig-mixed-ts-%s" % digest, config
        digest = hashlib.sha1(json.dumps(resources).encode("utf-8")).hexdigest()[:8]
        return "mig-mixed-ts-%d-%s" % (replicas, digest), config
    raise ValueError("unknown sharing strategy %r" % (strategy,))
