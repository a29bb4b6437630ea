"""`fit -o pods` with `autoscale`: an autoscaling/v2 HorizontalPodAutoscaler per Deployment whose
maxReplicas is exactly the slots fit reserved, checked with kubernetes-validate (1.31, strict)."""
import os

import pytest
import yaml

from test_fit import fit_json, write
from testlib import REPO

kubernetes_validate = pytest.importorskip("kubernetes_validate")

AUTOSCALE = {"metric": "inference_qps", "target": 3000, "min": 2}


def pods(gpuprov, path):
    code, out, err = gpuprov("fit", path, "-o", "pods")
    assert code == 0, err
    documents = [d for d in yaml.safe_load_all(out) if d]
    for document in documents:
        kubernetes_validate.validate(document, "1.31", strict=True)  # raises on a bad object
    return documents, out


def kinds(documents, kind):
    return dict((d["metadata"]["name"], d) for d in documents if d["kind"] == kind)


def slots_per_node(data, workload):
    """{node: copies of ``workload``} as `fit -o json` packed them."""
    nodes = {}
    for gpu in data["gpus"]:
        for item in gpu["workloads"]:
            if item["workload"] == workload:
                nodes[gpu["node"]] = nodes.get(gpu["node"], 0) + 1
    return nodes


def test_the_hpa_scales_within_the_slots_fit_packed(gpuprov):
    path = os.path.join(REPO, "examples", "fit", "autoscale.yaml")
    documents, out = pods(gpuprov, path)
    deployments, hpas = kinds(documents, "Deployment"), kinds(documents, "HorizontalPodAutoscaler")
    assert sorted(deployments) == ["batch", "chat"] and sorted(hpas) == ["chat"]
    hpa = hpas["chat"]
    assert hpa["apiVersion"] == "autoscaling/v2"
    assert hpa["spec"]["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": "chat"}
    assert hpa["spec"]["minReplicas"] == 2
    # Exactly the slots fit reserved for Chat: its 4 copies (MIG instances), no more.
    assert hpa["spec"]["maxReplicas"] == sum(slots_per_node(fit_json(gpuprov, path), "Chat").values()) == 4
    assert hpa["spec"]["metrics"] == [{"type": "Pods", "pods": {
        "metric": {"name": "inference_qps"}, "target": {"type": "AverageValue", "averageValue": "3000"}}}]
    # The HPA owns the scale: the Deployment leaves replicas out; the one without autoscale keeps it.
    assert "replicas" not in deployments["chat"]["spec"] and deployments["batch"]["spec"]["replicas"] == 1
    assert "2 Deployment(s), 1 HorizontalPodAutoscaler(s)" in out.splitlines()[0]
    assert "# autoscaled by the HPA below: 2 to 4 replicas, the slots fit reserved here" in out


def test_a_workload_spread_over_nodes_gets_an_hpa_per_deployment_bounded_by_each_node(gpuprov, tmp_path):
    # Six 30 GiB copies, two per A100-80GB, four GPUs of two per node: two nodes, two Deployments.
    path = write(tmp_path, {"workloads": [{"name": "Chat", "memory": 30, "replicas": 6, "isolation": "hard",
                                           "autoscale": dict(AUTOSCALE, min=3, target="2.5k")}],
                            "pool": {"model": "A100-80GB", "count": 4, "gpus_per_node": 2}})
    documents, _ = pods(gpuprov, path)
    hpas = kinds(documents, "HorizontalPodAutoscaler")
    slots = slots_per_node(fit_json(gpuprov, path), "Chat")
    deployments = kinds(documents, "Deployment")
    by_node = dict((d["spec"]["template"]["spec"]["nodeSelector"]["kubernetes.io/hostname"], name)
                   for name, d in deployments.items())
    assert sorted(hpas) == sorted(deployments) and len(hpas) == len(slots) == 2
    for node, copies in slots.items():
        assert hpas[by_node[node]]["spec"]["maxReplicas"] == copies
        assert hpas[by_node[node]]["spec"]["scaleTargetRef"]["name"] == by_node[node]
    assert sum(h["spec"]["minReplicas"] for h in hpas.values()) == 3
    assert all(h["spec"]["metrics"][0]["pods"]["target"]["averageValue"] == "2.5k" for h in hpas.values())


def test_namespaced_hpas_follow_their_deployments(gpuprov, tmp_path):
    path = write(tmp_path, {"workloads": [{"name": "Chat", "memory": 18, "replicas": 2, "autoscale": AUTOSCALE}],
                            "pool": {"model": "A100-80GB", "count": 1}})
    code, out, err = gpuprov("fit", path, "-o", "pods", "-n", "serving")
    assert code == 0, err
    documents = [d for d in yaml.safe_load_all(out) if d]
    assert sorted((d["kind"], d["metadata"]["namespace"]) for d in documents) == [
        ("Deployment", "serving"), ("HorizontalPodAutoscaler", "serving")]


@pytest.mark.parametrize("autoscale,expected", [
    (dict(AUTOSCALE, min=5), "workload Chat: autoscale.min: 5 is more than the 4 replicas fit packs"),
    (dict(AUTOSCALE, max=8), "workload Chat: autoscale: unknown key(s) max; allowed: metric, target, min"),
    (dict(AUTOSCALE, target=0), "workload Chat: autoscale.target: must be a Kubernetes quantity above 0"),
    (dict(AUTOSCALE, target="lots"), "workload Chat: autoscale.target: must be a Kubernetes quantity above 0"),
    ({"target": 3000}, "workload Chat: autoscale.metric: required"),
    (dict(AUTOSCALE, metric="qps{job=x}"), "workload Chat: autoscale.metric: required"),
    (dict(AUTOSCALE, min=0), "workload Chat: autoscale.min: must be a positive integer"),
    ("yes", "workload Chat: autoscale: must be a mapping {metric, target, min}"),
])
def test_bad_autoscale_is_exit_2_naming_the_field(gpuprov, tmp_path, autoscale, expected):
    path = write(tmp_path, {"workloads": [{"name": "Chat", "memory": 18, "replicas": 4, "autoscale": autoscale}],
                            "pool": {"model": "A100-80GB", "count": 2}})
    code, out, err = gpuprov("fit", path, "-o", "pods")
    assert code == 2 and out == ""
    assert expected in err, err
