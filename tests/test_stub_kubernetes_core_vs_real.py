"""The stub kubernetes.core modules (tests/stubs: k8s, k8s_info, helm, helm_info,
helm_repository; still used by the stub-cluster tests of the gpu_device_plugin, dcgm_exporter
and gpu_mig roles and by the fleet) held against the real modules of the pinned `ansible`
package (kubernetes.core 6.2.0) on a real API server (tests/controlplane.py) with the real Helm
client (tests/helm_repo.py).

Each case is a sequence of module calls, made as the roles make them, once on the stub's fake
cluster and once on the real cluster, from the same starting point. For each call the outcome
must be the same: failed, changed, the result keys the roles read (method, the object's labels,
annotations and data, resources, warnings, a release's status and values), and the class of
message: the API server's Status (code, reason, and the line gpuprov's k8s_api_error filter
makes of it) or Helm's "Error: ..." line. Then what the cluster holds must be the same."""
import json
import os
import re
import subprocess
import sys

import pytest
import yaml

import cluster_objects as objects
import helm_repo
from controlplane import wait_for

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STUBS = os.path.join(REPO, "tests", "stubs")
NODE, MISSING = "gpu-a100-01", "gpu-missing-01"
CONFIG_LABEL = "nvidia.com/device-plugin.config"
CORDON_MARK = "gpuprov.io/cordoned-by"

pytestmark = pytest.mark.control_plane


# -- running the same calls on both sides ---------------------------------------------------------
def run_calls(tmp_path, env, calls, side):
    """One ansible-playbook on localhost with a task per call (module, args), each registered
    with errors ignored, as the roles call them; returns the registered results in order."""
    folder = tmp_path / side
    folder.mkdir(exist_ok=True)
    out = folder / "results.json"
    tasks = [{"name": "call %d" % i, "kubernetes.core." + module: args, "register": "call_%d" % i,
              "ignore_errors": True} for i, (module, args) in enumerate(calls)]
    tasks.append({"name": "results", "ansible.builtin.copy": {
        "content": "{{ [%s] | to_json }}" % ", ".join("call_%d" % i for i in range(len(calls))), "dest": str(out)}})
    playbook = folder / "calls.yml"
    playbook.write_text(yaml.safe_dump([{"name": "calls", "hosts": "localhost", "gather_facts": False,
                                         "tasks": tasks}]))
    inventory = folder / "inventory.yml"
    inventory.write_text(yaml.safe_dump({"all": {"hosts": {"localhost": {
        "ansible_connection": "local", "ansible_python_interpreter": sys.executable}}}}))
    proc = subprocess.run([os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", str(inventory),
                           str(playbook)], cwd=REPO, capture_output=True, text=True, timeout=600,
                          env=dict(env, ANSIBLE_NOCOLOR="1", ANSIBLE_LOCAL_TEMP=str(folder / "tmp")))
    assert out.exists(), proc.stdout + proc.stderr
    return json.loads(out.read_text()), proc.stdout


def stub_env(tmp_path, state, helm_env):
    path = tmp_path / "stub-cluster.json"
    path.write_text(json.dumps(state))
    env = dict(helm_env, ANSIBLE_COLLECTIONS_PATH=os.pathsep.join([STUBS, os.path.join(REPO, "collections")]),
               GPUPROV_FAKE_K8S_STATE=str(path))
    env.pop("GPUPROV_FAKE_CALL_LOG", None)
    return env, path


def api_status(result):
    from ansible_collections.gpuprov.gpu.plugins.plugin_utils.k8s_api_error import status_of
    return status_of(result.get("msg"))[1]


def message_class(result, kind=None, name=None, namespace=None):
    """None for a success; else what kind of answer the failure carries: the API server's
    Status (code, reason and gpuprov's line for it), Helm's error line, or the module's own text."""
    if not result.get("failed"):
        return None
    status = api_status(result)
    if status is not None:
        from ansible_collections.gpuprov.gpu.plugins.filter.k8s_api_error import k8s_api_error
        return ("api", status["code"], status.get("reason"),
                k8s_api_error(result, kind, name, namespace=namespace) if kind else status.get("message"))
    msg = result.get("msg") or ""
    # helm's own error line, as the module wraps it ("...\nstderr: Error: ..."); a repository
    # helm cannot read is one class whatever the cause it names after "cannot be reached".
    errors = [line[line.index("Error: "):] for line in msg.splitlines() if "Error: " in line]
    if errors:
        return ("helm", re.sub(r"(cannot be reached): .*", r"\1", errors[-1]))
    return ("module", msg.splitlines()[0] if msg else "")


