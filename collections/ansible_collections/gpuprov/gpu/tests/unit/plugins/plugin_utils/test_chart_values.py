# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpuprov.gpu.plugins.plugin_utils.chart_values import deep_merge


def test_mappings_merge_key_by_key_and_anything_else_replaces():
    base = {"image": {"repository": "nvcr.io/nvidia/k8s-device-plugin", "tag": "v0.20.0"},
            "tolerations": [{"key": "nvidia.com/gpu"}], "gfd": {"enabled": True}}
    extra = {"image": {"tag": "v0.20.1"}, "tolerations": [{"key": "dedicated"}], "gfd": None}
    assert deep_merge(base, extra) == {"image": {"repository": "nvcr.io/nvidia/k8s-device-plugin", "tag": "v0.20.1"},
                                       "tolerations": [{"key": "dedicated"}], "gfd": None}


def test_neither_input_is_changed_and_no_value_is_shared():
    base = {"a": {"b": [1]}}
    extra = {"c": {"d": [2]}}
    merged = deep_merge(base, extra)
    merged["a"]["b"].append(3)
    merged["c"]["d"].append(4)
    assert base == {"a": {"b": [1]}} and extra == {"c": {"d": [2]}}
    assert deep_merge(base, None) == base
