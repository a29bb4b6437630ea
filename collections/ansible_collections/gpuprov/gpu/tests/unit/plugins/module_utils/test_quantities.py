# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""One parser per kind of quantity: what the same text means in each source format."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from fractions import Fraction

import pytest

from ansible_collections.gpuprov.gpu.plugins.module_utils.mps.errors import MpsError
from ansible_collections.gpuprov.gpu.plugins.module_utils.mps.replies import parse_memory_limit
from ansible_collections.gpuprov.gpu.plugins.module_utils.quantities import (
    format_k8s_bytes,
    format_mps_memory_limit,
    k8s_quantity,
    mps_pinned_memory_mib,
    nvidia_smi_mib,
    workload_memory_mib,
)
from ansible_collections.gpuprov.gpu.plugins.plugin_utils import intent

GIB = 2 ** 30
MIB = 2 ** 20


# ------------------------------------------------------------------ Kubernetes quantities
# apimachinery pkg/api/resource/quantity.go: G is 10^9, Gi is 2^30, no "B" suffix.


@pytest.mark.parametrize("text, amount", [
    ("10G", 10 * 10 ** 9),
    ("10Gi", 10 * GIB),
    ("10240M", 10240 * 10 ** 6),
    ("10240Mi", 10 * GIB),
    ("10", 10),
    ("1500m", Fraction(3, 2)),
])
def test_k8s_quantity_meanings(text, amount):
    assert k8s_quantity(text) == amount


@pytest.mark.parametrize("text", ["10GiB", "10GB", "10gi", "10 Gi", "ten"])
def test_k8s_quantity_rejects_what_the_api_server_rejects(text):
    with pytest.raises(ValueError, match="not a Kubernetes quantity"):
        k8s_quantity(text)


def test_format_k8s_bytes_picks_the_largest_binary_suffix():
    assert format_k8s_bytes(Fraction(10 * GIB)) == "10Gi"
    assert format_k8s_bytes(Fraction(1536 * MIB)) == "1536Mi"
    assert format_k8s_bytes(Fraction(1000)) == "1000"


# ------------------------------------------------------------------ gpuprov fit workloads


@pytest.mark.parametrize("value, mib", [
    ("10G", 10 * 10 ** 9 / MIB),        # 9536.74 MiB: decimal, as in Kubernetes
    ("10GB", 10 * 10 ** 9 / MIB),
    ("10Gi", 10240),
    ("10GiB", 10240),
    ("10gib", 10240),                   # any case: people write 10gb
    ("10240M", 10240 * 10 ** 6 / MIB),  # 9765.625 MiB
    ("10240Mi", 10240),
    (10, 10240),                        # a bare number is GiB
    (0.5, 512),
])
def test_workload_memory_meanings(value, mib):
    assert workload_memory_mib(value) == pytest.approx(mib)


@pytest.mark.parametrize("value", [0, "0Gi", -1, "ten", "10 parsecs", True, None])
def test_workload_memory_rejects(value):
    with pytest.raises(ValueError):
        workload_memory_mib(value)


# ------------------------------------------------------------------ MPS pinned memory
# The MPS docs take "<integer>G" or "<integer>M"; the k8s-device-plugin writes bytes/2^20 as
# "<N>M", so M is MiB and G is read as 1024 M (UNVERIFIED for G, see the module docstring).


@pytest.mark.parametrize("value, mib", [
    ("10G", 10240),
    ("10Gi", 10240),
    ("10GiB", 10240),
    ("10GB", 10240),
    ("10240M", 10240),
    ("10240", 10240),   # a bare number is MiB, like the module option's integers
    (10240, 10240),
    ("1.5G", 1536),
    (" 3g\n", 3072),
    ("0", 0),
])
def test_mps_pinned_memory_meanings(value, mib):
    assert mps_pinned_memory_mib(value) == mib


@pytest.mark.parametrize("value, reason", [
    ("10.5M", "whole number of MiB"),
    ("-1G", "must be a size"),
    (-5, "must not be negative"),
    ("10B", "must be a size"),
    ("10T", "must be a size"),
    ("lots", "must be a size"),
    (True, "must be a size"),
])
def test_mps_pinned_memory_rejects(value, reason):
    with pytest.raises(ValueError, match=reason):
        mps_pinned_memory_mib(value)


def test_mps_limit_is_written_in_mib():
    assert format_mps_memory_limit(10240) == "10240M"
    assert mps_pinned_memory_mib(format_mps_memory_limit(20389)) == 20389


