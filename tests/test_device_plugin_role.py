"""The gpu_device_plugin role, run by ansible-playbook against a fake cluster.

tests/stubs/ansible_collections/kubernetes/core shadows kubernetes.core (helm,
helm_repository, k8s, k8s_info) with modules that keep a fake cluster in a JSON file and log
their arguments, so these tests see exactly what the role would apply to a real cluster.
"""
import json
import os
import re
import shutil
import subprocess
import sys

import pytest
import yaml

from ansible_collections.gpuprov.gpu.plugins.plugin_utils import device_plugin_configs, device_plugin_schema, helm_values
from ansible_collections.gpuprov.gpu.plugins.plugin_utils.intent import parse_intent
from ansible_collections.gpuprov.gpu.plugins.plugin_utils.planner import plan_fleet
from gpuprov.planning import plan_inventory

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

EXAMPLES = os.path.join(REPO, "examples", "inventory.yml")
STUBS = os.path.join(REPO, "tests", "stubs")
PLAYBOOK = os.path.join(STUBS, "gpu_device_plugin_playbook.yml")
RECAP_RE = re.compile(r"^(\S+)\s+: ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)", re.M)


def _ansible_playbook():
    local = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")
    return local if os.path.exists(local) else shutil.which("ansible-playbook")


pytestmark = pytest.mark.skipif(_ansible_playbook() is None, reason="ansible-playbook is not installed")


@pytest.fixture(scope="module")
def fleet():
    return plan_inventory([EXAMPLES]).result


