# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""The KubeletConfiguration model: round trip, managed keys, validation, resets, writing."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import stat
from fractions import Fraction

import pytest
import yaml

from ansible_collections.gpuprov.gpu.plugins.module_utils.kubelet_config import atomic_write
from ansible_collections.gpuprov.gpu.plugins.module_utils.quantities import k8s_quantity
from ansible_collections.gpuprov.gpu.plugins.module_utils.kubelet_config import (
    KubeletConfigDocument,
    KubeletConfigError,
    KubeletSettings,
    plan_change,
    write_file_atomic,
)
from ansible_collections.gpuprov.gpu.tests.unit.plugins.module_utils.fake_sysfs import build_sysfs

FIXTURE = os.path.join(os.path.dirname(__file__), "fixtures", "kubelet-config-kubeadm.yaml")

MANAGED_TOP_LEVEL = (
    "cpuManagerPolicy", "cpuManagerPolicyOptions", "cpuManagerReconcilePeriod",
    "topologyManagerPolicy", "topologyManagerScope", "topologyManagerPolicyOptions",
    "reservedSystemCPUs", "memoryManagerPolicy", "reservedMemory",
)


def fixture_text():
    with open(FIXTURE) as handle:
        return handle.read()


def strip_managed(text):
    """Drop the lines of managed keys: top-level blocks and kube/systemReserved.cpu lines."""
    kept = []
    skipping = False
    section = None
    for line in text.splitlines(True):
        top_level = not line.startswith((" ", "-"))
        if top_level:
            key = line.split(":", 1)[0]
            section = key
            skipping = key in MANAGED_TOP_LEVEL
        if skipping:
            continue
        if section in ("kubeReserved", "systemReserved") and line.startswith("  cpu:"):
            continue
        kept.append(line)
    return "".join(kept)


@pytest.fixture
def sysfs(tmp_path):
    root = str(tmp_path / "sys")
    build_sysfs(root, numa_nodes=2, cores_per_node=4, smt=True, node_memory_kb=1024 * 1024)
    return root


@pytest.fixture
def config_file(tmp_path):
    path = tmp_path / "config.yaml"
    path.write_text(fixture_text())
    os.chmod(str(path), 0o640)
    return str(path)


def plan(text, sysfs_root, **settings):
    return plan_change("/var/lib/kubelet/config.yaml", KubeletSettings(**settings),
                       sysfs_root=sysfs_root, text=text)


NUMA_SETTINGS = dict(
    cpu_manager_policy="static",
    cpu_manager_policy_options={"full-pcpus-only": True},
    cpu_manager_reconcile_period="10s",
    topology_manager_policy="single-numa-node",
    topology_manager_scope="pod",
    topology_manager_policy_options={"prefer-closest-numa-nodes": "true"},
    reserved_system_cpus="auto",
    kube_reserved_cpu="500m",
    system_reserved_cpu="500m",
    memory_manager_policy="Static",
    # fixture: kubeReserved.memory 256Mi + systemReserved.memory 512Mi + evictionHard 100Mi
    reserved_memory=[{"numa_node": 0, "limits": {"memory": "434Mi"}},
                     {"numa_node": 1, "limits": {"memory": "434Mi"}}],
)


# --------------------------------------------------------------------------------------------
# Round trip and managed keys


def test_unchanged_document_renders_byte_for_byte():
    text = fixture_text()
    assert KubeletConfigDocument(text).render() == text


def test_kubeadm_config_keeps_every_unmanaged_byte(sysfs):
    before = fixture_text()
    result = plan(before, sysfs, **NUMA_SETTINGS)
    assert result.changed
    assert strip_managed(result.after) == strip_managed(before)
    # quoting the kubelet needs survives the rewrite
    assert 'containerRuntimeEndpoint: ""\n' in result.after
    assert '      infoBufferSize: "0"\n' in result.after
    assert "memorySwap: {}\n" in result.after

    config = yaml.safe_load(result.after)
    assert config["cpuManagerPolicy"] == "static"
    assert config["cpuManagerPolicyOptions"] == {"full-pcpus-only": "true"}
    assert config["cpuManagerReconcilePeriod"] == "10s"
    assert config["topologyManagerPolicy"] == "single-numa-node"
    assert config["topologyManagerScope"] == "pod"
    assert config["topologyManagerPolicyOptions"] == {"prefer-closest-numa-nodes": "true"}
    assert config["reservedSystemCPUs"] == "0,4,8,12"
    assert config["kubeReserved"] == {"cpu": "500m", "ephemeral-storage": "1Gi", "memory": "256Mi"}
    assert config["systemReserved"] == {"cpu": "500m", "memory": "512Mi"}
    assert config["memoryManagerPolicy"] == "Static"
    assert config["reservedMemory"] == [{"limits": {"memory": "434Mi"}, "numaNode": 0},
                                        {"limits": {"memory": "434Mi"}, "numaNode": 1}]
    assert result.changed_keys == [
        "cpuManagerPolicy", "cpuManagerPolicyOptions", "cpuManagerReconcilePeriod",
        "topologyManagerPolicy", "topologyManagerScope", "topologyManagerPolicyOptions",
        "reservedSystemCPUs", "kubeReserved.cpu", "systemReserved.cpu", "memoryManagerPolicy",
        "reservedMemory"]


