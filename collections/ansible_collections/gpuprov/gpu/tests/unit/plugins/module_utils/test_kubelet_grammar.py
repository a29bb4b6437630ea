# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""The kubelet's value syntaxes and the settings rules built on them. The same rules are held
against the kubelet itself in test_kubelet_peer_fields.py (Go peers)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
from fractions import Fraction

import pytest

from ansible_collections.gpuprov.gpu.plugins.module_utils.kubelet_config.grammar import (
    go_bool,
    go_duration,
    go_int,
    kubelet_cpuset,
    kubelet_quantity,
)
from ansible_collections.gpuprov.gpu.plugins.module_utils.kubelet_config.layers import (
    drop_in_paths,
    effective_config,
    merged_before,
)
from ansible_collections.gpuprov.gpu.plugins.module_utils.kubelet_config.settings import settings_problems

SECOND = 10 ** 9


@pytest.mark.parametrize("text, nanoseconds", [
    ("0", 0), ("-0", 0), ("10s", 10 * SECOND), ("1m30s", 90 * SECOND), ("1.5h", 5400 * SECOND),
    ("+5s", 5 * SECOND), ("-5s", -5 * SECOND), (".5s", SECOND // 2), ("1.s", SECOND),
    (u"1\u00b5s", 1000), (u"1\u03bcs", 1000), ("1us", 1000), ("2ns", 2), ("1h1m1s1ms", 3661001000000),
    ("2562047h47m16.854775807s", 2 ** 63 - 1),
])
def test_go_duration(text, nanoseconds):
    assert go_duration(text) == nanoseconds


@pytest.mark.parametrize("text", ["", "10", "s", ".s", "1d", "10 s", " 10s", "1e3s", "1.5.5s",
                                  u"\u0661s", "forever; rm -rf /", "2562047h47m16.854775808s",
                                  "-", "+"])
def test_go_duration_refuses(text):
    with pytest.raises(ValueError):
        go_duration(text)


def test_go_bool_and_int():
    assert [go_bool(t) for t in ("1", "t", "T", "TRUE", "true", "True")] == [True] * 6
    assert [go_bool(t) for t in ("0", "f", "F", "FALSE", "false", "False")] == [False] * 6
    for text in ("yes", "tRUE", " true", u"\u0661"):
        with pytest.raises(ValueError):
            go_bool(text)
    assert go_int("+16") == 16 and go_int("-8") == -8 and go_int("0009") == 9
    for text in ("1e3", "", " 9", u"\u0669", "9" * 20):
        with pytest.raises(ValueError):
            go_int(text)


def test_kubelet_cpuset():
    assert kubelet_cpuset("") == []
    assert kubelet_cpuset("0-2,8") == [0, 1, 2, 8]
    assert kubelet_cpuset("3-3") == [3]
    assert kubelet_cpuset("0,0") == [0]  # the kubelet takes the union
    with pytest.raises(ValueError, match="listed more than once"):
        kubelet_cpuset("0-3,2", repeats=False)
    for text in ("0, 1", " 0", "3-1", "0-", "-1", "+1", u"\u0660", "0-3:2", "a"):
        with pytest.raises(ValueError):
            kubelet_cpuset(text)
    with pytest.raises(ValueError, match="above the largest CPU id"):
        kubelet_cpuset("0-9000", max_cpu=8191)


def test_kubelet_quantity():
    assert kubelet_quantity("500m") == Fraction(1, 2)
    assert kubelet_quantity(2) == 2
    for value in (" 1", "1 ", u"\u0661", True, "1Gb", 1.5):
        with pytest.raises(ValueError):
            kubelet_quantity(value)


def test_drop_ins_are_walked_like_filepath_walkdir(tmp_path):
    root = tmp_path / "conf.d"
    for name in ("10-a.conf", "40-site/20-b.conf", "40-site/deeper/01-c.conf", "60-z.conf",
                 "50-gpuprov.conf", "30-skip.yaml", "70-dir.conf/x.conf", ".conf"):
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("kind: KubeletConfiguration\n")
    paths = [os.path.relpath(p, str(root)) for p in drop_in_paths(str(root))]
    assert paths == [".conf", "10-a.conf", "40-site/20-b.conf", "40-site/deeper/01-c.conf",
                     "50-gpuprov.conf", "60-z.conf", "70-dir.conf/x.conf"]
    assert merged_before(str(root / "40-site/deeper/01-c.conf"), str(root))
    assert not merged_before(str(root / "60-z.conf"), str(root))


def test_the_main_file_is_defaulted_before_drop_ins_merge_as_patches():
    merged = effective_config({"kind": "KubeletConfiguration"},
                              [{"evictionHard": {"nodefs.available": "5%"}},
                               {"kubeReserved": {"cpu": "1", "memory": "1Gi"}},
                               {"kubeReserved": {"cpu": None}}])
    assert merged["evictionHard"]["memory.available"] == "100Mi"
    assert merged["evictionHard"]["nodefs.available"] == "5%"
    assert merged["kubeReserved"] == {"memory": "1Gi"}
    # A main file with its own partial map keeps it: no memory threshold.
    partial = effective_config({"evictionHard": {"nodefs.available": "10%"}}, [])
    assert "memory.available" not in partial["evictionHard"]
    # A drop-in may remove the map: no thresholds at all.
    assert effective_config({}, [{"evictionHard": None}])["evictionHard"] == {}


@pytest.mark.parametrize("settings, field", [
    ({"cpu_manager_reconcile_period": "forever; rm -rf /"}, "cpu_manager_reconcile_period"),
    ({"cpu_manager_reconcile_period": 10}, "cpu_manager_reconcile_period"),
    ({"reserved_system_cpus": u"\u0660-\u0661"}, "reserved_system_cpus"),
    ({"kube_reserved_cpu": u"\u0661"}, "kube_reserved_cpu"),
    ({"topology_manager_policy_options": {"max-allowable-numa-nodes": "7"}},
     "topology_manager_policy_options.max-allowable-numa-nodes"),
    ({"cpu_manager_policy": "none", "cpu_manager_policy_options": {"full-pcpus-only": True}},
     "cpu_manager_policy_options"),
    ({"reserved_memory": [{"numa_node": 0, "limits": {"memory": "0"}}]},
     "reserved_memory[0].limits.memory"),
    ({"reserved_memory": [{"numa_node": True, "limits": {"memory": "1Gi"}}]},
     "reserved_memory[0].numa_node"),
    ({"bogus": 1}, ""),
])
def test_settings_problems_name_the_field(settings, field):
    assert field in [f for f, _reason in settings_problems(settings)]


def test_settings_problems_show_hostile_text_escaped():
    problems = settings_problems({"cpu_manager_reconcile_period": u"\x1b]0;owned\x07\u202e" + "x" * 500})
    (field, reason), = problems
    assert "\x1b" not in reason and u"\u202e" not in reason and len(reason) < 300
