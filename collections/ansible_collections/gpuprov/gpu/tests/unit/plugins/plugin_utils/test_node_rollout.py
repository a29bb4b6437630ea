"""plugin_utils/node_rollout.py and device_plugin_configs.config_sets over Kubernetes objects as
kubernetes.core.k8s_info returns them, and the rollout waves' sizes."""
import pytest
import yaml

from ansible_collections.gpuprov.gpu.plugins.plugin_utils import device_plugin_configs, helm_values, node_rollout


def pod(name, node="n1", owner=None, phase="Running", ready=True, annotations=None, deleting=False, namespace="team"):
    metadata = {"name": name, "namespace": namespace, "annotations": annotations or {}}
    if owner:
        metadata["ownerReferences"] = [{"kind": owner[0], "name": owner[1]}]
    if deleting:
        metadata["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"metadata": metadata, "spec": {"nodeName": node},
            "status": {"phase": phase, "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}


def test_pods_left_after_a_drain():
    pods = [pod("web-1", owner=("ReplicaSet", "web")),
            pod("bare"),
            pod("leaving", owner=("ReplicaSet", "web"), deleting=True),
            pod("plugin", owner=("DaemonSet", "nvidia-device-plugin")),
            pod("etcd", annotations={"kubernetes.io/config.mirror": "x"}),
            pod("job-done", owner=("Job", "j"), phase="Succeeded")]
    assert node_rollout.pods_left_after_drain(pods) == ["team/bare", "team/leaving", "team/web-1"]


def test_each_nodes_operand_pods_must_be_ready():
    ds = node_rollout.chart_daemonsets("nvdp-nvidia-device-plugin")
    pods = [pod("p1", node="n1", owner=("DaemonSet", ds["device-plugin"])),
            pod("g1", node="n1", owner=("DaemonSet", ds["gpu-feature-discovery"])),
            pod("p2", node="n2", owner=("DaemonSet", ds["device-plugin"]), ready=False),
            pod("m2", node="n2", owner=("DaemonSet", ds["mps-control-daemon"])),
            pod("other", node="n2", owner=("DaemonSet", "dcgm-exporter"))]
    expected = {"n1": ["device-plugin", "gpu-feature-discovery"],
                "n2": ["device-plugin", "gpu-feature-discovery", "mps-control-daemon"]}
    assert node_rollout.operand_problems(pods, expected, "nvdp-nvidia-device-plugin") == [
        "n2: device-plugin pod team/p2 is not ready",
        "n2: no gpu-feature-discovery pod (DaemonSet nvdp-nvidia-device-plugin-gpu-feature-discovery) on the node"]


def test_allocatable_against_the_plan():
    node = {"metadata": {"name": "n1"}, "status": {"allocatable": {
        "cpu": "64", "nvidia.com/mig-1g.10gb": "4", "nvidia.com/mig-3g.40gb": "2", "nvidia.com/gpu": "0"}}}
    assert node_rollout.allocatable_problems(node, {"nvidia.com/mig-1g.10gb": 4, "nvidia.com/mig-3g.40gb": 2}) == []
    assert node_rollout.allocatable_problems(node, {"nvidia.com/mig-1g.10gb": 7}) == [
        "n1: allocatable nvidia.com/mig-1g.10gb is 4, the plan advertises 7",
        "n1: allocatable nvidia.com/mig-3g.40gb is 2, the plan advertises none"]


def _plan(config_name, config):
    return {"device_plugin": {"config_name": config_name, "config": config}, "labels": {device_plugin_configs.CONFIG_LABEL: config_name}}


TS4 = {"version": "v1", "flags": {"migStrategy": "none"}, "sharing": {"timeSlicing": {
    "renameByDefault": False, "failRequestsGreaterThanOne": True, "resources": [{"name": "nvidia.com/gpu", "replicas": 4}]}}}
TS8 = yaml.safe_load(yaml.safe_dump(TS4).replace("replicas: 4", "replicas: 8"))
MIG = {"version": "v1", "flags": {"migStrategy": "mixed"}}


def test_config_sets_keep_what_nodes_name_until_relabelled():
    nodes = {"t4-1": _plan("ts-8", TS8)}
    live_values = {"config": {"map": {"ts-4": device_plugin_configs.config_text(TS4), "mig-mixed": device_plugin_configs.config_text(MIG),
                                      "old": device_plugin_configs.config_text(TS4)}}}
    live_nodes = [{"metadata": {"name": "t4-1", "labels": {device_plugin_configs.CONFIG_LABEL: "ts-4"}}},
                  {"metadata": {"name": "a100-9", "labels": {device_plugin_configs.CONFIG_LABEL: "mig-mixed"}}},
                  {"metadata": {"name": "lost", "labels": {device_plugin_configs.CONFIG_LABEL: "gone"}}},
                  {"metadata": {"name": "cpu-1", "labels": {}}}]
    sets = device_plugin_configs.config_sets(nodes, {"ts-8": TS8}, {"ts-4": TS4}, live_values, live_nodes)
    # Install: everything deployed plus the new config, so t4-1 keeps ts-4 until relabelled.
    assert sorted(sets["install"]) == ["mig-mixed", "old", "ts-4", "ts-8"]
    # Final: ts-8 (planned), ts-4 (another inventory node), mig-mixed (a live label); "old" goes.
    assert sorted(sets["final"]) == ["mig-mixed", "ts-4", "ts-8"]
    assert sets["unknown"] == ["lost: its label nvidia.com/device-plugin.config=gone names a config that neither "
                               "the inventory nor the deployed release has; its device plugin cannot start "
                               "(config-manager exits)"]
    values = helm_values.device_plugin_values(nodes, sets["install"], rollout_configs=sets["final"])
    pruned = helm_values.device_plugin_values(nodes, sets["final"], rollout_configs=sets["final"])
    assert "old" in values["config"]["map"] and "old" not in pruned["config"]["map"]
    assert values["podAnnotations"] == pruned["podAnnotations"]


def test_config_sets_on_a_new_cluster():
    nodes = {"t4-1": _plan("ts-4", TS4)}
    sets = device_plugin_configs.config_sets(nodes, {"ts-4": TS4}, None, {}, [{"metadata": {"name": "t4-1", "labels": {}}}])
    assert sets == {"install": {"ts-4": TS4}, "final": {"ts-4": TS4}, "unknown": []}


def test_percentages_resolve_as_ansible_serial_and_are_capped():
    from ansible.utils.helpers import pct_to_int

    for count in (1, 7, 12, 100, 1000):
        for wave in ("1%", "10%", "33%", "100%"):
            assert node_rollout.wave_sizes([wave], count) == [pct_to_int(wave, count)]
    assert node_rollout.wave_sizes([1, "10%", "100%"], 100) == [1, 10, 100]
    assert node_rollout.wave_sizes([1, "10%", "100%"], 100, 5) == [1, 5, 5]
    assert node_rollout.wave_sizes([1, "10%", "100%"], 100, 0) == [1, 10, 100]
    assert node_rollout.wave_sizes(["2", 3], 10, 2) == [2, 2]


@pytest.mark.parametrize("waves,max_nodes,message", [
    ([0], 5, "must be at least one node"),
    (["ten"], 5, "use a node count"),
    ([], 5, "at least one wave size"),
    ([1], -1, "whole number >= 0"),
])
def test_bad_waves_are_refused(waves, max_nodes, message):
    with pytest.raises(ValueError) as info:
        node_rollout.wave_sizes(waves, 10, max_nodes)
    assert message in str(info.value)
