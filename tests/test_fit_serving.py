"""fit for real serving: multi-GPU workloads, HAMi packing, and `fit -o pods` checked with
kubernetes-validate (Kubernetes 1.31, strict)."""
import json

import pytest
import yaml

from test_fit import _plan_inventory, write

kubernetes_validate = pytest.importorskip("kubernetes_validate")

A100_80 = "A100-80GB"


def pods(gpuprov, path, *extra):
    code, out, err = gpuprov("fit", path, "-o", "pods", *extra)
    assert code == 0, err
    documents = [d for d in yaml.safe_load_all(out) if d]
    for document in documents:
        kubernetes_validate.validate(document, "1.31", strict=True)  # raises on a bad object
    return documents, out


def by_name(documents):
    return dict((d["metadata"]["name"], d) for d in documents)


def container(deployment):
    [only] = deployment["spec"]["template"]["spec"]["containers"]
    return only


def test_two_gpu_workload_takes_two_whole_gpus_of_one_node(gpuprov, tmp_path):
    workloads = [{"name": "Llama-70B", "memory": 140, "gpus": 2, "replicas": 2},
                 {"name": "Chat", "memory": 18, "isolation": "hard"}]
    path = write(tmp_path, {"workloads": workloads, "pool": {"model": A100_80, "count": 8, "gpus_per_node": 4}})
    plan, data = _plan_inventory(gpuprov, tmp_path, path)
    parts = {}
    for gpu in data["gpus"]:
        for w in gpu["workloads"]:
            if w["workload"] == "Llama-70B":
                assert gpu["sharing"] == "whole" and len(gpu["workloads"]) == 1
                assert w["memory_gib"] == 70 and w["resources"] == {"nvidia.com/gpu": 2}
                parts.setdefault(w["name"].split("[")[0], []).append((gpu["node"], gpu["index"]))
    # Each copy: two GPUs, one node.
    assert sorted(parts) == ["Llama-70B#1", "Llama-70B#2"]
    for copy, gpus in parts.items():
        assert len(gpus) == 2 and len(set(node for node, _ in gpus)) == 1, (copy, gpus)
    assert data["gpus_used"] == 5 and sum(n["gpu_count"] for n in plan["nodes"].values()) == 8

    documents, _ = pods(gpuprov, path)
    llama = [d for d in documents if d["metadata"]["labels"]["app.kubernetes.io/name"] == "llama-70b"]
    assert sum(d["spec"]["replicas"] for d in llama) == 2
    assert all(container(d)["resources"]["limits"]["nvidia.com/gpu"] == 2 for d in llama)


def test_numa_nodes_keep_a_workloads_gpus_together(gpuprov, tmp_path):
    # 4 GPUs per node on 2 NUMA nodes (GPUs 0-1, 2-3). The MIG GPU opens the node and the pair
    # joins it: in that order the pair would sit on GPUs 1-2, across the two NUMA nodes.
    workloads = [{"name": "Hard", "memory": 18, "isolation": "hard"}, {"name": "Pair", "memory": 150, "gpus": 2}]
    pool = {"model": A100_80, "count": 4, "gpus_per_node": 4, "numa_nodes": 2}
    path = write(tmp_path, {"workloads": workloads, "pool": pool})
    _plan, data = _plan_inventory(gpuprov, tmp_path, path)
    numa = {}
    for gpu in data["gpus"]:
        for w in gpu["workloads"]:
            numa.setdefault(w["workload"], set()).add(gpu["numa_node"])
            assert gpu["numa_node"] == gpu["index"] // 2
    assert len(numa["Pair"]) == 1 and data["nodes_used"] == 1
    # Without topology the same pool lists the GPUs in packing order: the pair spans GPUs 1-2.
    pool.pop("numa_nodes")
    path = write(tmp_path, {"workloads": workloads, "pool": pool}, "flat.yaml")
    _plan, data = _plan_inventory(gpuprov, tmp_path, path)
    assert sorted(g["index"] for g in data["gpus"] if g["workloads"][0]["workload"] == "Pair") == [1, 2]
    assert all("numa_node" not in g for g in data["gpus"])


def test_bad_multi_gpu_workloads(gpuprov, tmp_path):
    workloads = [{"name": "Hard2", "memory": 20, "gpus": 2, "isolation": "hard"},
                 {"name": "Frac2", "memory": 20, "gpus": 2, "compute": 0.5},
                 {"name": "Wide", "memory": 100, "gpus": 16},
                 {"name": "Zero", "memory": 10, "gpus": 0}]
    path = write(tmp_path, {"workloads": workloads, "pool": {"model": A100_80, "gpus_per_node": 8}})
    code, out, err = gpuprov("fit", path)
    assert code == 2 and out == ""
    assert "workload Hard2: gpus: a MIG instance is part of one GPU" in err
    assert "workload Frac2: compute: a workload on 2 whole GPUs has all their compute" in err
    assert "workload Wide: gpus: 16 GPUs of one node, but no node of the pool has that many" in err
    assert "workload Zero: gpus: must be an integer from 1" in err


