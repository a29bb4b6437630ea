"""The gpu_device_plugin role with the real kubernetes.core modules (helm, helm_repository,
helm_info, k8s, k8s_info) and the real Helm client (helm v3.21.4, tests/helm_repo.py) against a
real API server, controller-manager and scheduler (tests/controlplane.py).

The charts are upstream's, from the Go module cache, served by a local chart repository:
NVIDIA's device plugin chart 0.19.3 (gpuprov pins 0.20.0, which the module proxy does not serve:
the role's gpu_device_plugin_chart_version is set to the served one here) and NFD's chart 0.19.0
(the version the role pins). Helm renders and installs them; the real DaemonSet controller puts
the plugin and GFD pods on the nodes the chart's affinity selects; the node agent
(tests/node_agent.py) plays the kubelets: it runs those pods, and a device plugin pod reads its
config as config-manager does (the node's config label, from the chart's ConfigMap) and
publishes what NVIDIA's plugin would advertise with it on the node's fake NVML (MIG devices on
the A100 node from its planned layout, time-sliced replicas on the T4 nodes).

The fleet is planned by `gpuprov plan` from a small inventory: one A100 node with MIG, two T4
nodes with time-slicing (one config for both), and a CPU node outside the plan."""
import json
import os
import re

import pytest
import yaml

import fake_device_plugin
import helm_repo
from controlplane import wait_for

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PLAYBOOK = os.path.join(REPO, "tests", "playbooks", "device_plugin_cluster.yml")
NAMESPACE = RELEASE = "nvidia-device-plugin"
NFD_NAMESPACE = NFD_RELEASE = "node-feature-discovery"
CONFIG_MAP = "nvidia-device-plugin-configs"      # the chart's <fullname>-configs
GFD = RELEASE + "-gpu-feature-discovery"
CONFIG_LABEL = "nvidia.com/device-plugin.config"
# The label nfd-worker puts on a node with an NVIDIA PCI device, with the worker config the role
# gives NFD (deviceLabelFields: [vendor]); the agent plays no NFD, so the nodes start with it.
NVIDIA_PCI = {"feature.node.kubernetes.io/pci-10de.present": "true"}
CPU_NODE = "cpu-01"
RECAP_RE = re.compile(r"^localhost\s+: ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)", re.M)

pytestmark = pytest.mark.control_plane


def inventory(t4_01_replicas=4, t4_02_replicas=4):
    t4 = {"gpuprov_gpu_model": "T4", "gpuprov_gpu_count": 1}
    return {"all": {"children": {"gpu_nodes": {"hosts": {
        "gpu-a100-01": {"gpuprov_gpu_model": "A100-80GB", "gpuprov_gpu_count": 8,
                        "gpuprov_sharing": {"strategy": "mig", "mig": {"config": "all-balanced", "strategy": "mixed"}}},
        "gpu-t4-01": dict(t4, gpuprov_sharing={"strategy": "time-slicing", "replicas": t4_01_replicas}),
        "gpu-t4-02": dict(t4, gpuprov_sharing={"strategy": "time-slicing", "replicas": t4_02_replicas}),
    }}}}}


@pytest.fixture(scope="module")
def charts(tmp_path_factory):
    repository = helm_repo.gpu_charts_repository(tmp_path_factory.mktemp("chart-repository"))
    yield repository
    repository.stop()


