# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Values a user adds over the chart values gpuprov renders (device plugin, NFD, HAMi,
dcgm-exporter), merged as Helm merges a later ``-f`` file over an earlier one: mappings merge
key by key, anything else (lists included) replaces."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy


def deep_merge(base, extra):
    """``extra`` merged into a copy of ``base`` (mappings merge, anything else replaces)."""
    result = copy.deepcopy(base)
    for key, value in (extra or {}).items():
        if isinstance(value, dict) and isinstance(result.get(key), dict):
            result[key] = deep_merge(result[key], value)
        else:
            result[key] = copy.deepcopy(value)
    return result