# ------------------------------------------------------------------ nvidia-smi


@pytest.mark.parametrize("text, mib", [("40960 MiB", 40960.0), ("40960", 40960.0), (" 81559 ", 81559.0)])
def test_nvidia_smi_mib(text, mib):
    assert nvidia_smi_mib(text) == mib


@pytest.mark.parametrize("text", ["10G", "10Gi", "[N/A]", "-1", "nan", "1e3"])
def test_nvidia_smi_mib_rejects_what_nvidia_smi_never_prints(text):
    with pytest.raises(ValueError, match="as nvidia-smi prints it"):
        nvidia_smi_mib(text)


# ------------------------------------------------------------------ one text, three meanings


def test_10g_means_three_different_amounts():
    """The trap the separate parsers avoid: "10G" is 10^10 bytes to Kubernetes and to fit,
    but 10 x 1024 MiB to MPS."""
    as_k8s_mib = float(k8s_quantity("10G")) / MIB
    assert workload_memory_mib("10G") == pytest.approx(as_k8s_mib)
    assert mps_pinned_memory_mib("10G") == 10240
    assert as_k8s_mib < 10240


# ------------------------------------------------------------------ controller and node agree


def _intent_pinned_mib(value):
    hostvars = {"gpuprov_gpu_model": "A100-80GB", "gpuprov_gpu_count": 1,
                "gpuprov_sharing": {"strategy": "mps", "replicas": 2,
                                    "mps": {"provider": "host", "pinned_memory_limit": value}}}
    node_intent, problems = intent.parse_intent("node1", hostvars)
    if problems:
        assert [p.field for p in problems] == ["gpuprov_sharing.mps.pinned_memory_limit"]
        return None
    return node_intent.mps["pinned_memory_limit_mib"]


@pytest.mark.parametrize("value", ["10G", "10Gi", "10GiB", "10240M", "10240", "1.5G", "20350M"])
def test_inventory_and_node_read_a_pinned_limit_alike(value):
    assert _intent_pinned_mib(value) == parse_memory_limit(value)


@pytest.mark.parametrize("value", ["10.5M", "lots", "-1G", "0"])
def test_inventory_refuses_a_pinned_limit_the_node_would_refuse(value):
    assert _intent_pinned_mib(value) is None
    try:
        node_mib = parse_memory_limit(value)
    except MpsError:
        node_mib = None
    assert node_mib is None  # "0" is "no limit" in a reply, never a limit to set


def _intent_cpu_problem(value):
    hostvars = {"gpuprov_gpu_model": "A100-80GB", "gpuprov_gpu_count": 1,
                "gpuprov_kubelet": {"kube_reserved_cpu": value}}
    _node_intent, problems = intent.parse_intent("node1", hostvars)
    return [p.field for p in problems]


@pytest.mark.parametrize("value", ["1", "500m", "1.5", 2, 0.5, "2k", "1e1"])
def test_inventory_takes_every_cpu_quantity_the_kubelet_takes(value):
    assert k8s_quantity(str(value)) >= 0
    assert _intent_cpu_problem(value) == []


@pytest.mark.parametrize("value", ["-1", "1 core", "1Gb", "one"])
def test_inventory_refuses_cpu_quantities_the_kubelet_refuses(value):
    assert _intent_cpu_problem(value) == ["gpuprov_kubelet.kube_reserved_cpu"]


# -- bounds: hostile text is refused before any arithmetic ---------------------------------

@pytest.mark.parametrize("text", ["1e999999999", "1e-999999999", "9" * 10000, "1" + "0" * 30 + "Ei",
                                  "9223372036854775808", 10 ** 30])
def test_k8s_quantity_refuses_what_no_quantity_can_hold(text):
    # quantity.go: no quantity represents a number above 2^63-1 in magnitude. Refused by the
    # bounds, before Fraction(10) ** 999999999 (which would not finish) is computed.
    with pytest.raises(ValueError):
        k8s_quantity(text)


def test_k8s_quantity_keeps_the_largest_quantity():
    assert k8s_quantity("9223372036854775807") == 2 ** 63 - 1
    assert k8s_quantity("1e18") == 10 ** 18


def test_mps_pinned_memory_refuses_a_size_with_thousands_of_digits():
    with pytest.raises(ValueError):
        mps_pinned_memory_mib("9" * 10000 + "G")