def test_new_keys_go_to_their_sorted_place_in_a_sorted_file(sysfs):
    result = plan(fixture_text(), sysfs, cpu_manager_policy="static", reserved_system_cpus="0")
    keys = list(yaml.safe_load(result.after))
    assert keys == sorted(keys)
    assert 'reservedSystemCPUs: "0"\n' in result.after


def test_new_keys_go_last_in_an_unsorted_file(sysfs):
    text = "kind: KubeletConfiguration\napiVersion: kubelet.config.k8s.io/v1beta1\n"
    result = plan(text, sysfs, topology_manager_policy="restricted")
    assert result.after == text + "topologyManagerPolicy: restricted\n"


def test_values_that_would_read_back_as_numbers_are_quoted(sysfs):
    result = plan(fixture_text(), sysfs, kube_reserved_cpu="1", cpu_manager_policy="static",
                  topology_manager_policy_options={"max-allowable-numa-nodes": 16})
    assert '  cpu: "1"\n' in result.after
    assert '  max-allowable-numa-nodes: "16"\n' in result.after
    assert yaml.safe_load(result.after)["kubeReserved"]["cpu"] == "1"


def test_missing_and_empty_reservation_maps_are_created_as_block_maps(sysfs):
    text = ("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"
            "kubeReserved:\nsystemReserved: {}\n")
    result = plan(text, sysfs, kube_reserved_cpu="250m", system_reserved_cpu="250m")
    assert result.after == (
        "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"
        "kubeReserved:\n  cpu: 250m\nsystemReserved:\n  cpu: 250m\n")


def test_second_plan_on_the_result_changes_nothing(sysfs):
    first = plan(fixture_text(), sysfs, **NUMA_SETTINGS)
    second = plan(first.after, sysfs, **NUMA_SETTINGS)
    assert not second.changed
    assert second.changed_keys == []
    assert second.after == first.after
    assert not second.cpu_manager_state_reset_required
    assert not second.memory_manager_state_reset_required


def test_same_cpus_in_another_spelling_is_no_change(sysfs):
    text = fixture_text().replace("kind: KubeletConfiguration\n",
                                  "kind: KubeletConfiguration\nreservedSystemCPUs: 0,8,4,12\n")
    result = plan(text, sysfs, reserved_system_cpus="auto")
    assert not result.changed
    assert result.reserved_system_cpus == "0,8,4,12"


def test_empty_values_remove_the_keys(sysfs):
    first = plan(fixture_text(), sysfs, **NUMA_SETTINGS)
    second = plan(first.after, sysfs, cpu_manager_policy="none", cpu_manager_policy_options={},
                  topology_manager_policy_options={}, reserved_system_cpus="",
                  kube_reserved_cpu="", system_reserved_cpu="", memory_manager_policy="None",
                  reserved_memory=[])
    config = yaml.safe_load(second.after)
    for key in ("cpuManagerPolicyOptions", "topologyManagerPolicyOptions", "reservedSystemCPUs",
                "reservedMemory"):
        assert key not in config
    assert "cpu" not in config["kubeReserved"]
    assert "cpu" not in config["systemReserved"]
    assert second.cpu_manager_state_reset_required
    assert second.memory_manager_state_reset_required


def test_unset_settings_touch_nothing_and_keep_comments(sysfs):
    text = "# written by kubeadm\n" + fixture_text()
    result = plan(text, sysfs)
    assert not result.changed
    assert result.after == text


