"""HAMi's cluster side (hami_cluster.py) and `gpuprov export hami`, checked against HAMi's real
chart files (../shared/reference/real-world/hami, v2.10.0; HAMi is not a Go module tests/peers
pins) where they are at hand, and NVIDIA's device-plugin chart values from the Go module cache."""
import json
import os
import re

import pytest
import yaml

from ansible_collections.gpuprov.gpu.plugins.plugin_utils import device_plugin_configs, gpu_operands, hami_cluster, helm_values
from ansible_collections.gpuprov.gpu.tests.unit.plugins.test_support.upstream_sources import device_plugin_chart_values
from gpuprov.planning import plan_inventory
from test_plan_cli import write_inventory
from testlib import SHARED_REFERENCE

HAMI = os.path.join(SHARED_REFERENCE, "hami")
needs_chart = pytest.mark.skipif(not os.path.isdir(HAMI), reason="../shared/reference/real-world/hami (HAMi's chart "
                                                                  "files) is not beside the repository")

HOSTS = {
    "gpu-l20-01": {"gpuprov_gpu_model": "L20", "gpuprov_gpu_count": 4,
                   "gpuprov_sharing": {"strategy": "hami", "hami": {"split_count": 8}}},
    "gpu-4090-01": {"gpuprov_gpu_model": "NVIDIA GeForce RTX 4090", "gpuprov_gpu_count": 2,
                    "gpuprov_sharing": {"strategy": "hami", "hami": {"split_count": 4, "memory_scaling": 1.5}}},
    "gpu-4090-02": {"gpuprov_gpu_model": "RTX-4090", "gpuprov_gpu_count": 2,
                    "gpuprov_sharing": {"strategy": "hami", "hami": {"split_count": 4, "memory_scaling": 1.5}}},
    "gpu-t4-01": {"gpuprov_gpu_model": "T4", "gpuprov_sharing": {"strategy": "time-slicing", "replicas": 4}},
}


@pytest.fixture
def fleet(tmp_path):
    return plan_inventory([write_inventory(tmp_path, HOSTS)]).result


def _values_yaml():
    with open(os.path.join(HAMI, "values.yaml")) as handle:
        return yaml.safe_load(handle)


def _has_path(document, path):
    for key in path:
        if not isinstance(document, dict) or key not in document:
            return False
        document = document[key]
    return True


def _paths(document, prefix=()):
    for key, value in document.items():
        if isinstance(value, dict) and value and key != "podAnnotations":
            yield from _paths(value, prefix + (key,))
        else:
            yield prefix + (key,)


def test_node_config_one_entry_per_hami_node(fleet):
    document = hami_cluster.node_config(fleet["nodes"])
    assert [e["name"] for e in document["nodeconfig"]] == ["gpu-4090-01", "gpu-4090-02", "gpu-l20-01"]
    assert document["nodeconfig"][2] == {"name": "gpu-l20-01", "operatingmode": "hami-core", "devicesplitcount": 8,
                                         "devicememoryscaling": 1, "devicecorescaling": 1}
    # Node names can be mapped and are checked.
    mapped = hami_cluster.node_config(fleet["nodes"], {"gpu-l20-01": "l20.example.com"})
    assert mapped["nodeconfig"][2]["name"] == "l20.example.com"
    with pytest.raises(hami_cluster.HamiRenderError, match="gpu-l20-01: 'L20_01' is not a valid Kubernetes node name"):
        hami_cluster.node_config(fleet["nodes"], {"gpu-l20-01": "L20_01"})


@needs_chart
def test_node_config_fields_are_those_hami_reads(fleet):
    example = json.loads(_values_yaml()["devicePlugin"]["nodeConfiguration"]["config"])["nodeconfig"][0]
    # devicecorescaling is not in the chart's example; HAMi's NVIDIA device code reads it per
    # node (Project-HAMi/HAMi v2.10.0 pkg/device/nvidia; the exact file UNVERIFIED).
    known = set(example) | {"devicecorescaling"}
    for entry in hami_cluster.node_config(fleet["nodes"])["nodeconfig"]:
        assert set(entry) <= known, set(entry) - known
        for key in set(entry) & set(example):
            assert type(entry[key]) is type(example[key]) or {type(entry[key]), type(example[key])} <= {int, float}
        assert entry["operatingmode"] == example["operatingmode"]


@needs_chart
def test_values_set_only_keys_of_the_real_chart(fleet):
    real = _values_yaml()
    with open(os.path.join(HAMI, "Chart.yaml")) as handle:
        chart = yaml.safe_load(handle)
    assert chart["name"] == hami_cluster.CHART_NAME and chart["version"] == hami_cluster.CHART_VERSION
    values = hami_cluster.values(fleet["nodes"], runtime_class_name="nvidia")
    for path in _paths(values):
        assert _has_path(real, path), "hami chart %s has no value %s" % (hami_cluster.CHART_VERSION, ".".join(path))
    # Most common settings become the cluster defaults (2 of 3 HAMi nodes use split 4).
    assert values["devicePlugin"]["deviceSplitCount"] == 4 and values["devicePlugin"]["deviceMemoryScaling"] == 1.5
    assert values["devicePlugin"]["nodeConfiguration"] == {"externalConfigName": hami_cluster.CONFIGMAP_NAME}
    # The label HAMi's plugin selects is the one gpuprov puts on HAMi nodes.
    assert real["devicePlugin"]["nvidiaNodeSelector"] == {hami_cluster.NODE_LABEL_KEY: hami_cluster.NODE_LABEL_VALUE}
    # The resources the plan tells pods to request are the chart's resource names.
    requests = fleet["nodes"]["gpu-l20-01"]["hami"]["requests"]
    assert requests == {"count": real["resourceName"], "memory_mib": real["resourceMem"],
                        "memory_percent": real["resourceMemPercentage"], "cores_percent": real["resourceCores"]}