def warnings_of(result):
    return sorted(result.get("warnings") or [])


def compare(real, stub, projections, stdout):
    """Every call's outcome the same on both sides (all differences reported at once)."""
    assert len(real) == len(stub) == len(projections), stdout
    differences = []
    for index, (got_real, got_stub, project) in enumerate(zip(real, stub, projections)):
        seen_real, seen_stub = project(got_real), project(got_stub)
        if seen_real != seen_stub:
            differences.append("call %d: real %r, stub %r\nreal result: %s\nstub result: %s" % (
                index, seen_real, seen_stub, json.dumps(got_real)[:2000], json.dumps(got_stub)[:2000]))
    assert not differences, "\n\n".join(differences)


def outcome(result, *keys, **message):
    """failed, changed, the message class and the named keys ("a.b.c" paths) of a result."""
    seen = {"failed": bool(result.get("failed")), "changed": bool(result.get("changed")),
            "message": message_class(result, **message)}
    for key in keys:
        value = result
        for part in key.split("."):
            value = value.get(part) if isinstance(value, dict) else None
        seen[key] = value
    return seen


def subset(mapping, keys):
    return dict((k, v) for k, v in (mapping or {}).items() if k in keys)


@pytest.fixture
def helm_env(tmp_path):
    return helm_repo.helm_env(tmp_path / "helm")


# -- k8s: Node labels and annotations (the config label, the drain's cordon mark, the MIG pause) ---
OURS = (CONFIG_LABEL, "team", "gpuprov.io/gpu-operands")


def node_patch(name, labels=None, annotations=None, merge_type="merge"):
    metadata = {"name": name}
    if labels is not None:
        metadata["labels"] = labels
    if annotations is not None:
        metadata["annotations"] = annotations
    args = {"state": "patched", "definition": {"apiVersion": "v1", "kind": "Node", "metadata": metadata}}
    if merge_type:
        args["merge_type"] = merge_type
    return "k8s", args


def test_node_patches_answer_as_the_real_module(cluster, tmp_path, helm_env):
    cluster.add_node(NODE, labels={"team": "a"})
    cluster.core().patch_node(NODE, {"metadata": {"annotations": {CORDON_MARK: "gpuprov"}}})
    stub = {"nodes": {NODE: {"labels": {"kubernetes.io/hostname": NODE, "team": "a"},
                             "annotations": {CORDON_MARK: "gpuprov"}}}}

    def labelled(result):
        return dict(outcome(result, "method", kind="Node", name=NODE),
                    labels=subset(((result.get("result") or {}).get("metadata") or {}).get("labels"), OURS),
                    warnings=warnings_of(result))

    calls = [
        # gpu_device_plugin: the config label (a merge patch; the other label stays).
        node_patch(NODE, labels={CONFIG_LABEL: "ts-4"}),
        node_patch(NODE, labels={CONFIG_LABEL: "ts-4"}),
        # gpu_mig's pause and resume: no merge_type (strategic merge, then merge); null removes.
        node_patch(NODE, labels={"gpuprov.io/gpu-operands": "paused"}, merge_type=None),
        node_patch(NODE, labels={"gpuprov.io/gpu-operands": None}, merge_type=None),
        # node_drain's cordon mark, removed.
        node_patch(NODE, annotations={CORDON_MARK: None}, merge_type=None),
        # A node that is not there: patched never creates.
        node_patch(MISSING, labels={CONFIG_LABEL: "ts-4"}),
        # A JSON patch must be a list of operations; a mapping is not one.
        node_patch(NODE, labels={CONFIG_LABEL: "ts-2"}, merge_type="json"),
    ]
    projections = [labelled] * len(calls)
    real, stdout = run_calls(tmp_path, cluster.ansible_env(), [
        (m, dict(a, kubeconfig=cluster.kubeconfig)) for m, a in calls], "real")
    env, path = stub_env(tmp_path, stub, helm_env)
    stubbed, stub_stdout = run_calls(tmp_path, env, calls, "stub")
    compare(real, stubbed, projections, stdout + stub_stdout)

    node = cluster.core().read_node(NODE)
    stub_node = json.loads(path.read_text())["nodes"][NODE]
    assert subset(node.metadata.labels, OURS) == subset(stub_node["labels"], OURS) == {
        "team": "a", CONFIG_LABEL: "ts-4"}
    assert CORDON_MARK not in (node.metadata.annotations or {}) and CORDON_MARK not in stub_node["annotations"]
    assert MISSING not in json.loads(path.read_text())["nodes"]


