"""What a molecule scenario puts on the test control plane (tests/controlplane.py) for its
localhost node: the Node's spec for the node agent and the objects to create with the real
kubernetes.core.k8s module.

    python tests/molecule_cluster.py gpu-node --plan PLAN.json --nvml-state STATE.json
    python tests/molecule_cluster.py workload --node NAME
    python tests/molecule_cluster.py planned-nodes --plan FLEET.json --dir DIR

prints one JSON document: {"node": {...node agent spec...}, "manifests": [...]}.

gpu-node: a GPU node running NVIDIA's device plugin and GFD DaemonSets as the chart renders them
for gpuprov (the pause affinity, the config-manager reading the node's config label, the
ConfigMap holding the node's planned config). The node agent runs the plugin pod as a holder of
the node's GPUs in the fake NVML (so a MIG change fails while it runs) and publishes what the
plugin advertises from that NVML state under the node's config (tests/fake_device_plugin.py).

planned-nodes: for every node of a fleet plan (`gpuprov plan -o json`), a fake NVML state in DIR
with the node's GPUs as planned (MIG layouts already made: what the gpu_device_plugin role finds
after the node converge) and the node agent's spec of a GPU node whose device plugin advertises
it; printed as {"nodes": {NAME: spec}}.

workload: a team's Deployment with a PodDisruptionBudget that allows one disruption, and a
DaemonSet pod, on the node: what a drain evicts (the Deployment's pod) and leaves (the
DaemonSet's).
"""
import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "collections"))

import cluster_objects as objects  # noqa: E402
from ansible_collections.gpuprov.gpu.plugins.plugin_utils import device_plugin_configs  # noqa: E402

TEAM = "team"


def gpu_node(plan, nvml_state):
    config_name = plan["device_plugin"]["config_name"]
    labels = {"feature.node.kubernetes.io/pci-10de.present": "true", device_plugin_configs.CONFIG_LABEL: config_name}
    node = {"labels": labels, "plugin": {"nvml_state": nvml_state}, "holder": {"nvml_state": nvml_state}}
    manifests = [objects.namespace(objects.PLUGIN_NAMESPACE),
                 objects.device_plugin_configmap({config_name: device_plugin_configs.config_text(plan["device_plugin"]["config"])}),
                 *objects.device_plugin_daemonsets(default_config=config_name)]
    return {"node": node, "manifests": manifests}


def planned_nodes(fleet, folder):
    import fake_device_plugin
    nodes = {}
    for host, node in sorted(fleet["nodes"].items()):
        state = fake_device_plugin.write_planned_state(os.path.join(folder, "%s-nvml.json" % host), node)
        nodes[host] = {"labels": {"feature.node.kubernetes.io/pci-10de.present": "true"},
                       "plugin": {"nvml_state": state}}
    return {"nodes": nodes}


def workload(node):
    manifests = [objects.namespace(TEAM),
                 objects.deployment("web", TEAM, replicas=1, node_selector={"kubernetes.io/hostname": node}),
                 objects.pod_disruption_budget("web", TEAM, "web", 0),
                 objects.gpu_daemonset("node-exporter", TEAM, node=node)]
    # The exporter holds no GPUs: it only stands for a DaemonSet pod a drain must leave.
    manifests[-1]["spec"]["template"]["metadata"]["annotations"] = {}
    return {"node": {"labels": {}}, "manifests": manifests}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    gpu = sub.add_parser("gpu-node")
    gpu.add_argument("--plan", required=True, help="the node's plan (gpuprov.gpu.node_plan) as a JSON file")
    gpu.add_argument("--nvml-state", required=True, help="the node's fake NVML state file")
    work = sub.add_parser("workload")
    work.add_argument("--node", required=True)
    fleet = sub.add_parser("planned-nodes")
    fleet.add_argument("--plan", required=True, help="the fleet's plan (gpuprov plan -o json) as a JSON file")
    fleet.add_argument("--dir", required=True, help="where the nodes' fake NVML states go")
    args = parser.parse_args(argv)
    if args.command == "gpu-node":
        with open(args.plan) as handle:
            document = gpu_node(json.load(handle), os.path.abspath(args.nvml_state))
    elif args.command == "planned-nodes":
        with open(args.plan) as handle:
            document = planned_nodes(json.load(handle), os.path.abspath(args.dir))
    else:
        document = workload(args.node)
    json.dump(document, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