def test_a_rewrite_drops_comments(sysfs):
    text = "# written by kubeadm\n" + fixture_text()
    result = plan(text, sysfs, topology_manager_policy="best-effort")
    assert "# written by kubeadm" not in result.after
    assert strip_managed(result.after) == strip_managed(fixture_text())


def test_document_start_marker_is_kept(sysfs):
    text = "---\napiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"
    result = plan(text, sysfs, topology_manager_scope="pod")
    assert result.after.startswith("---\n")


@pytest.mark.parametrize("text, message", [
    ("kind: [unclosed", "is not valid YAML"),
    ("- a\n- b\n", "must hold a KubeletConfiguration mapping, found a sequence"),
    ("a: 1\n---\nb: 2\n", "is not valid YAML"),
])
def test_unreadable_documents_name_the_file(sysfs, text, message):
    with pytest.raises(KubeletConfigError) as err:
        plan(text, sysfs, cpu_manager_policy="none")
    assert "/var/lib/kubelet/config.yaml" in str(err.value)
    assert message in str(err.value)


def test_missing_file_says_what_to_do(tmp_path, sysfs):
    missing = str(tmp_path / "nope.yaml")
    with pytest.raises(KubeletConfigError) as err:
        plan_change(missing, KubeletSettings(), sysfs_root=sysfs)
    assert missing in str(err.value)
    assert "does not exist" in str(err.value)


# --------------------------------------------------------------------------------------------
# Validation: every error names its field


def with_keys(**keys):
    """The fixture with extra top-level keys (as YAML flow text)."""
    extra = "".join("%s: %s\n" % (key, value) for key, value in keys.items())
    return fixture_text() + extra


