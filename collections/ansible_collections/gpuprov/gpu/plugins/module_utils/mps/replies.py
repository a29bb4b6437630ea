# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Parsing what ``nvidia-cuda-mps-control`` answers, and formatting what it is told."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.gpuprov.gpu.plugins.module_utils.mps.constants import MPS_CONTROL
from ansible_collections.gpuprov.gpu.plugins.module_utils.mps.errors import MpsError


_MEMORY_RE = re.compile(r"^\s*([0-9]+)\s*([MG]?)(?:i?B)?\s*$", re.IGNORECASE)


def parse_memory_limit(text):
    """``'20G'`` / ``'20350M'`` -> MiB; ``'0'`` or nothing (no limit) -> None.

    The reply format of ``get_default_device_pinned_mem_limit`` is not fully documented
    (seen as ``3G`` and ``20350M``); a bare number is taken as MiB. UNVERIFIED beyond that.
    """
    text = (text or "").strip()
    if not text:
        return None
    match = _MEMORY_RE.match(text)
    if not match:
        raise MpsError("unexpected pinned memory limit reply %r from %s" % (text, MPS_CONTROL))
    value = int(match.group(1))
    if match.group(2).upper() == "G":
        value *= 1024
    return value or None


def format_memory_limit(mib):
    """MiB -> the ``<N>M`` form that ``set_default_device_pinned_mem_limit`` takes."""
    return "%dM" % mib


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
