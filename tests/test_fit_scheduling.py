"""`gpuprov fit -o pods` on a real control plane (tests/controlplane.py): Node objects advertise
what `gpuprov plan` says for the inventory `fit -o inventory` wrote, and the real kube-scheduler
binds every pod fit placed; an over-subscribed set gets the scheduler's own FailedScheduling
events, which `gpuprov diagnose --kubeconfig` reads back as allocation, and a pod whose
nodeSelector no node matches is named as placement."""
import json
import os

import pytest
import yaml

from controlplane import wait_for

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORKLOADS = os.path.join(REPO, "examples", "fit", "workloads.yaml")
SERVING = os.path.join(REPO, "examples", "fit", "serving.yaml")
NAMESPACE = "inference"

pytestmark = pytest.mark.control_plane


def cli(gpuprov, *args):
    code, out, err = gpuprov(*args)
    assert code == 0, err
    return out


def planned_nodes(gpuprov, tmp_path, workloads):
    inventory = tmp_path / "fit-inventory.yml"
    inventory.write_text(cli(gpuprov, "fit", workloads, "-o", "inventory"))
    return json.loads(cli(gpuprov, "plan", "-i", str(inventory), "-o", "json"))["nodes"]


def register(cluster, nodes):
    for name, plan in sorted(nodes.items()):
        cluster.add_node(name, cpu="128", memory="1024Gi", labels={"nvidia.com/gpu.present": "true"},
                         extended=plan["resources"])


def apply_manifests(cluster, text):
    from kubernetes import client
    cluster.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
    wait_for(lambda: cluster.core().list_namespaced_service_account(NAMESPACE).items, what="the ServiceAccount")
    documents = [d for d in yaml.safe_load_all(text) if d]
    for document in documents:
        document.setdefault("metadata", {}).setdefault("namespace", NAMESPACE)
        if document["kind"] == "Namespace":
            continue
        cluster.create(document)
    assert documents and all(d["kind"] in ("Deployment", "Namespace") for d in documents), documents
    return [d for d in documents if d["kind"] == "Deployment"], client


def pods(cluster):
    return cluster.core().list_namespaced_pod(NAMESPACE).items


@pytest.mark.parametrize("workloads", [WORKLOADS, SERVING])
def test_the_scheduler_binds_every_pod_fit_placed(gpuprov, cluster, tmp_path, workloads):
    nodes = planned_nodes(gpuprov, tmp_path, workloads)
    register(cluster, nodes)
    deployments, _client = apply_manifests(cluster, cli(gpuprov, "fit", workloads, "-o", "pods", "-n", NAMESPACE))
    wanted = sum(d["spec"]["replicas"] for d in deployments)
    running = wait_for(lambda: (lambda ps: ps if len(ps) == wanted and all(p.status.phase == "Running" for p in ps)
                                else None)(pods(cluster)), timeout=120, what="%d pods running" % wanted)
    for pod in running:
        node = pod.spec.node_name
        limits = {k: v for c in pod.spec.containers for k, v in (c.resources.limits or {}).items()
                  if k.startswith("nvidia.com/")}
        # Bound by the scheduler to the node fit chose, which advertises that resource.
        assert node == pod.spec.node_selector["kubernetes.io/hostname"]
        assert all(resource in nodes[node]["resources"] for resource in limits), (node, limits)
    events = cluster.core().list_namespaced_event(NAMESPACE, field_selector="reason=FailedScheduling").items
    assert events == []


def test_an_over_subscribed_set_fails_scheduling_and_diagnose_names_allocation(gpuprov, cluster, tmp_path):
    nodes = planned_nodes(gpuprov, tmp_path, WORKLOADS)
    register(cluster, nodes)
    deployments, _client = apply_manifests(cluster, cli(gpuprov, "fit", WORKLOADS, "-o", "pods", "-n", NAMESPACE))
    chat = next(d for d in deployments if d["metadata"]["name"].startswith("chat"))
    node = chat["spec"]["template"]["spec"]["nodeSelector"]["kubernetes.io/hostname"]
    resource = next(k for c in chat["spec"]["template"]["spec"]["containers"] for k in c["resources"]["limits"]
                    if k.startswith("nvidia.com/"))
    capacity = int(nodes[node]["resources"][resource])
    cluster.apps().patch_namespaced_deployment(chat["metadata"]["name"], NAMESPACE,
                                               {"spec": {"replicas": capacity + 2}})
    events = wait_for(lambda: cluster.core().list_namespaced_event(
        NAMESPACE, field_selector="reason=FailedScheduling").items, timeout=120, what="FailedScheduling events")
    assert any("Insufficient %s" % resource in e.message for e in events), [e.message for e in events]

    code, out, err = gpuprov("diagnose", "--kubeconfig", cluster.kubeconfig, "-o", "json")
    assert code in (0, 1), err
    pending = json.loads(out)["pods"]
    # The pods the scheduler could not bind (the resource's other users on the node took the
    # rest of it), each with allocation as its cause.
    unbound = sorted(p.metadata.name for p in pods(cluster) if not p.spec.node_name)
    assert len(unbound) >= 2 and all(name.startswith("chat-") for name in unbound), unbound
    assert sorted(p["name"] for p in pending) == unbound, out
    assert {p["check"] for p in pending} == {"allocation"}, json.dumps(pending, indent=1)[:3000]


def test_a_node_selector_no_node_matches_is_named_as_placement(gpuprov, cluster, tmp_path):
    nodes = planned_nodes(gpuprov, tmp_path, WORKLOADS)
    register(cluster, nodes)
    deployments, _client = apply_manifests(cluster, cli(gpuprov, "fit", WORKLOADS, "-o", "pods", "-n", NAMESPACE))
    tts = next(d for d in deployments if d["metadata"]["name"].startswith("tts"))
    cluster.apps().patch_namespaced_deployment(tts["metadata"]["name"], NAMESPACE, {"spec": {"template": {"spec": {
        "nodeSelector": {"kubernetes.io/hostname": "gpu-that-left"}}}}})
    wait_for(lambda: [e for e in cluster.core().list_namespaced_event(
        NAMESPACE, field_selector="reason=FailedScheduling").items if "node affinity/selector" in e.message],
        timeout=120, what="a FailedScheduling event for the selector")
    code, out, err = gpuprov("diagnose", "--kubeconfig", cluster.kubeconfig, "-o", "json")
    assert code in (0, 1), err
    pending = json.loads(out)["pods"]
    assert pending and all(p["name"].startswith("tts-") for p in pending), out
    assert {p["check"] for p in pending} == {"placement"}, json.dumps(pending, indent=1)[:3000]
