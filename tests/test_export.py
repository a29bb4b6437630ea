"""`gpuprov export`: what each kind writes, that the files are usable as they are (scripts run,
manifests validate, a mig-parted export plans back to the same MIG layouts), and bad input."""
import json
import os
import stat
import subprocess

import pytest
import yaml

# Everything the CLI will import is imported here, at collection time, as the collection's
# unit tests import plugin_utils: a module loaded before Ansible's collection loader is set
# up must not be looked up through it later.
import gpuprov.cmd_export  # noqa: F401
from ansible_collections.gpuprov.gpu.plugins.plugin_utils import (
    device_plugin_configs, device_plugin_schema, helm_values, migparted, migparted_export)
from gpuprov.planning import plan_inventory

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

EXAMPLES = os.path.join(REPO, "examples", "inventory.yml")


def _validate(obj):
    kubernetes_validate = pytest.importorskip("kubernetes_validate", reason="kubernetes-validate (dev extra) is not installed")
    kubernetes_validate.validate(obj, "1.31", strict=True)


@pytest.fixture(scope="module")
def fleet():
    return plan_inventory([EXAMPLES]).result


def export(gpuprov, *args):
    code, out, err = gpuprov("export", "-i", EXAMPLES, *args)
    assert code == 0, err
    return out