VALIDATION_CASES = [
    ("bad cpu policy", with_keys(cpuManagerPolicy="dynamic"), {},
     "cpuManagerPolicy: 'dynamic' is not one of none, static"),
    ("unknown cpu option", fixture_text(),
     dict(cpu_manager_policy="static", reserved_system_cpus="0",
          cpu_manager_policy_options={"bogus": "true"}),
     "cpuManagerPolicyOptions.bogus: unknown option"),
    ("bool option not a bool", fixture_text(),
     dict(cpu_manager_policy="static", reserved_system_cpus="0",
          cpu_manager_policy_options={"full-pcpus-only": "yes"}),
     "cpuManagerPolicyOptions.full-pcpus-only: 'yes' is not a boolean"),
    ("option written unquoted", with_keys(cpuManagerPolicy="static", reservedSystemCPUs='"0"',
                                          cpuManagerPolicyOptions="{full-pcpus-only: true}"), {},
     "cpuManagerPolicyOptions.full-pcpus-only: value True must be a quoted string"),
    ("options with the none policy", fixture_text(),
     dict(cpu_manager_policy="none", cpu_manager_policy_options={"full-pcpus-only": True}),
     "cpuManagerPolicyOptions: options need cpuManagerPolicy static"),
    ("bad reconcile period", fixture_text(), dict(cpu_manager_reconcile_period="10 seconds"),
     "cpuManagerReconcilePeriod: '10 seconds' is not a Go duration"),
    ("reconcile period in non-ASCII digits", fixture_text(),
     dict(cpu_manager_reconcile_period="\u0661\u0660s"),
     "cpuManagerReconcilePeriod: '\\u0661\\u0660s' is not a Go duration"),
    ("negative reconcile period", fixture_text(), dict(cpu_manager_reconcile_period="-10s"),
     "cpuManagerReconcilePeriod: '-10s' is negative"),
    ("bad topology policy", with_keys(topologyManagerPolicy="strict"), {},
     "topologyManagerPolicy: 'strict' is not one of none, best-effort, restricted, "
     "single-numa-node"),
    ("bad topology scope", with_keys(topologyManagerScope="node"), {},
     "topologyManagerScope: 'node' is not one of container, pod"),
    ("unknown topology option", fixture_text(),
     dict(topology_manager_policy_options={"prefer-farthest": True}),
     "topologyManagerPolicyOptions.prefer-farthest: unknown option"),
    ("max numa nodes below 8", fixture_text(),
     dict(topology_manager_policy_options={"max-allowable-numa-nodes": 7}),
     "topologyManagerPolicyOptions.max-allowable-numa-nodes: '7' is less than 8, the kubelet's "
     "minimum"),
    ("max numa nodes not a number", fixture_text(),
     dict(topology_manager_policy_options={"max-allowable-numa-nodes": "lots"}),
     "topologyManagerPolicyOptions.max-allowable-numa-nodes: 'lots' is not an integer"),
    ("static without reservation", fixture_text(), dict(cpu_manager_policy="static"),
     "cpuManagerPolicy: static needs CPUs reserved for the system"),
    ("static with zero reservation", fixture_text(),
     dict(cpu_manager_policy="static", kube_reserved_cpu="0", system_reserved_cpu="0m"),
     "cpuManagerPolicy: static needs CPUs reserved for the system"),
    ("reserved cpuset reversed", fixture_text(), dict(reserved_system_cpus="3-1"),
     "reservedSystemCPUs: invalid range '3-1'"),
    ("reserved cpuset with spaces", fixture_text(), dict(reserved_system_cpus="0, 1"),
     "reservedSystemCPUs: ' 1' is not a CPU number"),
    ("reserved cpus with a reserved cgroup", with_keys(systemReservedCgroup="/system.slice"),
     dict(cpu_manager_policy="static", reserved_system_cpus="0"),
     "reservedSystemCPUs: the kubelet refuses it together with systemReservedCgroup"),
    ("exclusive cpu options", fixture_text(),
     dict(cpu_manager_policy="static", reserved_system_cpus="0",
          cpu_manager_policy_options={"full-pcpus-only": True,
                                      "distribute-cpus-across-cores": True}),
     "cpuManagerPolicyOptions.distribute-cpus-across-cores: full-pcpus-only and "
     "distribute-cpus-across-cores cannot be used at the same time"),
    ("unknown numa allocation strategy", fixture_text(),
     dict(topology_manager_policy_options={"numa-allocation-strategy": "packed"}),
     "topologyManagerPolicyOptions.numa-allocation-strategy: 'packed' is not one of none, "
     "most-allocated, least-allocated"),
    ("reserved cpuset duplicates", fixture_text(), dict(reserved_system_cpus="0-3,2"),
     "reservedSystemCPUs: CPU 2 is listed more than once"),
    ("reserved cpus not on this node", fixture_text(), dict(reserved_system_cpus="0,15-17"),
     "reservedSystemCPUs: CPUs 16-17 do not exist (or are offline) on this node; online CPUs "
     "are 0-15"),
    ("reserved cpus in the file not on this node", with_keys(reservedSystemCPUs="64-65"), {},
     "reservedSystemCPUs: CPUs 64-65 do not exist"),
    ("kube reserved cpu not a quantity", fixture_text(), dict(kube_reserved_cpu="lots"),
     "kubeReserved.cpu: 'lots' is not a Kubernetes quantity"),
    ("system reserved cpu negative", fixture_text(), dict(system_reserved_cpu="-1"),
     "systemReserved.cpu: -1 must not be negative"),
    ("bad memory policy", with_keys(memoryManagerPolicy="static"), {},
     "memoryManagerPolicy: 'static' is not one of None, Static"),
    ("static memory without reservedMemory", fixture_text(), dict(memory_manager_policy="Static"),
     "reservedMemory: memoryManagerPolicy Static needs reservedMemory"),
    ("static memory with the wrong sum", fixture_text(),
     dict(memory_manager_policy="Static",
          reserved_memory=[{"numa_node": 0, "limits": {"memory": "1Gi"}}]),
     "reservedMemory: memory sums to 1Gi over NUMA nodes but kubeReserved.memory + "
     "systemReserved.memory + evictionHard memory.available is 868Mi"),
    ("reservedMemory on a NUMA node the machine lacks", fixture_text(),
     dict(memory_manager_policy="Static",
          reserved_memory=[{"numa_node": 0, "limits": {"memory": "434Mi"}},
                           {"numa_node": 3, "limits": {"memory": "434Mi"}}]),
     "reservedMemory[1].numaNode: NUMA node 3 does not exist on this node (nodes: 0, 1)"),
    ("reservedMemory listing a node twice", fixture_text(),
     dict(memory_manager_policy="Static",
          reserved_memory=[{"numa_node": 0, "limits": {"memory": "434Mi"}},
                           {"numa_node": 0, "limits": {"memory": "434Mi"}}]),
     "reservedMemory[1].limits.memory: NUMA node 0 reserves memory twice"),
    ("reservedMemory quantity junk", fixture_text(),
     dict(memory_manager_policy="Static",
          reserved_memory=[{"numa_node": 0, "limits": {"memory": "868 MB"}}]),
     "reservedMemory[0].limits.memory: '868 MB' is not a Kubernetes quantity"),
    ("hugepages reserved per node but not in Node Allocatable", fixture_text(),
     dict(memory_manager_policy="Static",
          reserved_memory=[{"numa_node": 0, "limits": {"memory": "868Mi", "hugepages-1Gi": "1Gi"}}]),
     "reservedMemory: hugepages-1Gi sums to 1Gi over NUMA nodes but kubeReserved + "
     "systemReserved hugepages-1Gi is 0"),
    ("reservedMemory of a resource that cannot be reserved", fixture_text(),
     dict(memory_manager_policy="Static",
          reserved_memory=[{"numa_node": 0, "limits": {"memory": "868Mi", "cpu": "1"}}]),
     "reservedMemory[0].limits.cpu: only memory and hugepages-<size> can be reserved"),
]