class Fleet:
    """The planned fleet on the control plane, and runs of the role against it."""

    def __init__(self, cluster, charts, tmp_path, gpuprov):
        self.cluster = cluster
        self.charts = charts
        self.tmp_path = tmp_path
        self.gpuprov = gpuprov
        self.helm_env = helm_repo.helm_env(tmp_path / "helm")
        self.runs = 0
        self.plan = None

    def plan_inventory(self, **replicas):
        path = self.tmp_path / "inventory.yml"
        path.write_text(yaml.safe_dump(inventory(**replicas)))
        code, out, err = self.gpuprov("plan", "-i", str(path), "-o", "json")
        assert code == 0, err
        self.plan = json.loads(out)
        return self.plan

    def add_nodes(self):
        for host, node in sorted(self.plan["nodes"].items()):
            state = fake_device_plugin.write_planned_state(str(self.tmp_path / ("%s-nvml.json" % host)), node)
            self.cluster.add_node(host, labels=dict(NVIDIA_PCI), plugin={"nvml_state": state})
        self.cluster.add_node(CPU_NODE)

    def run(self, **variables):
        self.runs += 1
        folder = self.tmp_path / ("run-%d" % self.runs)
        folder.mkdir()
        variables = dict({
            "gpu_device_plugin_plans": self.plan["nodes"],
            "gpu_device_plugin_configs": self.plan["device_plugin_configs"],
            "gpu_device_plugin_kubeconfig": self.cluster.kubeconfig,
            "gpu_device_plugin_helm_binary": helm_repo.helm_binary(),
            "gpu_device_plugin_chart_repo_url": self.charts.url,
            "gpu_device_plugin_chart_repo_name": "gpuprov-test",
            # The served chart; the role pins 0.20.0 (see the module docstring).
            "gpu_device_plugin_chart_version": self.charts.charts["nvidia-device-plugin"],
            "gpu_device_plugin_nfd_chart_repo_url": self.charts.url,
            "gpu_device_plugin_nfd_chart_repo_name": "gpuprov-test-nfd",
            "gpu_device_plugin_wait_timeout": 120, "gpu_device_plugin_wait_delay": 1}, **variables)
        proc = self.cluster.run_playbook(PLAYBOOK, folder, {"localhost": {}}, variables, env=self.helm_env)
        recap = RECAP_RE.search(proc.stdout)
        return proc, (dict(zip(("ok", "changed", "unreachable", "failed"), map(int, recap.groups()))) if recap else None)

    # -- what the cluster has ---------------------------------------------------------------
    def history(self, namespace=NAMESPACE, release=RELEASE):
        return helm_repo.history(self.helm_env, self.cluster.kubeconfig, namespace, release)

    def values(self, revision=None):
        return helm_repo.values(self.helm_env, self.cluster.kubeconfig, NAMESPACE, RELEASE, revision)

    def config_map(self):
        return self.cluster.core().read_namespaced_config_map(CONFIG_MAP, NAMESPACE).data

    def daemonset(self, name=RELEASE):
        return self.cluster.apps().read_namespaced_daemon_set(name, NAMESPACE)

    def pods(self, daemonset=RELEASE):
        """{node: pod} of a DaemonSet's pods that are not going away."""
        found = {}
        for pod in self.cluster.core().list_namespaced_pod(NAMESPACE).items:
            owners = [o.name for o in pod.metadata.owner_references or [] if o.kind == "DaemonSet"]
            if owners == [daemonset] and not pod.metadata.deletion_timestamp:
                found.setdefault(pod.spec.node_name, []).append(pod)
        return found

    def labels(self):
        return dict((n.metadata.name, (n.metadata.labels or {}).get(CONFIG_LABEL))
                    for n in self.cluster.core().list_node().items)

    def allocatable(self):
        return dict((n.metadata.name, dict((k, int(v)) for k, v in (n.status.allocatable or {}).items()
                                           if k.startswith("nvidia.com/") and v != "0"))
                    for n in self.cluster.core().list_node().items)

    def uninstall(self):
        """Helm's cluster-scoped objects outlive the namespaces the cluster fixture removes:
        uninstall the releases (no hooks: NFD's post-delete Job would never finish, the agent
        runs pods but never completes them) and drop NFD's CRDs."""
        from kubernetes import client
        for namespace, name in helm_repo.releases(self.helm_env, self.cluster.kubeconfig):
            helm_repo.helm(["uninstall", name, "-n", namespace, "--no-hooks", "--kubeconfig", self.cluster.kubeconfig],
                           self.helm_env, check=False)
        extensions = client.ApiextensionsV1Api(self.cluster.api_client())
        for crd in extensions.list_custom_resource_definition().items:
            if crd.spec.group.endswith("nfd.k8s-sigs.io"):
                extensions.delete_custom_resource_definition(crd.metadata.name)


@pytest.fixture
def fleet(cluster, charts, tmp_path, gpuprov):
    fleet = Fleet(cluster, charts, tmp_path, gpuprov)
    fleet.plan_inventory()
    fleet.add_nodes()
    yield fleet
    fleet.uninstall()


def installed(fleet):
    proc, recap = fleet.run()
    assert proc.returncode == 0, proc.stdout
    return recap


def configs_in(data):
    return dict((name, yaml.safe_load(text)) for name, text in data.items())


