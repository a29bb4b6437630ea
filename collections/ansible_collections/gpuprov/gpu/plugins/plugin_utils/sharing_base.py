# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The interface of a sharing provider (see sharing.py for the registry).

Sharing providers: who shares a node's GPUs, and what that needs.

A provider owns, for the strategies it serves:

- validation of its own ``gpuprov_sharing`` keys (``parse``),
- the resources the node advertises and the memory each shared slot gets (``plan``),
- the node labels and cluster-side config (``plan`` returns them; the cluster renderers
  read them from the node plan).

The planner asks ``provider_for(strategy)`` and never branches on a provider's name, so a
new provider (DRA, say) is one more file registered in ``PROVIDERS``.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

# A shared slot with less memory than this cannot hold a CUDA context plus a small model;
# the plan warns. (An operating rule of thumb, not a hardware limit: UNVERIFIED.)
SLOT_MEMORY_FLOOR_GIB = 2.0
# At most this many time-slicing or MPS replicas per device (a gpuprov policy, not NVIDIA's):
# far above any useful sharing, low enough that a hostile count is refused before anything
# is built from it.
MAX_REPLICAS = 128


class SharingProvider:
    """Interface every provider implements."""

    #: the provider's name in plans (``plan["sharing_provider"]``)
    name = None
    #: the ``gpuprov_sharing.strategy`` values it serves
    strategies = ()
    #: ``gpuprov_sharing`` keys it owns beyond ``strategy``
    keys = ()

    def parse(self, sharing_vars, strategy, models, out):
        """Check the provider's keys of ``sharing_vars`` (gpuprov_sharing); return its options (plain data, hashable
        once frozen) for NodeIntent.options. ``out.add(field, reason)`` records a problem."""
        raise NotImplementedError

    def plan(self, intent, gpus):
        """Return (parts, [(field, reason)]). ``parts``: resources, slots, device_plugin
        (config or None), labels, and any provider section (e.g. ``hami``)."""
        raise NotImplementedError

    def warnings(self, intent, plan):
        """Provider warnings for a finished node plan."""
        return []


def slot(resource, replicas, memory_mib, devices):
    """One shared-slot line: ``devices`` devices of ``memory_mib`` each, ``replicas`` slots each."""
    return {"resource": resource, "replicas": replicas, "devices": devices,
            "memory_gib_per_slot": round(memory_mib / 1024.0 / replicas, 2)}


def slot_warnings(slots):
    """Warnings for slots below SLOT_MEMORY_FLOOR_GIB."""
    return ["%s: %d slots per device leave %.2f GiB of memory per slot (below %.0f GiB); use fewer replicas "
            "or a larger device" % (s["resource"], s["replicas"], s["memory_gib_per_slot"], SLOT_MEMORY_FLOOR_GIB)
            for s in slots if s["replicas"] > 1 and s["memory_gib_per_slot"] < SLOT_MEMORY_FLOOR_GIB]