@pytest.mark.parametrize("name, text, settings, message", VALIDATION_CASES,
                         ids=[case[0] for case in VALIDATION_CASES])
def test_validation_error_names_the_field(sysfs, name, text, settings, message):
    with pytest.raises(KubeletConfigError) as err:
        plan(text, sysfs, **settings)
    assert any(message in error for error in err.value.errors), err.value.errors
    assert message in str(err.value)


def test_all_errors_are_reported_at_once(sysfs):
    with pytest.raises(KubeletConfigError) as err:
        plan(fixture_text(), sysfs, cpu_manager_policy="static", reserved_system_cpus="3-1",
             memory_manager_policy="Static")
    fields = sorted(error.split(":", 1)[0] for error in err.value.errors)
    assert fields == ["cpuManagerPolicy", "reservedMemory", "reservedSystemCPUs"]


@pytest.mark.parametrize("settings", [
    dict(cpu_manager_policy="static", reserved_system_cpus="0-1"),
    dict(cpu_manager_policy="static", kube_reserved_cpu="100m"),
    dict(cpu_manager_policy="static", system_reserved_cpu="1"),
    dict(cpu_manager_policy="static", reserved_system_cpus="auto",
         cpu_manager_policy_options={"full-pcpus-only": "True", "strict-cpu-reservation": "1"}),
    dict(topology_manager_policy_options={"max-allowable-numa-nodes": 16,
                                          "prefer-closest-numa-nodes": False}),
    dict(memory_manager_policy="Static",
         reserved_memory=[{"numa_node": 0, "limits": {"memory": "868Mi"}}]),
    dict(memory_manager_policy="Static",
         reserved_memory=[{"numa_node": 0, "limits": {"memory": "0.5Gi"}},
                          {"numa_node": 1, "limits": {"memory": "356Mi"}}]),
])
def test_valid_settings_pass(sysfs, settings):
    assert plan(fixture_text(), sysfs, **settings).changed


def test_eviction_default_applies_only_without_an_eviction_map(sysfs):
    text = fixture_text()
    start = text.index("evictionHard:\n")
    end = text.index("evictionPressureTransitionPeriod")
    no_map = text[:start] + text[end:]
    # 256Mi + 512Mi + the kubelet's default 100Mi
    ok = plan(no_map, sysfs, memory_manager_policy="Static",
              reserved_memory=[{"numa_node": 0, "limits": {"memory": "868Mi"}}])
    assert ok.memory_manager_state_reset_required


def test_a_partial_eviction_map_means_no_memory_threshold(sysfs):
    # evictionHard names other signals but not memory.available: the kubelet does not fill
    # in its 100Mi default, the threshold is 0, so 256Mi + 512Mi must be reserved.
    text = fixture_text().replace("  memory.available: 100Mi\n", "")
    with pytest.raises(KubeletConfigError, match="memory sums to 868Mi .* is 768Mi"):
        plan(text, sysfs, memory_manager_policy="Static",
             reserved_memory=[{"numa_node": 0, "limits": {"memory": "868Mi"}}])
    assert plan(text, sysfs, memory_manager_policy="Static",
                reserved_memory=[{"numa_node": 0, "limits": {"memory": "768Mi"}}]).changed
    merged = text.replace("kind: KubeletConfiguration\n",
                          "kind: KubeletConfiguration\nmergeDefaultEvictionSettings: true\n")
    assert plan(merged, sysfs, memory_manager_policy="Static",
                reserved_memory=[{"numa_node": 0, "limits": {"memory": "868Mi"}}]).changed