def test_install_deploys_both_charts_the_daemonsets_place_a_plugin_per_gpu_node_and_nodes_advertise_their_plan(
        fleet):
    recap = installed(fleet)
    assert recap["changed"] > 0 and recap["failed"] == 0
    plan = fleet.plan

    releases = helm_repo.releases(fleet.helm_env, fleet.cluster.kubeconfig)
    plugin, nfd = releases[(NAMESPACE, RELEASE)], releases[(NFD_NAMESPACE, NFD_RELEASE)]
    assert (plugin["status"], plugin["chart"], plugin["revision"]) == ("deployed", "nvidia-device-plugin-0.19.3", "1")
    assert (nfd["status"], nfd["chart"], nfd["revision"]) == ("deployed", "node-feature-discovery-0.19.0", "1")

    # The chart made the DaemonSets; the DaemonSet controller put one pod of each on every GPU
    # node (the chart's affinity, as the role sets it, selects NFD's NVIDIA PCI label) and none
    # on the CPU node.
    gpu_nodes = sorted(plan["nodes"])
    for name in (RELEASE, GFD):
        daemonset = fleet.daemonset(name)
        assert daemonset.metadata.labels["app.kubernetes.io/managed-by"] == "Helm"
        assert daemonset.metadata.annotations["meta.helm.sh/release-name"] == RELEASE
        assert daemonset.status.desired_number_scheduled == len(gpu_nodes)
        pods = fleet.pods(name)
        assert sorted(pods) == gpu_nodes, name
        assert all(len(p) == 1 and p[0].status.phase == "Running" for p in pods.values()), pods

    # One named config per distinct node plan (both T4 nodes share one), plus the default.
    data = fleet.config_map()
    distinct = set(p["device_plugin"]["config_name"] for p in plan["nodes"].values())
    assert len(distinct) == 2 and set(data) == distinct | {"exclusive"}
    configs = configs_in(data)
    for name, config in plan["device_plugin_configs"].items():
        assert configs[name] == config, name

    labels = fleet.labels()
    assert labels == dict([(h, p["labels"][CONFIG_LABEL]) for h, p in plan["nodes"].items()] + [(CPU_NODE, None)])
    # What each node's plugin advertised with its config is what `gpuprov plan` says.
    allocatable = fleet.allocatable()
    assert allocatable == dict([(h, p["resources"]) for h, p in plan["nodes"].items()] + [(CPU_NODE, {})])


def test_a_second_run_changes_nothing_and_restarts_no_plugin(fleet):
    installed(fleet)
    before = dict((name, fleet.pods(name)) for name in (RELEASE, GFD))
    uids = dict((name, sorted(p[0].metadata.uid for p in pods.values())) for name, pods in before.items())
    generations = dict((name, fleet.daemonset(name).metadata.generation) for name in (RELEASE, GFD))
    fleet.cluster.agent.clear_events()

    proc, recap = fleet.run()
    assert proc.returncode == 0, proc.stdout
    assert recap["changed"] == 0, proc.stdout
    assert len(fleet.history()) == 1 and len(fleet.history(NFD_NAMESPACE, NFD_RELEASE)) == 1
    for name in (RELEASE, GFD):
        assert fleet.daemonset(name).metadata.generation == generations[name]
        assert sorted(p[0].metadata.uid for p in fleet.pods(name).values()) == uids[name]
    moved = [e for e in fleet.cluster.agent.events() if e["event"] in ("stop", "restart")]
    assert moved == []


