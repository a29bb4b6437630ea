"""The test control plane itself (tests/controlplane.py, tests/node_agent.py): the upstream
components serve, and the node agent plays the kubelets' part the way the cluster-side tests
rely on."""
import time

import pytest

pytestmark = pytest.mark.control_plane


def wait_for(predicate, timeout=30, what="condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError("timed out waiting for %s" % what)


def test_the_components_are_the_pinned_release_with_rbac_and_dra(cluster):
    from kubernetes import client
    version = client.VersionApi(cluster.api_client()).get_code()
    assert version.git_version == "v1.37.2"
    groups = {g.name: [v.version for v in g.versions] for g in client.ApisApi(cluster.api_client()).get_api_versions().groups}
    assert "v1" in groups["resource.k8s.io"]   # DRA: ResourceSlices and ResourceClaims
    assert "rbac.authorization.k8s.io" in groups
    assert set(cluster.seconds) >= {"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "total"}


def test_a_node_is_ready_and_the_scheduler_binds_a_pod_that_fits(cluster):
    cluster.add_node("n1", extended={"nvidia.com/gpu": 2})
    cluster.add_node("n2")
    core = cluster.core()
    core.create_namespace({"metadata": {"name": "team"}})
    pod = {"metadata": {"name": "train"}, "spec": {"containers": [{
        "name": "main", "image": "cuda", "resources": {"limits": {"nvidia.com/gpu": "2"}}}]}}
    wait_for(lambda: core.list_namespaced_service_account("team").items, what="the team ServiceAccount")
    core.create_namespaced_pod("team", pod)
    running = wait_for(lambda: (lambda p: p if p.status.phase == "Running" else None)(
        core.read_namespaced_pod("train", "team")), what="the pod to run")
    assert running.spec.node_name == "n1"
    assert [c.status for c in running.status.conditions if c.type == "Ready"] == ["True"]
