"""What gpuprov says when the real API server (tests/controlplane.py) refuses one of its writes:
the object (kind, namespace, name), the server's code, reason and message, what to do, and what
the run changed before and left as it is. The refusals are the server's own: a
ValidatingAdmissionPolicy (admissionregistration.k8s.io/v1, CEL evaluated by the API server)
answers 422 Invalid, an immutable ConfigMap 422 Invalid, a stale resourceVersion 409 Conflict."""
import json
import os
import re
import subprocess
import sys

import pytest
import yaml

import cluster_objects as objects
from controlplane import wait_for

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROLLOUT = os.path.join(REPO, "tests", "playbooks", "node_rollout.yml")
NODE = "gpu-a100-01"
OWNED = {"gpuprov.test/owned": "true"}

pytestmark = pytest.mark.control_plane


def refuse_on_nodes(cluster, name, expression, message):
    """A policy the API server enforces on every Node create and update (not status)."""
    from kubernetes import client
    cluster.create({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
                    "metadata": {"name": name, "labels": OWNED},
                    "spec": {"failurePolicy": "Fail",
                             "matchConstraints": {"resourceRules": [{
                                 "apiGroups": [""], "apiVersions": ["v1"], "operations": ["UPDATE"],
                                 "resources": ["nodes"]}]},
                             "validations": [{"expression": expression, "message": message}]}})
    cluster.create({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
                    "metadata": {"name": name, "labels": OWNED},
                    "spec": {"policyName": name, "validationActions": ["Deny"]}})

    def enforced():
        # The server loads a new policy within a second or so: a dry run says when it refuses.
        probe = {"metadata": {"labels": {"gpuprov.io/gpu-operands": "paused"},
                              "annotations": {"gpuprov.io/cordoned-by": "gpuprov"}}}
        try:
            cluster.core().patch_node(NODE, probe, dry_run="All")
        except client.ApiException as error:
            return error.status == 422
        return False
    wait_for(enforced, what="the admission policy %s to be enforced" % name)


def remove_policy(cluster, name):
    from kubernetes import client
    api = client.AdmissionregistrationV1Api(cluster.api_client())
    api.delete_validating_admission_policy_binding(name)
    api.delete_validating_admission_policy(name)


@pytest.fixture
def policies(cluster):
    made = []
    yield made
    for name in made:
        remove_policy(cluster, name)


def refusal(out):
    """The message the run ended with (not the module's raw answer before it)."""
    lines = [line for line in out.splitlines() if "the API server refused to" in line]
    assert lines, out
    assert all("Failed to patch object" not in line for line in lines), lines
    return lines[-1]


def run_rollout(cluster, tmp_path, **variables):
    variables = dict({"gpuprov_drain_timeout": 10, "gpuprov_drain_retry_delay": 1, "gpu_mig_poll_interval": 1,
                      "gpu_mig_operand_timeout": 10, "gpu_mig_resources_timeout": 5}, **variables)
    return cluster.run_playbook(ROLLOUT, tmp_path, {NODE: {}}, variables)


def test_a_pause_label_an_admission_policy_refuses_names_the_node_the_reason_and_the_remedy(cluster, tmp_path,
                                                                                          policies):
    cluster.add_node(NODE, labels={"nvidia.com/gpu.present": "true"})
    policies.append("no-operand-pause")
    refuse_on_nodes(cluster, "no-operand-pause", "!has(object.metadata.labels) || "
                    "!('gpuprov.io/gpu-operands' in object.metadata.labels)",
                    "site policy: node labels are set by the platform team")

    proc = run_rollout(cluster, tmp_path, mig_change=True)
    assert proc.returncode != 0
    out = refusal(proc.stdout)
    assert ("gpu-a100-01: the API server refused to label Node gpu-a100-01 gpuprov.io/gpu-operands=paused: "
            "HTTP 422 Invalid: ") in out, out
    assert "site policy: node labels are set by the platform team" in out
    assert ("an admission policy or webhook refused it: ask the cluster's administrators to let gpuprov make this "
            "change (kubectl get validatingadmissionpolicies,validatingwebhookconfigurations)") in out
    assert "The GPU operands were not paused and nothing on the GPUs was changed." in out
    node = cluster.core().read_node(NODE)
    assert "gpuprov.io/gpu-operands" not in node.metadata.labels
    assert "NODE CHANGED" not in proc.stdout


def test_a_cordon_mark_an_admission_policy_refuses_is_not_called_a_drain_problem(cluster, tmp_path, policies):
    cluster.add_node(NODE)
    policies.append("no-gpuprov-annotations")
    refuse_on_nodes(cluster, "no-gpuprov-annotations", "!has(object.metadata.annotations) || "
                    "!('gpuprov.io/cordoned-by' in object.metadata.annotations)",
                    "site policy: no gpuprov annotations")

    proc = run_rollout(cluster, tmp_path)
    assert proc.returncode != 0
    out = refusal(proc.stdout)
    assert ("gpu-a100-01: the API server refused to annotate Node gpu-a100-01 gpuprov.io/cordoned-by=gpuprov: "
            "HTTP 422 Invalid: ") in out, out
    assert "site policy: no gpuprov annotations" in out
    # Not the budget advice of a drain that did not finish: no pod was evicted.
    assert "PodDisruptionBudgets" not in out
    assert "The node was not cordoned, no pod was evicted and nothing on the node was changed." in out
    node = cluster.core().read_node(NODE)
    assert not node.spec.unschedulable
    assert "gpuprov.io/cordoned-by" not in (node.metadata.annotations or {})