@needs_chart
def test_configmap_is_what_the_chart_would_read(fleet):
    with open(os.path.join(HAMI, "device-plugin-configmap.yaml.tpl")) as handle:
        template = handle.read()
    # The chart creates its own ConfigMap only without externalConfigName, under key config.json.
    assert "not .Values.devicePlugin.nodeConfiguration.externalConfigName" in template
    assert re.search(r"^\s+%s: \|" % re.escape(hami_cluster.CONFIGMAP_KEY), template, re.M)
    configmap = hami_cluster.configmap(fleet["nodes"])
    assert configmap["metadata"]["labels"]["app.kubernetes.io/component"] == "hami-device-plugin"
    assert json.loads(configmap["data"]["config.json"]) == hami_cluster.node_config(fleet["nodes"])


def test_config_digest_rolls_the_plugin_on_change(fleet):
    first = hami_cluster.values(fleet["nodes"])["devicePlugin"]["podAnnotations"]
    fleet["nodes"]["gpu-l20-01"]["hami"]["split_count"] = 6
    assert hami_cluster.values(fleet["nodes"])["devicePlugin"]["podAnnotations"] != first


def test_labels_on_hami_nodes_and_removed_elsewhere(fleet):
    patches = dict((p["metadata"]["name"], p["metadata"]["labels"]) for p in hami_cluster.label_patches(fleet["nodes"]))
    assert patches == {"gpu-4090-01": {"gpu": "on"}, "gpu-4090-02": {"gpu": "on"}, "gpu-l20-01": {"gpu": "on"},
                       "gpu-t4-01": {"gpu": None}}
    commands = hami_cluster.kubectl_label_commands(hami_cluster.label_patches(fleet["nodes"]))
    assert ["kubectl", "label", "node", "gpu-t4-01", "--overwrite", "gpu-"] in commands


def test_nvidia_plugin_kept_off_hami_nodes(fleet):
    chart_terms = device_plugin_chart_values()["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert hami_cluster.NVIDIA_PLUGIN_DEFAULT_TERMS == chart_terms
    values = helm_values.device_plugin_values(fleet["nodes"], fleet["device_plugin_configs"])
    terms = values["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    # Every term the chart ORs keeps its own expression, the MIG-change pause rule
    # (gpu_operands.gpu_operand_affinity) and excludes gpu=on.
    assert len(terms) == len(chart_terms)
    for mine, theirs in zip(terms, chart_terms):
        assert mine["matchExpressions"] == theirs["matchExpressions"] + [
            {"key": "gpuprov.io/gpu-operands", "operator": "NotIn", "values": ["paused"]},
            {"key": "gpu", "operator": "NotIn", "values": ["on"]}]
    # HAMi nodes get no NVIDIA config; the rest do.
    assert set(device_plugin_configs.config_map_data(fleet["nodes"], fleet["device_plugin_configs"])) == {"exclusive", "ts-4"}


def test_fleet_without_hami_leaves_the_nvidia_affinity_alone(tmp_path):
    result = plan_inventory([write_inventory(tmp_path, {"t": HOSTS["gpu-t4-01"]})]).result
    # Only the MIG-change pause rule every GPU DaemonSet carries; no HAMi term.
    affinity = helm_values.device_plugin_values(result["nodes"], result["device_plugin_configs"])["affinity"]
    assert affinity == gpu_operands.gpu_operand_affinity()


def test_export_hami(gpuprov, tmp_path):
    inventory = write_inventory(tmp_path, HOSTS)
    out_dir = tmp_path / "out"
    code, out, err = gpuprov("export", "-i", inventory, "hami", "--output-dir", str(out_dir))
    assert code == 0, err
    names = sorted(os.listdir(out_dir))
    assert names == ["hami-device-plugin-configmap.yaml", "hami-install.sh", "hami-node-labels.yaml", "hami-values.yaml"]
    configmap = yaml.safe_load((out_dir / "hami-device-plugin-configmap.yaml").read_text())
    assert [e["name"] for e in json.loads(configmap["data"]["config.json"])["nodeconfig"]] == [
        "gpu-4090-01", "gpu-4090-02", "gpu-l20-01"]
    labels = list(yaml.safe_load_all((out_dir / "hami-node-labels.yaml").read_text()))
    assert {d["metadata"]["name"]: d["metadata"]["labels"]["gpu"] for d in labels}["gpu-t4-01"] is None
    values = yaml.safe_load((out_dir / "hami-values.yaml").read_text())
    assert values["devicePlugin"]["nodeConfiguration"]["externalConfigName"] == configmap["metadata"]["name"]
    script = (out_dir / "hami-install.sh").read_text()
    assert "helm upgrade --install hami hami-charts/hami --version 2.10.0 --namespace kube-system" in script
    assert script.index("kubectl apply") < script.index("helm upgrade")
    assert os.access(out_dir / "hami-install.sh", os.X_OK)
    # helm-values keeps the NVIDIA plugin off the HAMi nodes.
    code, out, err = gpuprov("export", "-i", inventory, "helm-values")
    assert code == 0 and "operator: NotIn" in out


def test_export_hami_without_hami_nodes_is_bad_input(gpuprov, tmp_path):
    inventory = write_inventory(tmp_path, {"t": HOSTS["gpu-t4-01"]})
    code, out, err = gpuprov("export", "-i", inventory, "hami")
    assert code == 2 and out == "" and "no planned node uses strategy hami" in err