def test_eviction_percentage_is_taken_of_node_memory(sysfs):
    # Two NUMA nodes of 1Gi each: 50% is 1Gi, so 256Mi + 512Mi + 1024Mi must be reserved.
    text = fixture_text().replace("memory.available: 100Mi", "memory.available: 50%")
    with pytest.raises(KubeletConfigError, match="memory sums to 868Mi .* is 1792Mi"):
        plan(text, sysfs, memory_manager_policy="Static",
             reserved_memory=[{"numa_node": 0, "limits": {"memory": "868Mi"}}])
    result = plan(text, sysfs, memory_manager_policy="Static",
                  reserved_memory=[{"numa_node": 0, "limits": {"memory": "896Mi"}},
                                   {"numa_node": 1, "limits": {"memory": "896Mi"}}])
    assert result.changed


def test_reserved_cpu_check_names_the_unreadable_sysfs_file(tmp_path):
    with pytest.raises(KubeletConfigError) as err:
        plan(fixture_text(), str(tmp_path / "nosys"), reserved_system_cpus="0-1")
    assert "reservedSystemCPUs: cannot check the CPUs against this node" in str(err.value)
    assert str(tmp_path / "nosys" / "devices" / "system" / "cpu" / "online") in str(err.value)


def test_auto_without_sysfs_says_so(tmp_path):
    with pytest.raises(KubeletConfigError) as err:
        plan(fixture_text(), str(tmp_path / "nosys"), reserved_system_cpus="auto")
    assert err.value.errors[0].startswith("reservedSystemCPUs: auto: ")
    assert "devices/system/cpu/online" in err.value.errors[0]


def test_config_without_topology_needs_never_reads_sysfs(tmp_path):
    result = plan(fixture_text(), str(tmp_path / "nosys"), topology_manager_scope="pod",
                  cpu_manager_policy="static", kube_reserved_cpu="1")
    assert result.changed


# --------------------------------------------------------------------------------------------
# Checkpoint reset detection


RESET_CASES = [
    # file additions, settings, cpu reset, memory reset
    ({}, dict(cpu_manager_policy="static", reserved_system_cpus="0"), True, False),
    ({}, dict(cpu_manager_policy="none"), False, False),
    ({"cpuManagerPolicy": "none"}, dict(cpu_manager_policy="static", kube_reserved_cpu="1"),
     True, False),
    # Under the static policy the checkpoint's CPU sets were built around the reservation.
    ({"cpuManagerPolicy": "static", "reservedSystemCPUs": '"0"'},
     dict(cpu_manager_policy="static", reserved_system_cpus="0-1"), True, False),
    ({"cpuManagerPolicy": "static", "reservedSystemCPUs": '"0,1"'},
     dict(reserved_system_cpus="0-1"), False, False),
    ({"cpuManagerPolicy": "none", "reservedSystemCPUs": '"0"'},
     dict(reserved_system_cpus="0-1"), False, False),
    ({"cpuManagerPolicy": "static"}, dict(kube_reserved_cpu="1"), True, False),
    ({"cpuManagerPolicy": "static", "systemReserved": '{cpu: "1", memory: 512Mi}'},
     dict(system_reserved_cpu="1000m"), False, False),
    ({"cpuManagerPolicy": "static", "reservedSystemCPUs": '"0"'},
     dict(cpu_manager_policy_options={"strict-cpu-reservation": True}), True, False),
    ({"cpuManagerPolicy": "static", "reservedSystemCPUs": '"0"',
      "cpuManagerPolicyOptions": '{strict-cpu-reservation: "false"}'},
     dict(cpu_manager_policy_options={}), False, False),
    ({"cpuManagerPolicy": "static", "reservedSystemCPUs": '"0"'},
     dict(cpu_manager_policy="none", reserved_system_cpus=""), True, False),
    ({}, dict(topology_manager_policy="single-numa-node", topology_manager_scope="pod"),
     False, False),
    ({}, dict(memory_manager_policy="None"), False, False),
    ({}, dict(memory_manager_policy="Static",
              reserved_memory=[{"numa_node": 0, "limits": {"memory": "868Mi"}}]), False, True),
    ({"memoryManagerPolicy": "Static",
      "reservedMemory": "[{numaNode: 0, limits: {memory: 868Mi}}]"},
     dict(memory_manager_policy="None", reserved_memory=[]), False, True),
    # Under the Static policy any change of the per-NUMA reservation.
    ({"memoryManagerPolicy": "Static",
      "reservedMemory": "[{numaNode: 0, limits: {memory: 868Mi}}]"},
     dict(reserved_memory=[{"numa_node": 1, "limits": {"memory": "868Mi"}}]), False, True),
    ({"memoryManagerPolicy": "Static",
      "reservedMemory": "[{numaNode: 0, limits: {memory: 868Mi}}]"},
     dict(reserved_memory=[{"numa_node": 0, "limits": {"memory": "0.84765625Gi"}}]),
     False, False),
    ({"memoryManagerPolicy": "None",
      "reservedMemory": "[{numaNode: 0, limits: {memory: 868Mi}}]"},
     dict(reserved_memory=[{"numa_node": 1, "limits": {"memory": "868Mi"}}]), False, False),
]