# -- k8s: a ConfigMap, state present (HAMi's per-node config) -------------------------------------
def config_map(namespace, data, labels=None, name="hami-config"):
    return "k8s", {"state": "present", "definition": {
        "apiVersion": "v1", "kind": "ConfigMap", "data": data,
        "metadata": dict({"name": name, "namespace": namespace}, **({"labels": labels} if labels else {}))}}


def test_configmap_applies_answer_as_the_real_module(cluster, tmp_path, helm_env):
    cluster.create(objects.namespace("gpu-system"))
    stub = {"namespaces": ["default", "kube-system", "gpu-system"]}

    def applied(namespace):
        def project(result):
            obj = result.get("result") or {}
            return dict(outcome(result, "method", kind="ConfigMap", name="hami-config", namespace=namespace),
                        data=obj.get("data"), labels=subset((obj.get("metadata") or {}).get("labels"), ("a", "b")))
        return project

    calls = [
        config_map("gpu-system", {"n1": "one", "n2": "two"}, labels={"a": "1"}),
        config_map("gpu-system", {"n1": "one", "n2": "two"}, labels={"a": "1"}),
        # Fewer keys and another label: an update patches, it does not replace.
        config_map("gpu-system", {"n1": "uno"}, labels={"b": "2"}),
        config_map("no-such-namespace", {"n1": "one"}),
        config_map("gpu-system", {"n1": 1}, name="numbers"),
    ]
    projections = [applied("gpu-system")] * 3 + [applied("no-such-namespace"), applied("gpu-system")]
    real, stdout = run_calls(tmp_path, cluster.ansible_env(), [
        (m, dict(a, kubeconfig=cluster.kubeconfig)) for m, a in calls], "real")
    env, path = stub_env(tmp_path, stub, helm_env)
    stubbed, stub_stdout = run_calls(tmp_path, env, calls, "stub")
    compare(real, stubbed, projections, stdout + stub_stdout)

    live = cluster.core().read_namespaced_config_map("hami-config", "gpu-system")
    kept = json.loads(path.read_text())["configmaps"]["gpu-system/hami-config"]
    assert live.data == kept["data"] == {"n1": "uno", "n2": "two"}
    assert subset(live.metadata.labels, ("a", "b")) == kept["labels"] == {"a": "1", "b": "2"}


# -- k8s_info: what the roles read -----------------------------------------------------------------
def test_reads_answer_as_the_real_module(cluster, tmp_path, helm_env):
    cluster.add_node(NODE, labels={"team": "a"}, extended={"nvidia.com/gpu": 4})
    cluster.core().patch_node(NODE, {"spec": {"unschedulable": True}})
    cluster.create(objects.namespace("team"))
    wait_for(lambda: cluster.core().list_namespaced_service_account("team").items, what="the ServiceAccount")
    cluster.create(objects.bare_pod("scratch", "team", NODE))
    wait_for(lambda: [p for p in cluster.core().list_namespaced_pod("team").items if p.status.phase == "Running"],
             what="the pod")
    stub = {"nodes": {NODE: {"labels": {"kubernetes.io/hostname": NODE, "team": "a"}, "unschedulable": True,
                             "allocatable": {"nvidia.com/gpu": "4"}}},
            "pods": {"team/scratch": {"nodeName": NODE, "labels": {"app": "scratch"}, "owner": None}}}

    def nodes(result):
        return dict(outcome(result, "api_found"), resources=[
            (r["metadata"]["name"], subset(r["metadata"].get("labels"), OURS), bool(r["spec"].get("unschedulable")),
             subset(r["status"].get("allocatable"), ("nvidia.com/gpu",)))
            for r in result.get("resources") or []])

    def pods(result):
        return dict(outcome(result, "api_found"), resources=[
            (r["metadata"]["namespace"], r["metadata"]["name"], r["spec"]["nodeName"],
             [o["kind"] for o in r["metadata"].get("ownerReferences") or []], r["status"]["phase"],
             [c["status"] for c in r["status"].get("conditions") or [] if c["type"] == "Ready"])
            for r in result.get("resources") or []])

    calls = [
        ("k8s_info", {"kind": "Node"}),
        ("k8s_info", {"kind": "Node", "name": MISSING}),
        ("k8s_info", {"kind": "Pod", "namespace": "team", "label_selectors": ["app=scratch"],
                      "field_selectors": ["spec.nodeName=%s" % NODE]}),
        ("k8s_info", {"kind": "Pod", "namespace": "team", "label_selectors": ["app!=scratch"]}),
        ("k8s_info", {"api_version": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                      "name": "servicemonitors.monitoring.coreos.com"}),
    ]
    projections = [nodes, nodes, pods, pods, nodes]
    real, stdout = run_calls(tmp_path, cluster.ansible_env(), [
        (m, dict(a, kubeconfig=cluster.kubeconfig)) for m, a in calls], "real")
    env, _path = stub_env(tmp_path, stub, helm_env)
    stubbed, stub_stdout = run_calls(tmp_path, env, calls, "stub")
    compare(real, stubbed, projections, stdout + stub_stdout)
    assert real[0]["resources"] and real[2]["resources"]  # the cases read something


