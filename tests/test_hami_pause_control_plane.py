"""HAMi's device plugin and the MIG pause on a real control plane. HAMi v2.10.0's chart places its
plugin by the node label gpu=on alone (charts/hami/templates/device-plugin/daemonsetnvidia.yaml:
nodeSelector from devicePlugin.nvidiaNodeSelector, no affinity), so the gpu_mig role's pause
removes that label and its resume puts it back; the real DaemonSet controller takes the pod off
the node and brings it back, and the node agent stops and starts it."""
import os

import pytest

from controlplane import wait_for

PLAYBOOK = os.path.join(os.path.dirname(os.path.abspath(__file__)), "playbooks", "operands_pause_resume.yml")
NODE = "gpu-l20-01"
HAMI_NS = "kube-system"
HAMI_LABELS = {"app.kubernetes.io/component": "hami-device-plugin", "app.kubernetes.io/instance": "hami"}

pytestmark = pytest.mark.control_plane


def hami_daemonset():
    """HAMi's device-plugin DaemonSet as its chart renders it for the placement: gpu=on."""
    return {"apiVersion": "apps/v1", "kind": "DaemonSet",
            "metadata": {"name": "hami-device-plugin", "namespace": HAMI_NS, "labels": HAMI_LABELS},
            "spec": {"selector": {"matchLabels": HAMI_LABELS},
                     "template": {"metadata": {"labels": HAMI_LABELS},
                                  "spec": {"nodeSelector": {"gpu": "on"},
                                           "containers": [{"name": "device-plugin", "image": "registry.example/hami:test",
                                                           "command": ["nvidia-device-plugin-hami"]}],
                                           "terminationGracePeriodSeconds": 30}}}}


def hami_pods(cluster):
    return [p for p in cluster.core().list_namespaced_pod(HAMI_NS, label_selector="app.kubernetes.io/component="
                                                           "hami-device-plugin").items
            if p.spec.node_name == NODE and not p.metadata.deletion_timestamp and p.status.phase == "Running"]


def test_the_pause_takes_hamis_plugin_off_by_its_label_and_the_resume_brings_it_back(cluster, tmp_path):
    cluster.add_node(NODE, labels={"gpu": "on", "feature.node.kubernetes.io/pci-10de.present": "true"})
    cluster.create(hami_daemonset())
    before = wait_for(lambda: hami_pods(cluster), what="HAMi's plugin pod on the node")[0]
    during = {}

    def at_the_change(line):
        if "MIG CHANGED: %s" % NODE in line:
            node = cluster.core().read_node(NODE)
            during["labels"] = dict(node.metadata.labels or {})
            during["pods"] = [p.metadata.uid for p in hami_pods(cluster)]

    proc = cluster.run_playbook(PLAYBOOK, tmp_path, {NODE: {}}, on_line=at_the_change)
    assert proc.returncode == 0, proc.stdout[-4000:]
    # While MIG changed: paused, gpu=on gone, HAMi's pod stopped (the role waited for it).
    assert during["labels"].get("gpuprov.io/gpu-operands") == "paused" and "gpu" not in during["labels"], during
    assert during["pods"] == [], during
    stops = [e["pod"] for e in cluster.agent.events() if e["event"] == "stop"]
    assert stops == ["%s/%s" % (HAMI_NS, before.metadata.name)], stops
    # After: the node has the labels it had, and the DaemonSet controller made a new plugin pod.
    labels = cluster.core().read_node(NODE).metadata.labels
    assert labels.get("gpu") == "on" and "gpuprov.io/gpu-operands" not in labels, labels
    after = wait_for(lambda: hami_pods(cluster), what="HAMi's plugin pod back on the node")
    assert [p.metadata.uid for p in after] != [before.metadata.uid]