@pytest.mark.parametrize("keys, settings, cpu_reset, memory_reset", RESET_CASES)
def test_state_reset_follows_the_effective_policies(sysfs, keys, settings, cpu_reset,
                                                    memory_reset):
    result = plan(with_keys(**keys), sysfs, **settings)
    assert result.cpu_manager_state_reset_required is cpu_reset
    assert result.memory_manager_state_reset_required is memory_reset


# --------------------------------------------------------------------------------------------
# Quantities


@pytest.mark.parametrize("text, expected", [
    ("100Mi", 100 * 1024 ** 2),
    ("1Gi", 1024 ** 3),
    ("0.5Gi", 512 * 1024 ** 2),
    ("500m", Fraction(1, 2)),
    ("1.5", Fraction(3, 2)),
    ("2", 2),
    (2, 2),
    ("2k", 2000),
    ("1M", 10 ** 6),
    ("1e3", 1000),
    ("12E-1", Fraction(6, 5)),
    ("100n", Fraction(1, 10 ** 7)),
])
def test_k8s_quantity(text, expected):
    assert k8s_quantity(text) == expected


@pytest.mark.parametrize("text", ["Mi", "1.5.5", "10 Mi", "1Gb", "1KiB", "", True, None, 1.5])
def test_k8s_quantity_rejects(text):
    with pytest.raises(ValueError):
        k8s_quantity(text)


# --------------------------------------------------------------------------------------------
# Writing


def test_write_replaces_the_file_keeps_mode_and_backs_up(config_file):
    original = fixture_text()
    backup = write_file_atomic(config_file, "kind: KubeletConfiguration\n")
    with open(config_file) as handle:
        assert handle.read() == "kind: KubeletConfiguration\n"
    assert stat.S_IMODE(os.stat(config_file).st_mode) == 0o640
    with open(backup) as handle:
        assert handle.read() == original
    assert backup.startswith(config_file + ".") and backup.endswith("~")
    assert sorted(os.listdir(os.path.dirname(config_file))) == sorted(
        [os.path.basename(config_file), os.path.basename(backup)])


def test_write_without_backup_leaves_no_extra_file(config_file):
    assert write_file_atomic(config_file, "x: 1\n", backup=False) is None
    assert os.listdir(os.path.dirname(config_file)) == [os.path.basename(config_file)]


@pytest.mark.skipif(os.geteuid() != 0, reason="changing a file's owner needs root")
def test_write_keeps_the_owner(config_file):
    os.chown(config_file, 1234, 5678)
    write_file_atomic(config_file, "x: 1\n", backup=False)
    current = os.stat(config_file)
    assert (current.st_uid, current.st_gid) == (1234, 5678)


@pytest.mark.parametrize("failure", [OSError(28, "No space left on device"), KeyboardInterrupt()])
def test_crash_between_write_and_rename_leaves_the_old_file(config_file, monkeypatch, failure):
    def broken_replace(src, dst):
        assert os.path.exists(src)  # the new content was fully written first
        raise failure

    monkeypatch.setattr(atomic_write.os, "replace", broken_replace)
    with pytest.raises(type(failure)):
        write_file_atomic(config_file, "kind: broken\n", backup=False)
    with open(config_file) as handle:
        assert handle.read() == fixture_text()
    assert os.listdir(os.path.dirname(config_file)) == [os.path.basename(config_file)]


# --------------------------------------------------------------------------------------------
# Reset reasons for changes made by another layer or tool, compared as the kubelet reads them

from ansible_collections.gpuprov.gpu.plugins.module_utils.kubelet_config.checkpoints import (  # noqa: E402
    cpu_manager_reset_reasons,
    memory_manager_reset_reasons,
)