class FakeCluster:
    def __init__(self, tmp_path, fleet, nodes=None):
        self.tmp_path = tmp_path
        self.state_path = tmp_path / "cluster.json"
        self.log_path = tmp_path / "calls.jsonl"
        self.vars_path = tmp_path / "plan.json"
        nodes = sorted(fleet["nodes"]) if nodes is None else nodes
        # An unrelated label must survive the merge patch. GPU nodes run the chart's pods
        # ("gpu") and their plugin advertises what the GPUs offer now ("devices": as planned).
        plans = dict((n, fleet["nodes"].get(n.split(".")[0])) for n in nodes)
        self.state_path.write_text(json.dumps({"nodes": dict(
            (n, {"labels": {"kubernetes.io/hostname": n}, "gpu": plans[n] is not None,
                 "devices": (plans[n] or {}).get("resources", {})}) for n in nodes)}))
        self.set_plan(fleet)

    def set_plan(self, fleet):
        self.vars_path.write_text(json.dumps({"gpu_device_plugin_plans": fleet["nodes"],
                                              "gpu_device_plugin_configs": fleet["device_plugin_configs"]}))

    def run(self, *extra, check=False):
        if self.log_path.exists():
            self.log_path.unlink()
        env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.pathsep.join([STUBS, os.path.join(REPO, "collections")]),
                   GPUPROV_FAKE_K8S_STATE=str(self.state_path), GPUPROV_FAKE_CALL_LOG=str(self.log_path),
                   ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0", ANSIBLE_LOCAL_TEMP=str(self.tmp_path / "ansible-tmp"))
        # The stub cluster answers at once: a pod that is not ready now never will be.
        argv = [_ansible_playbook(), "-i", EXAMPLES, PLAYBOOK, "-e", "@%s" % self.vars_path,
                "-e", '{"gpu_device_plugin_wait_timeout": 1, "gpu_device_plugin_wait_delay": 1}']
        if check:
            argv += ["--check", "--diff"]
        proc = subprocess.run(argv + list(extra), cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
        recap = dict((m.group(1), {"ok": int(m.group(2)), "changed": int(m.group(3)), "failed": int(m.group(5))})
                     for m in RECAP_RE.finditer(proc.stdout))
        return proc, recap

    def calls(self, tool=None):
        if not self.log_path.exists():
            return []
        calls = [json.loads(line) for line in self.log_path.read_text().splitlines()]
        return [c for c in calls if tool is None or c["tool"] == "kubernetes.core." + tool]

    def state(self):
        return json.loads(self.state_path.read_text())


def _release(calls, chart_name):
    matching = [c["params"] for c in calls if c["params"]["chart_ref"].endswith("/" + chart_name)]
    assert len(matching) == 1, matching
    return matching[0]


def test_check_mode_reports_what_it_would_apply_and_changes_nothing(tmp_path, fleet):
    fake = FakeCluster(tmp_path, fleet)
    before = fake.state()
    proc, recap = fake.run(check=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    after = fake.state()
    # The cluster is untouched; only the controller's Helm repository list gained the chart
    # repository, which kubernetes.core.helm needs to read the chart even in check mode.
    assert after.pop("repositories") == {"nvdp": "https://nvidia.github.io/k8s-device-plugin"}
    assert after["nodes"] == before["nodes"] and not after["releases"] and not after["daemonsets"]
    calls = fake.calls()
    assert calls and all(c["check_mode"] for c in calls if c["tool"] != "kubernetes.core.helm_repository")
    # Only the first host of the group runs it, and only once.
    assert recap["gpu-a100-01"]["changed"] > 0
    assert all(r["changed"] == 0 and r["failed"] == 0 for h, r in recap.items() if h != "gpu-a100-01")

    # Labels: every planned node, exactly its plan's labels, after the release that holds
    # their configs (a label naming a config the map lacks stops that node's plugin).
    patches = [c["params"] for c in fake.calls("k8s")]
    assert all(p["state"] == "patched" and p["merge_type"] == ["merge"] for p in patches)
    applied = dict((p["definition"]["metadata"]["name"], p["definition"]["metadata"]["labels"]) for p in patches)
    assert applied == dict((h, plan["labels"]) for h, plan in fleet["nodes"].items())
    plugin_install = [i for i, c in enumerate(calls) if c["tool"] == "kubernetes.core.helm"
                      and c["params"]["chart_ref"].endswith("/nvidia-device-plugin")]
    assert plugin_install and plugin_install[0] < min(i for i, c in enumerate(calls) if c["tool"].endswith(".k8s"))

    helm = fake.calls("helm")
    nfd = _release(helm, "node-feature-discovery")
    assert nfd["chart_ref"] == "oci://registry.k8s.io/nfd/charts/node-feature-discovery"
    assert nfd["chart_version"] == "0.19.0"
    assert nfd["release_values"]["worker"]["config"]["sources"]["pci"]["deviceLabelFields"] == ["vendor"]
    assert nfd["release_values"]["master"]["config"]["extraLabelNs"] == ["nvidia.com"]

    plugin = _release(helm, "nvidia-device-plugin")
    assert (plugin["chart_ref"], plugin["chart_version"]) == ("nvdp/nvidia-device-plugin", "0.20.0")
    assert plugin["release_namespace"] == "nvidia-device-plugin" and plugin["create_namespace"] is True
    values = plugin["release_values"]
    assert values["gfd"] == {"enabled": True} and values["nfd"] == {"enabled": False}
    assert values["config"]["default"] == "exclusive"
    # One key per distinct node config (plus the default), each the plan's config as YAML.
    configs = dict((name, yaml.safe_load(text)) for name, text in values["config"]["map"].items())
    assert set(configs) == set(fleet["device_plugin_configs"]) | {"exclusive"}
    for host, plan in fleet["nodes"].items():
        assert configs[plan["device_plugin"]["config_name"]] == plan["device_plugin"]["config"], host
    for name, config in configs.items():
        assert device_plugin_schema.problems(config) == [], name
    # The example nodes run the static CPU manager.
    assert values["compatWithCPUManager"] is True
    repos = [c["params"] for c in fake.calls("helm_repository")]
    assert [(r["repo_name"], r["repo_url"]) for r in repos] == [("nvdp", "https://nvidia.github.io/k8s-device-plugin")]
    # No waiting in check mode.
    assert not [c for c in fake.calls("k8s_info") if c["params"]["kind"] == "Pod"]


def test_apply_is_idempotent_and_a_config_change_rolls_the_plugin(tmp_path, fleet):
    fake = FakeCluster(tmp_path, fleet)
    proc, recap = fake.run()
    assert proc.returncode == 0, proc.stdout + proc.stderr
    state = fake.state()
    for host, plan in fleet["nodes"].items():
        assert state["nodes"][host]["labels"] == dict(plan["labels"], **{"kubernetes.io/hostname": host})
    release = state["releases"]["nvidia-device-plugin/nvidia-device-plugin"]
    assert release["version"] == "0.20.0" and release["revision"] == 1
    assert "node-feature-discovery/node-feature-discovery" in state["releases"]
    daemonset = state["daemonsets"]["nvidia-device-plugin/nvidia-device-plugin"]
    first_hash = daemonset["podAnnotations"][helm_values.CONFIG_HASH_ANNOTATION]
    # The pods of every GPU node are read (before and after relabelling), not a DaemonSet's count.
    waits = [c for c in fake.calls("k8s_info") if c["params"]["kind"] == "Pod"]
    assert [w["params"]["namespace"] for w in waits] == ["nvidia-device-plugin"] * 2

    # Nothing to do: nothing changes, nothing restarts.
    proc, recap = fake.run()
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert all(r["changed"] == 0 for r in recap.values()), recap
    assert fake.state()["releases"]["nvidia-device-plugin/nvidia-device-plugin"]["revision"] == 1
    assert [c["params"]["release_values"]["config"]["map"].keys() for c in fake.calls("helm")
            if c["params"]["chart_ref"].endswith("/nvidia-device-plugin")] == [release["values"]["config"]["map"].keys()]

    # T4 nodes move from 4 to 8 time-slicing replicas: new config, new labels, the plugin rolls.
    changed = json.loads(json.dumps(fleet))
    ts8 = {"version": "v1", "flags": {"migStrategy": "none"}, "sharing": {"timeSlicing": {
        "renameByDefault": False, "failRequestsGreaterThanOne": True,
        "resources": [{"name": "nvidia.com/gpu", "replicas": 8}]}}}
    del changed["device_plugin_configs"]["ts-4"]
    changed["device_plugin_configs"]["ts-8"] = ts8
    for host, plan in changed["nodes"].items():
        if plan["device_plugin"]["config_name"] == "ts-4":
            plan["device_plugin"] = {"config_name": "ts-8", "config": ts8}
            plan["labels"] = {device_plugin_configs.CONFIG_LABEL: "ts-8"}
    fake.set_plan(changed)
    proc, recap = fake.run()
    assert proc.returncode == 0, proc.stdout + proc.stderr
    state = fake.state()
    assert state["nodes"]["gpu-t4-01"]["labels"][device_plugin_configs.CONFIG_LABEL] == "ts-8"
    assert state["nodes"]["gpu-a100-01"]["labels"][device_plugin_configs.CONFIG_LABEL] == "mig-mixed"
    release = state["releases"]["nvidia-device-plugin/nvidia-device-plugin"]
    # Revision 2 held ts-4 and ts-8 while the T4 nodes were relabelled; revision 3 pruned ts-4.
    assert release["revision"] == 3 and "ts-8" in release["values"]["config"]["map"]
    assert "ts-4" not in release["values"]["config"]["map"]
    installs = [c["params"]["release_values"] for c in fake.calls("helm")
                if c["params"]["chart_ref"].endswith("/nvidia-device-plugin")]
    assert [sorted(v["config"]["map"]) for v in installs] == [
        ["exclusive", "mig-mixed", "mig-mixed-ts-4-8bd8a4fa", "mps-8", "ts-4", "ts-8"],
        ["exclusive", "mig-mixed", "mig-mixed-ts-4-8bd8a4fa", "mps-8", "ts-8"]]
    calls = fake.calls()
    order = [(c["tool"].split(".")[-1], len(c["params"].get("release_values", {}).get("config", {}).get("map", {})))
             for c in calls if c["tool"] in ("kubernetes.core.helm", "kubernetes.core.k8s")
             and "node-feature-discovery" not in c["params"].get("chart_ref", "")]
    assert order[0] == ("helm", 6) and order[-1] == ("helm", 5) and set(order[1:-1]) == {("k8s", 0)}
    # The pruning upgrade does not roll the DaemonSet a second time: both carry the same digest,
    # and the chart's own checksum/config (of its whole ConfigMap) is set to it, so the chart does
    # not put a digest of the pruned map in its place. Each node's pods started twice: the
    # install and the roll for ts-8.
    assert installs[0]["podAnnotations"] == installs[1]["podAnnotations"]
    assert set(state["daemonset_pods"]["nvidia-device-plugin/nvidia-device-plugin"].values()) == {2}
    new_hash = state["daemonsets"]["nvidia-device-plugin/nvidia-device-plugin"]["podAnnotations"][
        helm_values.CONFIG_HASH_ANNOTATION]
    assert new_hash != first_hash
    # NFD's values did not change, so its release is left alone.
    assert state["releases"]["node-feature-discovery/node-feature-discovery"]["revision"] == 1


def test_a_planned_node_missing_from_the_cluster_stops_before_any_change(tmp_path, fleet):
    nodes = [n for n in sorted(fleet["nodes"]) if n != "gpu-t4-04"]
    fake = FakeCluster(tmp_path, fleet, nodes=nodes)
    before = fake.state_path.read_text()
    proc, recap = fake.run()
    assert proc.returncode != 0
    assert "gpu-t4-04 are not in the cluster" in proc.stdout
    assert "gpu_device_plugin_node_names" in proc.stdout
    assert fake.state_path.read_text() == before
    assert fake.calls("k8s") == [] and fake.calls("helm") == []


def test_a_plan_the_plugin_would_reject_fails_before_the_cluster_is_touched(tmp_path, fleet):
    broken = json.loads(json.dumps(fleet))
    broken["device_plugin_configs"]["ts-4"]["sharing"]["timeSlicing"]["resources"][0]["replicas"] = 1
    for plan in broken["nodes"].values():
        if plan["device_plugin"]["config_name"] == "ts-4":
            plan["device_plugin"]["config"] = broken["device_plugin_configs"]["ts-4"]
    fake = FakeCluster(tmp_path, broken)
    proc, _ = fake.run()
    assert proc.returncode != 0
    assert "device-plugin config ts-4: sharing.timeSlicing.resources[0].replicas: must be >= 2" in proc.stdout
    assert fake.calls() == []


def test_mirrors_and_node_names(tmp_path, fleet):
    """Air-gapped: charts and images from a mirror; one inventory host has another node name."""
    nodes = [n if n != "gpu-t4-01" else "gpu-t4-01.cluster.local" for n in sorted(fleet["nodes"])]
    fake = FakeCluster(tmp_path, fleet, nodes=nodes)
    extra = {
        "gpu_device_plugin_chart_repo_url": "oci://mirror.example.com/charts/nvidia",
        "gpu_device_plugin_image_repository": "mirror.example.com/nvidia/k8s-device-plugin",
        "gpu_device_plugin_image_tag": "v0.20.0",
        "gpu_device_plugin_image_pull_secrets": ["mirror-pull"],
        "gpu_device_plugin_nfd_chart_repo_url": "https://mirror.example.com/charts/nfd",
        "gpu_device_plugin_nfd_image_repository": "mirror.example.com/nfd/node-feature-discovery",
        "gpu_device_plugin_node_names": {"gpu-t4-01": "gpu-t4-01.cluster.local"},
        "gpu_device_plugin_kubeconfig": "/etc/gpuprov/admin.conf",
        "gpu_device_plugin_kube_context": "gpu-cluster",
        "gpu_device_plugin_namespace": "gpu-system",
    }
    extra_path = tmp_path / "extra.json"
    extra_path.write_text(json.dumps(extra))
    proc, _ = fake.run("-e", "@%s" % extra_path, check=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    repos = [(c["params"]["repo_name"], c["params"]["repo_url"]) for c in fake.calls("helm_repository")]
    assert repos == [("nfd", "https://mirror.example.com/charts/nfd")]  # the OCI mirror needs no entry
    helm = fake.calls("helm")
    nfd = _release(helm, "node-feature-discovery")
    assert nfd["chart_ref"] == "nfd/node-feature-discovery"
    assert nfd["release_values"]["image"] == {"repository": "mirror.example.com/nfd/node-feature-discovery"}
    assert nfd["release_values"]["imagePullSecrets"] == [{"name": "mirror-pull"}]
    plugin = _release(helm, "nvidia-device-plugin")
    assert plugin["chart_ref"] == "oci://mirror.example.com/charts/nvidia/nvidia-device-plugin"
    assert plugin["release_namespace"] == "gpu-system"
    assert plugin["release_values"]["image"] == {"repository": "mirror.example.com/nvidia/k8s-device-plugin",
                                                 "tag": "v0.20.0"}
    for call in fake.calls("helm") + fake.calls("k8s") + fake.calls("k8s_info"):
        assert (call["params"]["kubeconfig"], call["params"]["context"]) == ("/etc/gpuprov/admin.conf", "gpu-cluster")
    names = [c["params"]["definition"]["metadata"]["name"] for c in fake.calls("k8s")]
    assert "gpu-t4-01.cluster.local" in names and "gpu-t4-01" not in names


def test_stub_options_exist_in_the_real_kubernetes_core():
    """The stubs accept only options the real modules document, so a task they accept is one
    the real collection accepts too."""
    from ansible.plugins.loader import fragment_loader
    from ansible.utils.plugin_docs import get_docstring

    real = None
    for entry in sys.path:
        candidate = os.path.join(entry, "ansible_collections", "kubernetes", "core", "plugins", "modules")
        if os.path.isdir(candidate) and not candidate.startswith(STUBS):
            real = candidate
            break
    if real is None:
        pytest.skip("kubernetes.core (the ansible package) is not installed")
    stub_dir = os.path.join(STUBS, "ansible_collections", "kubernetes", "core", "plugins", "modules")
    for module in ("helm", "helm_info", "helm_repository", "k8s", "k8s_info", "k8s_drain"):
        doc = get_docstring(os.path.join(real, module + ".py"), fragment_loader, collection_name="kubernetes.core")[0]
        documented = set(doc["options"])
        for spec in doc["options"].values():
            documented.update(spec.get("aliases") or [])
        source = open(os.path.join(stub_dir, module + ".py")).read()
        accepted = set(re.findall(r"^\s{12}(\w+)=dict\(", source, re.M)) | {
            "kubeconfig", "context", "host", "api_key", "validate_certs", "ca_cert"}
        assert accepted - documented == set(), (module, accepted - documented)


HAMI_HOSTS = {
    "gpu-l40s-01": {"gpuprov_gpu_model": "L40S", "gpuprov_gpu_count": 4,
                    "gpuprov_sharing": {"strategy": "hami", "hami": {"split_count": 6}}},
    "gpu-t4-01": {"gpuprov_gpu_model": "T4", "gpuprov_sharing": {"strategy": "time-slicing", "replicas": 4}},
}


def test_hami_nodes_get_hami_and_not_the_nvidia_plugin(tmp_path):
    inventory = tmp_path / "hami-inventory.yml"
    inventory.write_text(yaml.safe_dump({"all": {"hosts": HAMI_HOSTS}}))
    hami_fleet = plan_inventory([str(inventory)]).result
    fake = FakeCluster(tmp_path, hami_fleet)
    # A node moved off HAMi still carries gpu=on: the run must remove it.
    state = fake.state()
    state["nodes"]["gpu-t4-01"]["labels"]["gpu"] = "on"
    fake.state_path.write_text(json.dumps(state))

    proc, _recap = fake.run(check=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "configmaps" not in fake.state() and not fake.state()["releases"]

    proc, recap = fake.run()
    assert proc.returncode == 0, proc.stdout + proc.stderr
    state = fake.state()
    assert state["nodes"]["gpu-l40s-01"]["labels"]["gpu"] == "on"
    assert "gpu" not in state["nodes"]["gpu-t4-01"]["labels"]
    assert state["nodes"]["gpu-t4-01"]["labels"][device_plugin_configs.CONFIG_LABEL] == "ts-4"
    configmap = state["configmaps"]["kube-system/gpuprov-hami-device-plugin"]
    entries = json.loads(configmap["data"]["config.json"])["nodeconfig"]
    assert [(e["name"], e["devicesplitcount"]) for e in entries] == [("gpu-l40s-01", 6)]
    hami = state["releases"]["kube-system/hami"]
    assert (hami["chart"], hami["version"]) == ("hami", "2.10.0")
    assert hami["values"]["devicePlugin"]["nodeConfiguration"]["externalConfigName"] == "gpuprov-hami-device-plugin"
    nvidia = [r for k, r in state["releases"].items() if r["chart"] == "nvidia-device-plugin"][0]
    terms = nvidia["values"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"]
    assert all({"key": "gpu", "operator": "NotIn", "values": ["on"]} in t["matchExpressions"] for t in terms)
    # The ConfigMap goes in before the HAMi release.
    tools = [(c["tool"], c["params"].get("definition", {}).get("kind"), c["params"].get("chart_ref")) for c in fake.calls()]
    assert tools.index(("kubernetes.core.k8s", "ConfigMap", None)) < tools.index(("kubernetes.core.helm", None,
                                                                                  "hami-charts/hami"))

    proc, recap = fake.run()
    assert proc.returncode == 0 and recap["gpu-a100-01"]["changed"] == 0, proc.stdout


def test_device_plugin_playbook_plans_hami_and_nvidia_nodes(tmp_path):
    # The collection's playbook plans every host with the node_plan action and hands the role
    # the device-plugin configs of the nodes that have one (HAMi nodes have none).
    hosts = dict((h, dict(v, ansible_connection="local", ansible_python_interpreter=sys.executable))
                 for h, v in HAMI_HOSTS.items())
    inventory = tmp_path / "inventory.yml"
    inventory.write_text(yaml.safe_dump({"all": {"hosts": hosts}}))
    state = tmp_path / "cluster.json"
    state.write_text(json.dumps({"nodes": dict((h, {"labels": {}, "gpu": True}) for h in HAMI_HOSTS)}))
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.pathsep.join([STUBS, os.path.join(REPO, "collections")]),
               GPUPROV_FAKE_K8S_STATE=str(state), ANSIBLE_NOCOLOR="1",
               ANSIBLE_LOCAL_TEMP=str(tmp_path / "ansible-tmp"))
    proc = subprocess.run([_ansible_playbook(), "-i", str(inventory), "gpuprov.gpu.device_plugin",
                           "-e", "gpuprov_kubeconfig=%s" % (tmp_path / "kubeconfig"),
                           # Plugin pods are checked; these nodes' devices are not modelled.
                           "-e", "gpu_device_plugin_wait_allocatable=false", "-e", "gpu_device_plugin_wait_delay=1",
                           "-e", "gpu_device_plugin_wait_timeout=5"],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    cluster_state = json.loads(state.read_text())
    assert cluster_state["nodes"]["gpu-l40s-01"]["labels"]["gpu"] == "on"
    nvidia = [r for r in cluster_state["releases"].values() if r["chart"] == "nvidia-device-plugin"][0]
    assert set(nvidia["values"]["config"]["map"]) == {"exclusive", "ts-4"}
    assert "kube-system/hami" in cluster_state["releases"]


@pytest.mark.parametrize("cluster_side, deploys", [("true", True), ("false", False)])
def test_device_plugin_playbook_skips_the_cluster_side_when_told(tmp_path, fleet, cluster_side, deploys):
    # An AWX job slice sees part of the fleet; its ConfigMap would drop the other nodes'
    # configs, so slices run with gpuprov_cluster_side=false (README: job slicing).
    cluster = FakeCluster(tmp_path, fleet)
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.pathsep.join([STUBS, os.path.join(REPO, "collections")]),
               GPUPROV_FAKE_K8S_STATE=str(cluster.state_path), GPUPROV_FAKE_CALL_LOG=str(cluster.log_path),
               ANSIBLE_NOCOLOR="1", ANSIBLE_LOCAL_TEMP=str(tmp_path / "ansible-tmp"))
    proc = subprocess.run([_ansible_playbook(), "-i", EXAMPLES, "gpuprov.gpu.device_plugin",
                           "-e", "gpuprov_kubeconfig=/etc/gpuprov/admin.conf", "-e", "gpuprov_cluster_side=" + cluster_side],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    releases = cluster.calls("helm")
    assert bool(releases) is deploys, proc.stdout[-3000:]


PLAIN_NODES = [
    {"name": "gpu-a100-01", "gpu_model": "A100-80GB", "gpu_count": 8,
     "sharing": {"strategy": "mig", "mig": {"config": "all-balanced"}}},
    {"name": "gpu-t4-01", "gpu_model": "T4", "gpu_count": 4, "sharing": {"strategy": "time-slicing", "replicas": 4}},
]


def plain_fleet(nodes):
    """The fleet plan the same nodes get from inventory variables of the same meaning."""
    intents = [parse_intent(n["name"], {"gpuprov_gpu_model": n["gpu_model"], "gpuprov_gpu_count": n["gpu_count"],
                                        "gpuprov_sharing": n["sharing"]})[0] for n in nodes]
    return plan_fleet(intents)


def plain_cluster(tmp_path, nodes):
    """A fake cluster with the two GPU nodes, their plugins advertising what the GPUs offer; the
    role gets node configs, not a fleet plan."""
    fleet, problems = plain_fleet(PLAIN_NODES)
    assert problems == []
    fake = FakeCluster(tmp_path, fleet)
    fake.vars_path.write_text(json.dumps({"gpu_device_plugin_nodes": nodes}))
    return fake


def test_node_configs_without_an_inventory_are_planned_like_the_inventory(tmp_path):
    fake = plain_cluster(tmp_path, PLAIN_NODES)
    proc, _ = fake.run("--limit", "gpu-a100-01")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # The same plan as from inventory variables of the same meaning.
    expected, problems = plain_fleet(PLAIN_NODES)
    assert problems == []
    labels = dict((n, fake.state()["nodes"][n]["labels"]) for n in ("gpu-a100-01", "gpu-t4-01"))
    for name, plan in expected["nodes"].items():
        assert dict(labels[name], **plan["labels"]) == labels[name], name
    values = _release(fake.calls("helm"), "nvidia-device-plugin")["release_values"]
    configs = dict((name, yaml.safe_load(text)) for name, text in values["config"]["map"].items())
    assert configs == dict(expected["device_plugin_configs"], exclusive=configs["exclusive"])


def test_a_bad_node_config_is_named_and_the_cluster_untouched(tmp_path):
    nodes = [PLAIN_NODES[0], dict(PLAIN_NODES[1], sharing={"strategy": "time-slicing", "replicas": 1})]
    fake = plain_cluster(tmp_path, nodes)
    before = fake.state_path.read_text()
    proc, _ = fake.run("--limit", "gpu-a100-01")
    assert proc.returncode != 0
    assert "gpu_device_plugin_nodes[1].sharing.replicas: must be an integer >= 2" in proc.stdout
    assert fake.calls() == [] and fake.state_path.read_text() == before


def _limited(fleet, hosts):
    """The plan of a run limited to ``hosts`` (what `-l` gives the role)."""
    nodes = dict((h, p) for h, p in fleet["nodes"].items() if h in hosts)
    configs = dict((p["device_plugin"]["config_name"], p["device_plugin"]["config"]) for p in nodes.values())
    return {"nodes": nodes, "device_plugin_configs": configs}


def test_a_limited_run_keeps_every_config_a_node_names(tmp_path, fleet):
    """The ConfigMap is cluster-wide: a run limited to one T4 node keeps the configs of the
    other inventory nodes and of a live node outside the inventory, whose plugin would
    otherwise crash (config-manager exits on a missing config)."""
    fake = FakeCluster(tmp_path, fleet)
    proc, _ = fake.run()
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # A node outside the inventory, labelled with a config of its own that the release holds.
    state = fake.state()
    ts2 = "version: v1\nflags:\n  migStrategy: none\nsharing:\n  timeSlicing:\n    resources:\n    - name: nvidia.com/gpu\n      replicas: 2\n"
    state["releases"]["nvidia-device-plugin/nvidia-device-plugin"]["values"]["config"]["map"]["ts-2"] = ts2
    state["nodes"]["gpu-other"] = {"labels": {device_plugin_configs.CONFIG_LABEL: "ts-2"}, "gpu": True,
                                   "devices": {"nvidia.com/gpu": 2}}
    fake.state_path.write_text(json.dumps(state))

    limited = _limited(fleet, ["gpu-t4-01"])
    fake.set_plan(limited)
    inventory_configs = tmp_path / "inventory-configs.json"
    inventory_configs.write_text(json.dumps({"gpu_device_plugin_inventory_configs": fleet["device_plugin_configs"]}))
    proc, _ = fake.run("-l", "gpu-t4-01", "-e", "@%s" % inventory_configs)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    kept = fake.state()["releases"]["nvidia-device-plugin/nvidia-device-plugin"]["values"]["config"]["map"]
    assert set(kept) == set(fleet["device_plugin_configs"]) | {"exclusive", "ts-2"}
    pods = [c for c in fake.calls("k8s_info") if c["params"]["kind"] == "Pod"]
    assert pods  # the run waited for the pods


def test_a_config_no_node_names_is_pruned_after_relabelling(tmp_path, fleet):
    fake = FakeCluster(tmp_path, fleet)
    proc, _ = fake.run()
    assert proc.returncode == 0, proc.stdout + proc.stderr
    state = fake.state()
    release = state["releases"]["nvidia-device-plugin/nvidia-device-plugin"]
    release["values"]["config"]["map"]["ts-16"] = "version: v1\n"
    fake.state_path.write_text(json.dumps(state))
    proc, _ = fake.run()
    assert proc.returncode == 0, proc.stdout + proc.stderr
    maps = [sorted(c["params"]["release_values"]["config"]["map"]) for c in fake.calls("helm")
            if c["params"]["chart_ref"].endswith("/nvidia-device-plugin")]
    # Kept through the relabelling, pruned after it.
    assert "ts-16" in maps[0] and "ts-16" not in maps[-1]
    assert "ts-16" not in fake.state()["releases"]["nvidia-device-plugin/nvidia-device-plugin"]["values"]["config"]["map"]


def test_the_rollout_waits_for_each_gpu_nodes_pods_not_a_daemonset_count(tmp_path, fleet):
    """A GPU node where the chart's pods cannot run (here: the fake schedules none there) fails
    the run by name; the DaemonSet itself would report ready (0 desired, 0 ready)."""
    fake = FakeCluster(tmp_path, fleet)
    state = json.loads(fake.state_path.read_text())
    state["nodes"]["gpu-t4-04"]["gpu"] = False
    fake.state_path.write_text(json.dumps(state))
    proc, _ = fake.run()
    assert proc.returncode != 0
    assert ("gpu-t4-04: no device-plugin pod (DaemonSet nvidia-device-plugin) on the node; gpu-t4-04: no "
            "gpu-feature-discovery pod (DaemonSet nvidia-device-plugin-gpu-feature-discovery) on the node") in proc.stdout
    assert "gpu-t4-01" not in proc.stdout.split("not ready after")[1].split("See")[0]


def test_the_mps_node_needs_its_mps_daemon_pod_and_allocatable(tmp_path, fleet):
    fake = FakeCluster(tmp_path, fleet)
    state = json.loads(fake.state_path.read_text())
    # The L40S node's plugin advertises whole GPUs, not its 8 MPS replicas each.
    state["nodes"]["gpu-l40s-01"]["devices"] = {"nvidia.com/gpu": 4}
    fake.state_path.write_text(json.dumps(state))
    proc, _ = fake.run()
    assert proc.returncode != 0
    assert "gpu-l40s-01: allocatable nvidia.com/gpu is 4, the plan advertises 32" in proc.stdout
    pods = fake.state()["daemonset_pods"]
    assert "gpu-l40s-01" in pods["nvidia-device-plugin/nvidia-device-plugin-mps-control-daemon"]


def test_the_stub_cluster_stops_a_plugin_whose_config_is_missing(tmp_path):
    """config-manager exits when the node's label names a config the map lacks."""
    import importlib.util

    # By file: the in-repo ansible_collections package is imported already and shadows the stubs.
    spec = importlib.util.spec_from_file_location("fake_cluster", os.path.join(
        STUBS, "ansible_collections", "kubernetes", "core", "plugins", "module_utils", "fake_cluster.py"))
    fake_cluster = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fake_cluster)
    state = fake_cluster.ensure_pod_state(fake_cluster.empty_state())
    state["nodes"] = {"a": {"labels": {device_plugin_configs.CONFIG_LABEL: "ts-4"}, "gpu": True},
                      "b": {"labels": {device_plugin_configs.CONFIG_LABEL: "ts-8"}, "gpu": True},
                      "c": {"labels": {}, "gpu": True}}
    state["releases"]["nvidia-device-plugin/nvidia-device-plugin"] = {
        "chart": "nvidia-device-plugin", "daemonset": "nvidia-device-plugin", "release_name": "nvidia-device-plugin",
        "values": {"config": {"default": "exclusive", "map": {"exclusive": "version: v1\n", "ts-4": "version: v1\n"}}}}
    fake_cluster.roll_daemonsets(state, "nvidia-device-plugin", "nvidia-device-plugin")
    ready = dict((pod["nodeName"], pod["ready"]) for pod in fake_cluster.daemonset_pods(state).values()
                 if pod["labels"]["app.kubernetes.io/name"] == "nvidia-device-plugin")
    assert ready == {"a": True, "b": False, "c": True}
