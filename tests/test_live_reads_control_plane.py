"""`gpuprov pool` and `gpuprov diagnose` in live mode (--kubeconfig) on a real API server
(tests/controlplane.py): what they read is what the server serves, and a user the server's
RBAC refuses gets a clear error naming what to check, not a traceback."""
import json

import pytest

import cluster_objects as objects
from controlplane import wait_for

pytestmark = pytest.mark.control_plane


def test_pool_reads_allocatable_and_what_running_pods_hold(gpuprov, cluster):
    cluster.add_node("a100-mig", extended={"nvidia.com/mig-3g.20gb": 2, "nvidia.com/mig-1g.5gb": 7},
                     labels={"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB", "nvidia.com/gpu.present": "true"})
    cluster.add_node("t4-off", extended={"nvidia.com/gpu": 4}, labels={"nvidia.com/gpu.present": "true"})
    cluster.core().patch_node("t4-off", {"spec": {"unschedulable": True}})
    cluster.create(objects.namespace("team"))
    wait_for(lambda: cluster.core().list_namespaced_service_account("team").items, what="the ServiceAccount")
    cluster.create(objects.deployment("infer", "team", replicas=1,
                                      resources={"limits": {"nvidia.com/mig-3g.20gb": 1}}))
    wait_for(lambda: [p for p in cluster.core().list_namespaced_pod("team").items if p.status.phase == "Running"],
             what="the pod to run")

    code, out, err = gpuprov("pool", "--kubeconfig", cluster.kubeconfig, "-o", "json")
    assert code == 0, err
    table = dict(((row["node"], row["resource"]), row) for row in json.loads(out)["nodes"])
    mig3 = table[("a100-mig", "nvidia.com/mig-3g.20gb")]
    assert (mig3["allocatable"], mig3["allocated"], mig3["free"]) == (2, 1, 1)
    assert table[("a100-mig", "nvidia.com/mig-1g.5gb")]["free"] == 7
    assert table[("t4-off", "nvidia.com/gpu")]["blocked"] == "cordoned"


@pytest.mark.parametrize("command", ["pool", "diagnose"])
def test_a_user_rbac_refuses_gets_a_clear_error(gpuprov, cluster, tmp_path, command):
    """A ServiceAccount with no RBAC binding: the server answers 403 to listing nodes."""
    kubeconfig = cluster.service_account_kubeconfig(str(tmp_path / "nobody.kubeconfig"), "gpuprov-test", "nobody")
    code, out, err = gpuprov(command, "--kubeconfig", kubeconfig)
    assert code != 0
    assert "Traceback" not in err
    assert "cannot list nodes, pods and events: HTTP 403 Forbidden; check the context and that your user may " \
           "list them cluster-wide" in err, err


def test_a_user_rbac_allows_to_read_the_cluster_gets_the_pool(gpuprov, cluster, tmp_path):
    """The same ServiceAccount, bound to a ClusterRole that may list nodes, pods, events,
    ResourceSlices and ResourceClaims."""
    from kubernetes import client
    cluster.add_node("n1", extended={"nvidia.com/gpu": 1})
    kubeconfig = cluster.service_account_kubeconfig(str(tmp_path / "reader.kubeconfig"), "gpuprov-test", "reader")
    rbac = client.RbacAuthorizationV1Api(cluster.api_client())
    owned = {"gpuprov.test/owned": "true"}
    rbac.create_cluster_role({"metadata": {"name": "gpuprov-reader", "labels": owned}, "rules": [
        {"apiGroups": [""], "resources": ["nodes", "pods", "events"], "verbs": ["list"]},
        # pool reads DRA state too (resource.k8s.io/v1); without these it answers 403 naming them.
        {"apiGroups": ["resource.k8s.io"], "resources": ["resourceslices", "resourceclaims"], "verbs": ["list"]}]})
    rbac.create_cluster_role_binding({"metadata": {"name": "gpuprov-reader", "labels": owned},
                                      "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                                                  "name": "gpuprov-reader"},
                                      "subjects": [{"kind": "ServiceAccount", "name": "reader",
                                                    "namespace": "gpuprov-test"}]})
    code, out, err = gpuprov("pool", "--kubeconfig", kubeconfig, "-o", "json")
    assert code == 0, err
    assert [(row["node"], row["free"]) for row in json.loads(out)["nodes"]] == [("n1", 1)]