def test_hami_packs_soft_workloads_with_memory_caps(gpuprov, tmp_path):
    workloads = [{"name": "Embed", "memory": 6, "replicas": 3, "compute": 0.2},
                 {"name": "ASR", "memory": 10, "compute": "30%"}, {"name": "TTS", "memory": 8}]
    path = write(tmp_path, {"workloads": workloads, "pool": {"model": "L20", "count": 2, "gpus_per_node": 2}})
    plan, data = _plan_inventory(gpuprov, tmp_path, path, "--soft-sharing", "hami")
    assert data["gpus_used"] == 1 and data["gpus"][0]["sharing"] == "hami"
    [node] = plan["nodes"].values()
    assert node["strategy"] == "hami" and node["hami"]["split_count"] == 5
    assert node["resources"] == {"nvidia.com/gpu": 10}  # 2 GPUs x split 5
    resources = dict((w["name"], w["resources"]) for w in data["gpus"][0]["workloads"])
    assert resources["ASR"] == {"nvidia.com/gpu": 1, "nvidia.com/gpumem": 10240, "nvidia.com/gpucores": 30}
    assert resources["TTS"] == {"nvidia.com/gpu": 1, "nvidia.com/gpumem": 8192}
    documents, _ = pods(gpuprov, path, "--soft-sharing", "hami")
    asr = by_name(documents)["asr"]
    assert {k: v for k, v in container(asr)["resources"]["limits"].items() if k.startswith("nvidia.com/")} == \
        resources["ASR"]
    # HAMi shows the container its cap: the slot is all the memory it sees.
    assert asr["spec"]["template"]["metadata"]["annotations"]["gpuprov.io/gpu-memory-gib"] == "10.00"


def test_hami_never_puts_more_than_ten_on_a_gpu(gpuprov, tmp_path):
    workloads = [{"name": "Tiny", "memory": 1, "replicas": 11}]
    path = write(tmp_path, {"workloads": workloads, "pool": {"model": "L20"}})
    code, out, err = gpuprov("fit", path, "-o", "json", "--soft-sharing", "hami")
    assert code == 0, err
    assert sorted(len(g["workloads"]) for g in json.loads(out)["gpus"]) == [1, 10]


def test_pods_guaranteed_with_static_cpu_manager_and_burstable_without(gpuprov, tmp_path):
    workloads = [{"name": "Chat Bot_v2", "memory": 18, "isolation": "hard", "cpu": 2.5, "host_memory": "16Gi",
                  "image": "vllm/vllm-openai:v0.11.0"},
                 {"name": "Notebook", "memory": 20, "replicas": 2}]
    static = write(tmp_path, {"workloads": workloads,
                              "pool": {"model": A100_80, "count": 4, "gpus_per_node": 4,
                                       "cpu_manager_policy": "static"}}, "static.yaml")
    documents, text = pods(gpuprov, static)
    chat = by_name(documents)["chat-bot-v2"]  # sanitised to a DNS label
    limits, requests = container(chat)["resources"]["limits"], container(chat)["resources"]["requests"]
    assert limits["cpu"] == requests["cpu"] == "3"  # whole CPUs: 2.5 rounded up
    assert limits["memory"] == requests["memory"] == "16Gi"
    assert [k for k in limits if k.startswith("nvidia.com/")] == ["nvidia.com/mig-1g.20gb"]
    assert chat["spec"]["template"]["spec"]["nodeSelector"] == {"kubernetes.io/hostname": "fit-a100-80gb-01"}
    annotations = chat["spec"]["template"]["metadata"]["annotations"]
    assert annotations["gpuprov.io/gpu-memory-gib"] == "19.62"
    assert "--gpu-memory-utilization" in text
    # The inventory fit writes for that pool turns the static CPU manager on.
    plan, _data = _plan_inventory(gpuprov, tmp_path, static)
    assert all(n["kubelet"]["cpu_manager_policy"] == "static" for n in plan["nodes"].values())

    burst = write(tmp_path, {"workloads": workloads, "pool": {"model": A100_80, "count": 4, "gpus_per_node": 4}},
                  "burst.yaml")
    documents, _ = pods(gpuprov, burst)
    chat = by_name(documents)["chat-bot-v2"]
    resources = container(chat)["resources"]
    assert "cpu" not in resources["limits"] and resources["requests"]["cpu"] == "2500m"


def test_time_sliced_copies_get_their_budget_as_a_fraction(gpuprov, tmp_path):
    workloads = [{"name": "Big", "memory": 40}, {"name": "Mid", "memory": 30}]
    path = write(tmp_path, {"workloads": workloads, "pool": {"model": A100_80, "count": 1, "gpus_per_node": 1}})
    documents, _ = pods(gpuprov, path)
    big = by_name(documents)["big"]["spec"]["template"]["metadata"]["annotations"]
    # Time-slicing limits nothing: the budget fit reserved (40 GiB) over the whole GPU (80 GiB).
    assert big["gpuprov.io/gpu-memory-gib"] == "40.00" and big["gpuprov.io/gpu-memory-utilization"] == "0.50"
