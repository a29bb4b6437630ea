"""The device plugin's restart around a MIG change, on a real control plane
(tests/controlplane.py): gpu_mig's pause labels the node, the real DaemonSet controller takes
the chart's pods off it (their node affinity) and puts them back when the label goes, and the
node agent's device plugin advertises what the node has when its new pod starts; the wait reads
the real Node's allocatable. Drains themselves: tests/test_drain_control_plane.py."""
import os

import pytest

import cluster_objects as objects
from controlplane import wait_for
from gpuprov.planning import plan_inventory

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLES = os.path.join(REPO, "examples", "inventory.yml")
PLAYBOOK = os.path.join(REPO, "tests", "playbooks", "node_rollout.yml")
NODE = "gpu-a100-01"

pytestmark = pytest.mark.control_plane


@pytest.fixture(scope="module")
def plan():
    return plan_inventory([EXAMPLES]).result["nodes"][NODE]


def operand_pods(cluster):
    return {p.metadata.name: p.metadata.uid for p in cluster.core().list_namespaced_pod(objects.PLUGIN_NAMESPACE).items
            if p.spec.node_name == NODE and p.status.phase == "Running" and not p.metadata.deletion_timestamp}


def gpu_node(cluster, plan, advertised_before, advertised_after):
    """NODE runs the chart's plugin and GFD with its plan's config; its plugin advertised
    ADVERTISED_BEFORE when it started, and would advertise ADVERTISED_AFTER if it started now
    (the MIG layout changed underneath it)."""
    config = plan["device_plugin"]["config_name"]
    cluster.add_node(NODE, labels={"nvidia.com/device-plugin.config": config, "nvidia.com/gpu.present": "true"},
                     plugin={"devices": advertised_before})
    for manifest in [objects.namespace(objects.PLUGIN_NAMESPACE),
                     objects.device_plugin_configmap({"exclusive": "version: v1\n", config: "version: v1\n"}),
                     *objects.device_plugin_daemonsets(default_config="exclusive")]:
        cluster.create(manifest)
    before = wait_for(lambda: (lambda pods: pods if len(pods) == 2 else None)(operand_pods(cluster)),
                      what="the plugin and GFD pods")
    wait_for(lambda: allocatable(cluster) == stringly(advertised_before), what="the plugin's first resources")
    cluster.add_node(NODE, labels={"nvidia.com/device-plugin.config": config, "nvidia.com/gpu.present": "true"},
                     plugin={"devices": advertised_after})
    return before


def stringly(resources):
    return dict((k, str(v)) for k, v in resources.items())


def allocatable(cluster):
    return dict((k, v) for k, v in (cluster.core().read_node(NODE).status.allocatable or {}).items()
                if k.startswith("nvidia.com/"))


def run(cluster, tmp_path, **variables):
    variables = dict({"gpuprov_drain_timeout": 20, "gpuprov_drain_retry_delay": 1, "gpu_mig_poll_interval": 1,
                      "gpu_mig_operand_timeout": 30, "gpu_mig_resources_timeout": 5}, **variables)
    return cluster.run_playbook(PLAYBOOK, tmp_path, {NODE: {}}, variables)


def test_a_mig_change_restarts_the_plugin_and_waits_for_the_new_resources(cluster, tmp_path, plan):
    stale = {"nvidia.com/mig-1g.10gb": 28}
    before = gpu_node(cluster, plan, stale, plan["resources"])

    proc = run(cluster, tmp_path)  # drain and uncordon alone: the plugin keeps its old devices
    assert proc.returncode == 0, proc.stdout
    assert allocatable(cluster) == stringly(stale)
    assert operand_pods(cluster) == before

    proc = run(cluster, tmp_path, mig_change=True, gpuprov_plan=plan)
    assert proc.returncode == 0, proc.stdout
    after = operand_pods(cluster)
    # The DaemonSet controller took both pods off the node for the pause and made new ones.
    assert len(after) == 2 and not set(after.values()) & set(before.values())
    stops = [e["pod"] for e in cluster.agent.events() if e["event"] == "stop"]
    assert sorted(stops) == sorted("%s/%s" % (objects.PLUGIN_NAMESPACE, name) for name in before)
    node = cluster.core().read_node(NODE)
    assert "gpuprov.io/gpu-operands" not in node.metadata.labels
    # What the new plugin advertises (a resource only the old one had would stay in capacity at 0,
    # as the kubelet keeps a resource whose plugin went away).
    assert allocatable(cluster) == dict({k: "0" for k in stale}, **stringly(plan["resources"]))
    assert not node.spec.unschedulable


def test_a_plugin_that_advertises_other_devices_keeps_the_node_cordoned(cluster, tmp_path, plan):
    gpu_node(cluster, plan, {"nvidia.com/gpu": 8}, {"nvidia.com/gpu": 8})
    proc = run(cluster, tmp_path, mig_change=True, gpuprov_plan=plan)
    assert proc.returncode != 0
    assert "gpu-a100-01: allocatable nvidia.com/mig-1g.10gb is 0, the plan advertises 16" in proc.stdout, proc.stdout
    assert "gpu-a100-01: allocatable nvidia.com/gpu is 8, the plan advertises none" in proc.stdout
    assert cluster.core().read_node(NODE).spec.unschedulable