def test_a_changed_plan_adds_its_config_relabels_and_prunes_what_no_node_names_without_a_second_roll(fleet):
    """The role's order (docs/cluster-side.md, "What a run does"): install with every config in
    use, relabel, prune. A new config rolls the DaemonSets once (the pod template's digest covers
    the kept configs); the prune must not roll them again."""
    installed(fleet)
    generations = dict((name, fleet.daemonset(name).metadata.generation) for name in (RELEASE, GFD))

    # gpu-t4-01 moves to 2 replicas; gpu-t4-02 still names ts-4, so ts-4 stays.
    plan = fleet.plan_inventory(t4_01_replicas=2)
    assert plan["nodes"]["gpu-t4-01"]["device_plugin"]["config_name"] == "ts-2"
    proc, recap = fleet.run()
    assert proc.returncode == 0, proc.stdout
    assert set(fleet.config_map()) == {"exclusive", "mig-mixed", "ts-2", "ts-4"}
    assert fleet.labels()["gpu-t4-01"] == "ts-2" and fleet.labels()["gpu-t4-02"] == "ts-4"
    assert fleet.allocatable()["gpu-t4-01"] == {"nvidia.com/gpu": 2}
    assert fleet.allocatable()["gpu-t4-02"] == {"nvidia.com/gpu": 4}
    assert len(fleet.history()) == 2  # the upgrade that added ts-2; nothing to prune
    for name in (RELEASE, GFD):
        assert fleet.daemonset(name).metadata.generation == generations[name] + 1, name
        generations[name] += 1

    # gpu-t4-02 follows: ts-4 is named by no node any more and goes.
    fleet.plan_inventory(t4_01_replicas=2, t4_02_replicas=2)
    proc, recap = fleet.run()
    assert proc.returncode == 0, proc.stdout
    assert set(fleet.config_map()) == {"exclusive", "mig-mixed", "ts-2"}
    assert fleet.labels()["gpu-t4-02"] == "ts-2"
    assert fleet.allocatable()["gpu-t4-02"] == {"nvidia.com/gpu": 2}
    history = fleet.history()
    assert len(history) == 4 and [r["status"] for r in history][-1] == "deployed"
    # Revision 3 still held ts-4 (gpu-t4-02's label named it until the relabel), 4 pruned it.
    assert "ts-4" in fleet.values(3)["config"]["map"] and "ts-4" not in fleet.values(4)["config"]["map"]
    for name in (RELEASE, GFD):
        # Rolled once, by revision 3's new digest; the prune (revision 4) left the template alone.
        assert fleet.daemonset(name).metadata.generation == generations[name] + 1, name
    wait_for(lambda: all(len(p) == 1 for p in fleet.pods().values()) and len(fleet.pods()) == 3,
             what="one plugin pod per GPU node")


def refuse_config_labels(cluster, name):
    """A ValidatingAdmissionPolicy (the API server's own CEL) that refuses any Node update
    carrying the device-plugin config label: a site policy that reserves node labels."""
    from kubernetes import client
    owned = {"gpuprov.test/owned": "true"}
    cluster.create({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
                    "metadata": {"name": name, "labels": owned},
                    "spec": {"failurePolicy": "Fail",
                             "matchConstraints": {"resourceRules": [{
                                 "apiGroups": [""], "apiVersions": ["v1"], "operations": ["UPDATE"],
                                 "resources": ["nodes"]}]},
                             "validations": [{
                                 "expression": "!has(object.metadata.labels) || "
                                               "!('%s' in object.metadata.labels)" % CONFIG_LABEL,
                                 "message": "site policy: device plugin configs are assigned by the platform team"}]}})
    cluster.create({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
                    "metadata": {"name": name, "labels": owned},
                    "spec": {"policyName": name, "validationActions": ["Deny"]}})

    def enforced():
        try:
            cluster.core().patch_node(CPU_NODE, {"metadata": {"labels": {CONFIG_LABEL: "probe"}}}, dry_run="All")
        except client.ApiException as error:
            return error.status == 422
        return False
    wait_for(enforced, what="the admission policy %s to be enforced" % name)


@pytest.fixture
def policy(cluster):
    from kubernetes import client
    name = "no-device-plugin-config-labels"
    yield name
    api = client.AdmissionregistrationV1Api(cluster.api_client())
    for delete in (api.delete_validating_admission_policy_binding, api.delete_validating_admission_policy):
        try:
            delete(name)
        except client.ApiException as error:
            if error.status != 404:
                raise


def test_a_config_label_the_api_server_refuses_names_the_node_the_label_and_what_the_run_left(fleet, policy):
    refuse_config_labels(fleet.cluster, policy)
    proc, recap = fleet.run()
    assert proc.returncode != 0
    lines = [line for line in proc.stdout.splitlines() if "the API server refused to label Node" in line]
    assert lines, proc.stdout
    line = lines[-1]
    assert "the API server refused to label Node gpu-a100-01 nvidia.com/device-plugin.config=mig-mixed: HTTP 422 Invalid: " \
        in line, line
    assert "the API server refused to label Node gpu-t4-01 nvidia.com/device-plugin.config=ts-4: HTTP 422 Invalid: " \
        in line, line
    assert "site policy: device plugin configs are assigned by the platform team" in line
    assert "an admission policy or webhook refused it" in line
    assert ("The device plugin release holds every config in use, old and new, so no node lost its config; "
            "no config was pruned.") in line, line
    assert "Failed to patch object" not in line
    # Nothing was labelled; the release was installed before the labels, and kept every config.
    assert set(fleet.labels().values()) == {None}
    assert set(fleet.config_map()) == {"exclusive", "mig-mixed", "ts-4"}
    assert len(fleet.history()) == 1
