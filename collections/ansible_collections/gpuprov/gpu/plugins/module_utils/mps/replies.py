# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Parsing what ``nvidia-cuda-mps-control`` answers."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpuprov.gpu.plugins.module_utils.mps.constants import MPS_CONTROL
from ansible_collections.gpuprov.gpu.plugins.module_utils.mps.errors import MpsError
from ansible_collections.gpuprov.gpu.plugins.module_utils.quantities import mps_pinned_memory_mib


def parse_memory_limit(text):
    """``'20G'`` / ``'20350M'`` -> MiB; ``'0'`` or nothing (no limit) -> None.

    The reply format of ``get_default_device_pinned_mem_limit`` is not fully documented
    (seen as ``3G`` and ``20350M``); a bare number is taken as MiB. UNVERIFIED beyond that.
    The units are those of ``quantities.mps_pinned_memory_mib``.
    """
    text = (text or "").strip()
    if not text:
        return None
    try:
        return mps_pinned_memory_mib(text) or None
    except ValueError:
        raise MpsError("unexpected pinned memory limit reply %r from %s" % (text, MPS_CONTROL))


def parse_percentage(text):
    text = (text or "").strip()
    try:
        return float(text)
    except ValueError:
        raise MpsError("unexpected active thread percentage reply %r from %s" % (text, MPS_CONTROL))


def parse_server_list(text):
    pids = []
    for line in (text or "").split():
        if not line.isdigit():
            raise MpsError("unexpected get_server_list reply %r from %s" % (text, MPS_CONTROL))
        pids.append(int(line))
    return pids