# -- helm_repository, helm, helm_info ---------------------------------------------------------------
@pytest.fixture(scope="module")
def charts(tmp_path_factory):
    repository = helm_repo.gpu_charts_repository(tmp_path_factory.mktemp("chart-repository"))
    yield repository
    repository.stop()


@pytest.fixture
def releases(cluster, helm_env):
    yield
    for namespace, name in helm_repo.releases(helm_env, cluster.kubeconfig):
        helm_repo.helm(["uninstall", name, "-n", namespace, "--no-hooks", "--kubeconfig", cluster.kubeconfig],
                       helm_env, check=False)


def test_chart_repositories_and_releases_answer_as_the_real_modules(cluster, tmp_path, helm_env, charts, releases):
    helm = helm_repo.helm_binary()
    version = charts.charts["nvidia-device-plugin"]
    # nfd.enabled false, as the role sets it: the chart's NFD subchart (condition
    # "nfd.enabled,gfd.enabled") has a post-delete hook Job, which the node agent never completes.
    values = {"config": {"map": {"exclusive": "version: v1\n"}, "default": "exclusive"}, "gfd": {"enabled": True},
              "nfd": {"enabled": False}}
    changed_values = {"config": {"map": {"exclusive": "version: v1\n", "ts-4": "version: v1\n"},
                                 "default": "exclusive"}, "gfd": {"enabled": True}, "nfd": {"enabled": False}}

    def release(name="nvidia-device-plugin", namespace="nvidia-device-plugin", chart="gpuprov-test/nvidia-device-plugin",
                release_values=None, **extra):
        return "helm", dict({"release_name": name, "release_namespace": namespace, "chart_ref": chart,
                             "chart_version": version, "release_values": release_values or values,
                             "create_namespace": True, "update_repo_cache": True, "wait": False,
                             "binary_path": helm}, **extra)

    def info(name="nvidia-device-plugin", namespace="nvidia-device-plugin"):
        return "helm_info", {"release_name": name, "release_namespace": namespace, "binary_path": helm}

    def repo(name, url):
        return "helm_repository", {"repo_name": name, "repo_url": url, "binary_path": helm}

    def status(result):
        found = result.get("status") or {}
        return dict(outcome(result), status=found and subset(found, ("name", "namespace", "revision", "chart",
                                                                    "status", "values")),
                    has_status="status" in result)

    def repository(result):
        return outcome(result)

    calls = [
        release(),                                                      # no repository yet: helm repo update fails
        repo("gpuprov-test", charts.url),
        repo("gpuprov-test", charts.url),
        repo("gpuprov-test", charts.url + "other/"),                     # the name is taken
        repo("gpuprov-oci", "oci://registry.example.com/charts"),        # OCI: no repository entry
        release(chart="gpuprov-missing/nvidia-device-plugin"),           # a repository never added
        info(),                                                          # not installed yet
        release(create_namespace=False),                                 # its namespace is missing
        release(),
        info(),
        release(),                                                       # nothing to change
        release(release_values=changed_values),
        info(),
        ("helm", {"release_name": "nvidia-device-plugin", "release_namespace": "nvidia-device-plugin",
                  "release_state": "absent", "binary_path": helm}),
        ("helm", {"release_name": "nvidia-device-plugin", "release_namespace": "nvidia-device-plugin",
                  "release_state": "absent", "binary_path": helm}),
        info(),
    ]
    projections = [status, repository, repository, repository, repository, status, status, status, status, status,
                   status, status, status, status, status, status]
    real, stdout = run_calls(tmp_path, dict(cluster.ansible_env(), **helm_env), [
        (m, dict(a, kubeconfig=cluster.kubeconfig) if m != "helm_repository" else a) for m, a in calls], "real")
    env, _path = stub_env(tmp_path, {}, helm_repo.helm_env(tmp_path / "stub-helm"))
    stubbed, stub_stdout = run_calls(tmp_path, env, calls, "stub")
    compare(real, stubbed, projections, stdout + stub_stdout)
    assert real[8]["changed"] and real[9]["status"]["values"] == values  # the cases did install