STATIC_MEMORY = {"memoryManagerPolicy": "Static", "kubeReserved": {"memory": "256Mi"},
                 "systemReserved": {"memory": "512Mi"},
                 "reservedMemory": [{"numaNode": 0, "limits": {"memory": "868Mi"}}]}


@pytest.mark.parametrize("change, reset", [
    # kubeReserved/systemReserved memory and the eviction threshold reach the checkpoint only
    # through reservedMemory, which must sum to them (validation refuses a config where it
    # does not): the Static policy's machine state depends on reservedMemory alone.
    ({"kubeReserved": {"memory": "512Mi"}}, False),
    ({"kubeReserved": {"memory": "512Mi"}, "systemReserved": {"memory": "256Mi"}}, False),
    ({"evictionHard": {"memory.available": "200Mi"},
      "reservedMemory": [{"numaNode": 0, "limits": {"memory": "968Mi"}}]}, True),
    ({"reservedMemory": [{"numaNode": 0, "limits": {"memory": "868Mi", "hugepages-1Gi": "1Gi"}}],
      "systemReserved": {"memory": "512Mi", "hugepages-1Gi": "1Gi"}}, True),
    ({"reservedMemory": [{"numaNode": 0, "limits": {"memory": "434Mi"}},
                         {"numaNode": 1, "limits": {"memory": "434Mi"}}]}, True),
])
def test_memory_reset_follows_the_reservation_per_numa_node(change, reset):
    after = dict(STATIC_MEMORY, **change)
    reasons = memory_manager_reset_reasons(STATIC_MEMORY, after)
    assert reasons == (["reservedMemory changes under the Static memory policy"] if reset else [])
    # Under the None policy the checkpoint holds no reservation.
    none_before = dict(STATIC_MEMORY, memoryManagerPolicy="None")
    assert memory_manager_reset_reasons(none_before, dict(after, memoryManagerPolicy="None")) == []


def test_reserved_cpus_that_the_rewrite_ignores_need_no_reset():
    # With reservedSystemCPUs set the kubelet replaces kubeReserved.cpu/systemReserved.cpu by
    # the count of those CPUs; without it, only the rounded-up count matters.
    static_cpu = {"cpuManagerPolicy": "static", "reservedSystemCPUs": "0-1",
                  "kubeReserved": {"cpu": "1"}}
    assert cpu_manager_reset_reasons(static_cpu, dict(static_cpu, kubeReserved={"cpu": "2"})) == []
    counted = {"cpuManagerPolicy": "static", "kubeReserved": {"cpu": "500m"}}
    assert cpu_manager_reset_reasons(counted, dict(counted, kubeReserved={"cpu": "800m"})) == []
    assert cpu_manager_reset_reasons(counted, dict(counted, kubeReserved={"cpu": "1500m"})) == [
        "kubeReserved.cpu + systemReserved.cpu reserve 2 CPUs instead of 1 under the static CPU "
        "policy"]


def test_a_reservation_that_only_shrinks_needs_no_reset_unless_strict():
    wide = {"cpuManagerPolicy": "static", "reservedSystemCPUs": "0-1,8-9"}
    assert cpu_manager_reset_reasons(wide, dict(wide, reservedSystemCPUs="0,8")) == []
    assert cpu_manager_reset_reasons(dict(wide, reservedSystemCPUs="0,8"), wide) == [
        "reservedSystemCPUs changes under the static CPU policy"]
    strict = dict(wide, cpuManagerPolicyOptions={"strict-cpu-reservation": "true"})
    assert cpu_manager_reset_reasons(strict, dict(strict, reservedSystemCPUs="0,8")) == [
        "reservedSystemCPUs changes under the static CPU policy"]


def test_same_amounts_in_other_spellings_need_no_reset():
    after = dict(STATIC_MEMORY, kubeReserved={"memory": "0.25Gi"},
                 evictionHard={"memory.available": "102400Ki"})
    assert memory_manager_reset_reasons(STATIC_MEMORY, after) == []
    static_cpu = {"cpuManagerPolicy": "static", "reservedSystemCPUs": "0-1",
                  "kubeReserved": {"cpu": "1"},
                  "cpuManagerPolicyOptions": {"strict-cpu-reservation": "false"}}
    assert cpu_manager_reset_reasons(static_cpu, dict(
        static_cpu, reservedSystemCPUs="1,0", kubeReserved={"cpu": "1000m"},
        cpuManagerPolicyOptions={})) == []