def fake_tool(tmp_path, name):
    """A stand-in `name` on PATH that logs its argv and working folder as JSON lines."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    log = tmp_path / ("%s.jsonl" % name)
    tool = bin_dir / name
    tool.write_text("#!/usr/bin/env python3\nimport json, os, sys\n"
                    "with open(%r, 'a') as f:\n"
                    "    f.write(json.dumps({'argv': sys.argv[1:], 'cwd': os.getcwd()}) + '\\n')\n" % str(log))
    tool.chmod(0o755)
    return bin_dir, log


def run_script(path, bin_dir):
    env = dict(os.environ, PATH="%s%s%s" % (bin_dir, os.pathsep, os.environ["PATH"]))
    return subprocess.run(["/bin/sh", str(path)], env=env, capture_output=True, text=True, timeout=60, cwd="/")


def test_device_plugin_to_stdout(gpuprov, fleet):
    documents = list(yaml.safe_load_all(export(gpuprov, "device-plugin")))
    configmap, nodes = documents[0], documents[1:]
    assert configmap["kind"] == "ConfigMap" and configmap["metadata"]["namespace"] == "nvidia-device-plugin"
    assert configmap["data"] == device_plugin_configs.config_map_data(fleet["nodes"], fleet["device_plugin_configs"])
    for name, text in configmap["data"].items():
        assert device_plugin_schema.problems(yaml.safe_load(text)) == [], name
    assert dict((n["metadata"]["name"], n["metadata"]["labels"]) for n in nodes) == dict(
        (h, p["labels"]) for h, p in fleet["nodes"].items())
    for document in documents:
        _validate(document)


def test_device_plugin_namespace_default_and_limit(gpuprov, fleet):
    out = export(gpuprov, "-l", "gpu_t4", "device-plugin", "-n", "gpu-operator", "--default-config", "ts-4")
    documents = list(yaml.safe_load_all(out))
    configmap = documents[0]
    assert configmap["metadata"]["namespace"] == "gpu-operator"
    assert configmap["metadata"]["annotations"][device_plugin_configs.DEFAULT_CONFIG_ANNOTATION] == "ts-4"
    # The ConfigMap is cluster-wide: limited to the T4 nodes, it still holds every config the
    # inventory's other nodes use (a missing one would stop their plugin); labels only for T4s.
    assert set(configmap["data"]) == set(fleet["device_plugin_configs"])
    assert [d["metadata"]["name"] for d in documents[1:]] == ["gpu-t4-01", "gpu-t4-02", "gpu-t4-03", "gpu-t4-04"]
    values = yaml.safe_load(export(gpuprov, "-l", "gpu-t4-01", "helm-values").split("---\n")[-1])
    assert set(values["config"]["map"]) == set(fleet["device_plugin_configs"])


def test_device_plugin_to_a_folder_and_the_label_script_runs(gpuprov, fleet, tmp_path):
    out_dir = tmp_path / "out"
    out = export(gpuprov, "device-plugin", "--output-dir", str(out_dir))
    names = sorted(os.listdir(out_dir))
    assert names == ["device-plugin-configmap.yaml", "label-nodes.sh", "node-labels.yaml"]  # no temp files left
    assert out.count("wrote") == 3
    assert stat.S_IMODE(os.stat(out_dir / "label-nodes.sh").st_mode) == 0o755
    assert list(yaml.safe_load_all((out_dir / "node-labels.yaml").read_text()))[0]["kind"] == "Node"

    bin_dir, log = fake_tool(tmp_path, "kubectl")
    proc = run_script(out_dir / "label-nodes.sh", bin_dir)
    assert proc.returncode == 0, proc.stderr
    calls = [json.loads(line)["argv"] for line in log.read_text().splitlines()]
    label = device_plugin_configs.CONFIG_LABEL
    assert calls == [["label", "node", host, "--overwrite", "%s=%s" % (label, plan["device_plugin"]["config_name"])]
                     for host, plan in sorted(fleet["nodes"].items())]

    # Same plan, same files: nothing is rewritten.
    mtimes = dict((n, os.stat(out_dir / n).st_mtime_ns) for n in names)
    out = export(gpuprov, "device-plugin", "--output-dir", str(out_dir))
    assert out.count("unchanged") == 3
    assert mtimes == dict((n, os.stat(out_dir / n).st_mtime_ns) for n in names)


def test_helm_values_and_install_script(gpuprov, fleet, tmp_path):
    out_dir = tmp_path / "values"
    export(gpuprov, "helm-values", "--output-dir", str(out_dir))
    assert sorted(os.listdir(out_dir)) == ["helm-install.sh", "nfd-values.yaml", "nvidia-device-plugin-values.yaml"]
    plugin = yaml.safe_load((out_dir / "nvidia-device-plugin-values.yaml").read_text())
    assert plugin == helm_values.device_plugin_values(fleet["nodes"], fleet["device_plugin_configs"])
    nfd = yaml.safe_load((out_dir / "nfd-values.yaml").read_text())
    assert nfd == helm_values.nfd_values()

    bin_dir, log = fake_tool(tmp_path, "helm")
    proc = run_script(out_dir / "helm-install.sh", bin_dir)
    assert proc.returncode == 0, proc.stderr
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    assert [c["argv"][:3] for c in calls] == [["repo", "add", "--force-update"],
                                             ["upgrade", "--install", "node-feature-discovery"],
                                             ["upgrade", "--install", "nvidia-device-plugin"]]
    nfd_call, plugin_call = calls[1]["argv"], calls[2]["argv"]
    assert nfd_call[3:5] == ["oci://registry.k8s.io/nfd/charts/node-feature-discovery", "--version"]
    assert nfd_call[5] == "0.19.0"
    assert plugin_call[3:6] == ["nvdp/nvidia-device-plugin", "--version", "0.20.0"]
    # The script runs helm from its own folder, so the values files it names are found.
    for call in calls[1:]:
        values_file = call["argv"][call["argv"].index("--values") + 1]
        assert os.path.exists(os.path.join(call["cwd"], values_file))
        assert os.path.samefile(call["cwd"], out_dir)


def test_helm_values_to_stdout(gpuprov, fleet):
    documents = list(yaml.safe_load_all(export(gpuprov, "helm-values")))
    assert documents == [helm_values.nfd_values(), helm_values.device_plugin_values(fleet["nodes"], fleet["device_plugin_configs"])]


def test_mig_parted_round_trip(gpuprov, fleet, tmp_path):
    """The exported mig-parted file, named per node from the exported labels, plans back to the
    same MIG instances and placements on every MIG node of the example fleet."""
    out_dir = tmp_path / "mig"
    export(gpuprov, "mig-parted", "--output-dir", str(out_dir))
    assert sorted(os.listdir(out_dir)) == ["label-mig-config.sh", "mig-config-labels.yaml", "mig-parted-configmap.yaml",
                                           "mig-parted.yaml"]
    labels = dict((d["metadata"]["name"], d["metadata"]["labels"][migparted_export.MIG_CONFIG_LABEL])
                  for d in yaml.safe_load_all((out_dir / "mig-config-labels.yaml").read_text()))
    configmap = yaml.safe_load((out_dir / "mig-parted-configmap.yaml").read_text())
    _validate(configmap)
    assert yaml.safe_load(configmap["data"]["config.yaml"]) == yaml.safe_load((out_dir / "mig-parted.yaml").read_text())

    mig_nodes = dict((h, p) for h, p in fleet["nodes"].items() if p["strategy"] == "mig")
    assert sorted(mig_nodes) == sorted(labels)
    hosts = {}
    for host, plan in mig_nodes.items():
        models = []
        for gpu in plan["gpus"]:
            if models and models[-1]["model"] == gpu["model"]:
                models[-1]["count"] += 1
            else:
                models.append({"model": gpu["model"], "count": 1})
        sharing = {"strategy": "mig", "mig": {"config": labels[host], "strategy": plan["mig"]["strategy"]}}
        if plan["mig"]["time_slicing_replicas"]:
            sharing["time_slicing_replicas"] = plan["mig"]["time_slicing_replicas"]
        hosts[host] = {"gpuprov_gpus": models, "gpuprov_sharing": sharing,
                       "gpuprov_mig_config_file": "mig/mig-parted.yaml"}
    (tmp_path / "inventory.yml").write_text(yaml.safe_dump({"all": {"hosts": hosts}}))
    code, out, err = gpuprov("plan", "-i", str(tmp_path / "inventory.yml"), "-o", "json")
    assert code == 0, err
    replanned = json.loads(out)["nodes"]
    for host, plan in mig_nodes.items():
        assert [g["mig"] and g["mig"]["instances"] for g in replanned[host]["gpus"]] == \
               [g["mig"] and g["mig"]["instances"] for g in plan["gpus"]], host
        assert replanned[host]["device_plugin"] == plan["device_plugin"], host
        assert replanned[host]["mig"]["source"].endswith("mig-parted.yaml#" + labels[host])


def test_mig_parted_label_script_runs(gpuprov, tmp_path):
    out_dir = tmp_path / "mig"
    export(gpuprov, "mig-parted", "--output-dir", str(out_dir))
    bin_dir, log = fake_tool(tmp_path, "kubectl")
    proc = run_script(out_dir / "label-mig-config.sh", bin_dir)
    assert proc.returncode == 0, proc.stderr
    calls = [json.loads(line)["argv"] for line in log.read_text().splitlines()]
    assert [c[2] for c in calls] == ["gpu-a100-01", "gpu-a100-02", "gpu-h100-01"]
    assert all(c[4].startswith(migparted_export.MIG_CONFIG_LABEL + "=") for c in calls)


def test_mig_parted_to_stdout_starts_with_the_config(gpuprov):
    documents = list(yaml.safe_load_all(export(gpuprov, "mig-parted")))
    configs = migparted.parse(documents[0], "stdout")
    assert len(configs) == 3
    assert documents[1]["kind"] == "ConfigMap" and [d["kind"] for d in documents[2:]] == ["Node"] * 3


def test_mig_parted_without_mig_nodes_is_bad_input(gpuprov):
    code, out, err = gpuprov("export", "-i", EXAMPLES, "-l", "gpu_t4", "mig-parted")
    assert code == 2 and out == ""
    assert "no planned node has MIG-capable GPUs" in err


def test_bad_inventory_exits_2_and_writes_nothing(gpuprov, tmp_path):
    inventory = tmp_path / "inventory.yml"
    inventory.write_text(yaml.safe_dump({"all": {"hosts": {"n1": {
        "gpuprov_gpu_model": "T4", "gpuprov_sharing": {"strategy": "time-slicing", "replicas": 1}}}}}))
    out_dir = tmp_path / "out"
    code, out, err = gpuprov("export", "-i", str(inventory), "device-plugin", "--output-dir", str(out_dir))
    assert code == 2
    assert "n1: gpuprov_sharing.replicas: must be an integer >= 2" in err
    assert not out_dir.exists()
    code, _, err = gpuprov("export", "-i", EXAMPLES, "-l", "nosuchgroup", "device-plugin")
    assert code == 2 and "matches no host" in err
    code, _, err = gpuprov("export", "-i", EXAMPLES, "device-plugin", "--default-config", "ts-16")
    assert code == 2 and "default config 'ts-16' is not one of the planned configs" in err


def test_unwritable_output_exits_1_with_the_path(gpuprov, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    code, _, err = gpuprov("export", "-i", EXAMPLES, "device-plugin", "--output-dir", str(blocker / "out"))
    assert code == 1
    assert str(blocker) in err and "Traceback" not in err
