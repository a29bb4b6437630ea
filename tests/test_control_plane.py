"""The test control plane itself (tests/controlplane.py, tests/node_agent.py): the upstream
components serve, and the node agent plays the kubelets' part the way the cluster-side tests
rely on."""
import json
import os
import signal
import sys
import time

import pytest

from controlplane import ControlPlane, ControlPlaneError

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


def test_a_controller_manager_that_exits_is_started_again_as_the_kubelet_restarts_a_static_pod(cluster):
    """kube-controller-manager exits 1 when the API server does not answer its health check within
    10 s of its start (a loaded machine); kubeadm runs it as a static pod the kubelet restarts.
    The harness restarts it too, so a namespace made after the exit still gets its ServiceAccount."""
    log_path = os.path.join(cluster.ready["dir"], "logs", "kube-controller-manager.log")
    os.kill(cluster.ready["pids"]["kube-controller-manager"], signal.SIGKILL)
    wait_for(lambda: "starting it again" in open(log_path).read(), what="the supervisor's restart note")
    core = cluster.core()
    core.create_namespace({"metadata": {"name": "after-restart"}})
    accounts = wait_for(lambda: core.list_namespaced_service_account("after-restart").items, timeout=90,
                        what="the ServiceAccount the restarted controller manager makes")
    assert [a.metadata.name for a in accounts] == ["default"]
    with open(log_path) as handle:
        log = handle.read()
    assert "kube-controller-manager exited (signal: killed); starting it again in 1s (restart 1 of 5)" in log
    assert "kube-controller-manager exited (signal: killed)" in cluster.restarts()


def _wrapper(tmp_path, body):
    """A stand-in for the controlplane binary: a script that records each run, then BODY."""
    script = tmp_path / "controlplane"
    script.write_text("#!%s\nimport os, sys\nopen(%r, 'a').write('run\\n')\n%s\n"
                      % (sys.executable, str(tmp_path / "runs"), body))
    script.chmod(0o755)
    return str(script)


def _runs(tmp_path):
    return (tmp_path / "runs").read_text().count("run")


def test_a_start_that_lost_a_port_to_another_process_is_run_again_on_new_ports(tmp_path):
    """`up` probes free ports and binds them later; a port taken in between fails that start
    with "address already in use", and the second start (new ports) is the one that serves."""
    from ansible_collections.gpuprov.gpu.tests.unit.plugins.test_support.peerlib import peer_binary

    real = peer_binary("controlplane")
    error = {"error": "etcd: listen tcp 127.0.0.1:2379: bind: address already in use"}
    binary = _wrapper(tmp_path, "if open(%r).read().count('run') == 1:\n    print(%r)\n    sys.exit(1)\n"
                                "os.execv(%r, [%r] + sys.argv[1:])" % (str(tmp_path / "runs"), json.dumps(error), real, real))
    plane = ControlPlane.start(str(tmp_path / "plane"), binary=binary, timeout=120)
    try:
        assert _runs(tmp_path) == 2
        assert plane.core().list_namespace().items
    finally:
        plane.stop()


def test_a_start_that_fails_otherwise_is_reported_at_once_with_its_cause(tmp_path):
    error = {"error": "kube-controller-manager exited (exit status 1; started 6 times; last error in its log: "
                      "E1207 failed to wait for apiserver being healthy) before https://127.0.0.1:1/healthz answered"}
    binary = _wrapper(tmp_path, "print(%r)\nsys.exit(1)" % json.dumps(error))
    with pytest.raises(ControlPlaneError) as raised:
        ControlPlane.start(str(tmp_path / "plane"), binary=binary)
    assert _runs(tmp_path) == 1
    assert str(raised.value).splitlines()[0] == "control plane did not start: " + error["error"]