def k8s_module(cluster, tmp_path, args):
    """The real kubernetes.core.k8s, ad hoc on localhost: its failure result (or {})."""
    inventory = tmp_path / "inventory.yml"
    inventory.write_text(yaml.safe_dump({"all": {"hosts": {"localhost": {
        "ansible_connection": "local", "ansible_python_interpreter": sys.executable}}}}))
    proc = subprocess.run([os.path.join(os.path.dirname(sys.executable), "ansible"), "-i", str(inventory), "localhost",
                           "-m", "kubernetes.core.k8s", "-a", json.dumps(dict(args, kubeconfig=cluster.kubeconfig))],
                          cwd=REPO, env=dict(cluster.ansible_env(), ANSIBLE_NOCOLOR="1",
                                             ANSIBLE_LOCAL_TEMP=str(tmp_path / "tmp")),
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode != 0, proc.stdout
    return json.loads(re.search(r"=> (\{.*\})\s*$", proc.stdout, re.S).group(1))


def api_error_filter():
    from ansible_collections.gpuprov.gpu.plugins.filter.k8s_api_error import k8s_api_error
    return k8s_api_error


def test_a_write_over_a_newer_version_names_the_conflict_and_the_other_writer(cluster, tmp_path):
    """409 Conflict: the object changed since the resourceVersion the write names."""
    cluster.create(objects.namespace("gpu-system"))
    made = cluster.create({"apiVersion": "v1", "kind": "ConfigMap",
                           "metadata": {"name": "hami-config", "namespace": "gpu-system"}, "data": {"a": "1"}})
    cluster.core().patch_namespaced_config_map("hami-config", "gpu-system", {"data": {"a": "2"}})
    result = k8s_module(cluster, tmp_path, {"state": "patched", "definition": {
        "apiVersion": "v1", "kind": "ConfigMap", "data": {"a": "3"},
        "metadata": {"name": "hami-config", "namespace": "gpu-system",
                     "resourceVersion": made.metadata.resourceVersion}}})
    line = api_error_filter()(result, "ConfigMap", "hami-config", namespace="gpu-system", verb="update")
    assert line.startswith("the API server refused to update ConfigMap gpu-system/hami-config: HTTP 409 Conflict: "), line
    assert "the object has been modified" in line
    assert ("something else changed it while gpuprov wrote it: run again; if it happens each time, find the other "
            "writer in its managed fields (kubectl get configmap -n gpu-system hami-config -o yaml "
            "--show-managed-fields).") in line
    assert cluster.core().read_namespaced_config_map("hami-config", "gpu-system").data == {"a": "2"}


def test_an_immutable_configmap_names_the_field_and_how_to_replace_it(cluster, tmp_path):
    """422 Invalid: data of a ConfigMap made with immutable: true cannot change."""
    cluster.create(objects.namespace("gpu-system"))
    cluster.create({"apiVersion": "v1", "kind": "ConfigMap", "immutable": True,
                    "metadata": {"name": "hami-config", "namespace": "gpu-system"}, "data": {"a": "1"}})
    result = k8s_module(cluster, tmp_path, {"state": "present", "definition": {
        "apiVersion": "v1", "kind": "ConfigMap", "data": {"a": "2"},
        "metadata": {"name": "hami-config", "namespace": "gpu-system"}}})
    line = api_error_filter()(result, "ConfigMap", "hami-config", namespace="gpu-system", verb="apply")
    assert line.startswith("the API server refused to apply ConfigMap gpu-system/hami-config: HTTP 422 Invalid: "), line
    assert "field is immutable when `immutable` is set" in line
    assert ("the field cannot change on the existing object: delete it (kubectl delete configmap -n gpu-system "
            "hami-config) and run again, and gpuprov creates it anew.") in line


def test_an_immutable_hami_configmap_stops_the_cluster_side_before_any_label(cluster, tmp_path):
    """The gpu_device_plugin role's HAMi step applies its per-node config first; someone made
    that ConfigMap immutable. The run stops there, naming it and how to replace it, and says
    that no node was labelled and HAMi's chart was not touched."""
    from gpuprov.planning import plan_inventory
    inventory = tmp_path / "fleet.yml"
    inventory.write_text(yaml.safe_dump({"all": {"hosts": {"gpu-l20-01": {
        "gpuprov_gpu_model": "L20", "gpuprov_gpu_count": 4,
        "gpuprov_sharing": {"strategy": "hami", "hami": {"split_count": 8}}}}}}))
    plans = plan_inventory([str(inventory)]).result["nodes"]
    cluster.add_node("gpu-l20-01")
    cluster.create({"apiVersion": "v1", "kind": "ConfigMap", "immutable": True,
                    "metadata": {"name": "gpuprov-hami-device-plugin", "namespace": "kube-system"},
                    "data": {"config.json": "{}"}})
    playbook = tmp_path / "hami.yml"
    playbook.write_text(yaml.safe_dump([{"name": "HAMi", "hosts": "localhost", "gather_facts": False, "tasks": [{
        "name": "HAMi's cluster side", "ansible.builtin.include_role": {"name": "gpuprov.gpu.gpu_device_plugin",
                                                                        "tasks_from": "hami"},
        "vars": {"gpu_device_plugin_kubeconfig": cluster.kubeconfig, "gpu_device_plugin_plans": plans}}]}]))
    proc = cluster.run_playbook(str(playbook), tmp_path, {"localhost": {}})
    assert proc.returncode != 0
    line = refusal(proc.stdout)
    assert ("the API server refused to apply ConfigMap kube-system/gpuprov-hami-device-plugin: HTTP 422 Invalid: "
            ) in line, line
    assert ("delete it (kubectl delete configmap -n kube-system gpuprov-hami-device-plugin) and run again, and "
            "gpuprov creates it anew.") in line
    assert "No node was labelled and HAMi's chart was not installed or changed." in line
    assert "gpu" not in cluster.core().read_node("gpu-l20-01").metadata.labels
