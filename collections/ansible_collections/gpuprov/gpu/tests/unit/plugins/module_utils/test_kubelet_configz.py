# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""What /configz shows for the managed keys, and the comparison by meaning. Held against the
kubelet's own /configz in test_kubelet_peer_configz.py (Go peers)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpuprov.gpu.plugins.filter.kubelet_configz_mismatches import kubelet_configz_mismatches
from ansible_collections.gpuprov.gpu.plugins.module_utils.kubelet_config.configz import (
    configz_mismatches,
    expected_configz,
)

KEYS = ["cpuManagerPolicy", "cpuManagerReconcilePeriod", "kubeReserved.cpu", "systemReserved.cpu",
        "reservedSystemCPUs", "topologyManagerScope", "reservedMemory"]


def test_left_out_keys_show_defaults():
    expected = expected_configz({"cpuManagerReconcilePeriod": "0s"}, KEYS)
    assert expected == {"cpuManagerPolicy": "none", "cpuManagerReconcilePeriod": "10s",
                        "kubeReserved.cpu": None, "systemReserved.cpu": None,
                        "reservedSystemCPUs": None, "topologyManagerScope": "container",
                        "reservedMemory": None}
    assert expected_configz({"nodeStatusUpdateFrequency": "20s"},
                            ["cpuManagerReconcilePeriod"]) == {"cpuManagerReconcilePeriod": "20s"}


def test_reserved_cpus_rewrite_the_reservation_maps():
    config = {"reservedSystemCPUs": "0-1,8-9", "kubeReserved": {"cpu": "1"},
              "systemReserved": {"cpu": "500m"}}
    expected = expected_configz(config, KEYS)
    assert expected["kubeReserved.cpu"] is None and expected["systemReserved.cpu"] == "4"
    # A systemReserved map made only by the rewrite is not the one configz shares.
    assert expected_configz({"reservedSystemCPUs": "0", "kubeReserved": {"cpu": "1"}},
                            ["systemReserved.cpu"]) == {"systemReserved.cpu": None}
    # Drop-ins: an empty map does not survive the kubelet's JSON round trip.
    assert expected_configz({"reservedSystemCPUs": "0", "systemReserved": {}}, ["systemReserved.cpu"],
                            merged_drop_ins=True) == {"systemReserved.cpu": None}


def test_comparison_by_meaning():
    running = {"cpuManagerReconcilePeriod": "1m30s", "kubeReserved": {"cpu": "1"},
               "reservedSystemCPUs": "8,0",
               "cpuManagerPolicyOptions": {"full-pcpus-only": "True"},
               "reservedMemory": [{"numaNode": 0, "limits": {"memory": "1Gi"}}]}
    written = {"cpuManagerReconcilePeriod": "90s", "kubeReserved.cpu": "1000m",
               "reservedSystemCPUs": "0,8", "cpuManagerPolicyOptions": {"full-pcpus-only": "true"},
               "reservedMemory": [{"numaNode": 0, "limits": {"memory": "1024Mi"}}]}
    assert configz_mismatches(running, written) == []
    assert configz_mismatches(dict(running, cpuManagerReconcilePeriod="1m"), written) == [
        'cpuManagerReconcilePeriod is "1m", written "90s"']
    assert kubelet_configz_mismatches({}, {"cpuManagerPolicy": "static"}) == [
        'cpuManagerPolicy is null, written "static"']
