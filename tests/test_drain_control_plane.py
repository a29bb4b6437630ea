"""Drains on a real API server with the real kubernetes.core modules, through both ways gpuprov
drains a node: the site converge (playbooks/tasks/drain_node.yml around a change) and the
kubelet_topology role (around a kubelet restart). The eviction API answers 429 for a
PodDisruptionBudget the disruption controller computed; DaemonSet pods are the DaemonSet
controller's; the node agent (tests/node_agent.py) runs the pods and removes them after their
grace period. Each drain must behave as `kubectl drain --ignore-daemonsets
--delete-emptydir-data` does."""
import os

import pytest

import cluster_objects as objects
from controlplane import wait_for

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PLAYBOOKS = {"site": os.path.join(REPO, "tests", "playbooks", "node_rollout.yml"),
             "kubelet": os.path.join(REPO, "tests", "playbooks", "kubelet_drain.yml")}
NODE, OTHER = "gpu-a100-01", "gpu-a100-02"
TEAM = "team"

pytestmark = pytest.mark.control_plane


def run_playbook(cluster, tmp_path, path, on_line=None, **variables):
    variables = dict({"gpuprov_drain_timeout": 20, "gpuprov_drain_retry_delay": 1,
                      "kubelet_topology_drain_timeout": 20, "kubelet_topology_drain_retry_delay": 1}, **variables)
    return cluster.run_playbook(path, tmp_path, {NODE: {}}, variables, on_line=on_line)


def pods(cluster, ns=None, node=NODE):
    core = cluster.core()
    found = core.list_namespaced_pod(ns) if ns else core.list_pod_for_all_namespaces()
    return [p for p in found.items if p.spec.node_name == node]


def running(cluster, ns, count, node=NODE):
    return wait_for(lambda: (lambda ps: ps if len(ps) == count and all(p.status.phase == "Running" for p in ps)
                             else None)([p for p in pods(cluster, ns, node) if not p.metadata.deletion_timestamp]),
                    what="%d running pod(s) in %s on %s" % (count, ns, node))


@pytest.fixture
def gpu_node(cluster):
    """A GPU node running the device plugin chart's pods (each with an emptyDir, as the chart's),
    and a second node for replacements."""
    cluster.add_node(NODE, labels={"nvidia.com/gpu.present": "true"})
    cluster.add_node(OTHER, labels={"nvidia.com/gpu.present": "true"})
    for manifest in [objects.namespace(objects.PLUGIN_NAMESPACE), objects.namespace(TEAM),
                     objects.device_plugin_configmap({"exclusive": "version: v1\n"}),
                     *objects.device_plugin_daemonsets(default_config="exclusive")]:
        cluster.create(manifest)
    operands = running(cluster, objects.PLUGIN_NAMESPACE, 2)
    wait_for(lambda: cluster.core().list_namespaced_service_account(TEAM).items, what="team's ServiceAccount")
    return {p.metadata.name: p.metadata.uid for p in operands}


def node(cluster, name=NODE):
    return cluster.core().read_node(name)


def assert_uncordoned_and_unmarked(cluster):
    current = node(cluster)
    assert not current.spec.unschedulable
    assert "gpuprov.io/cordoned-by" not in (current.metadata.annotations or {})


def assert_operands_untouched(cluster, operands):
    now = {p.metadata.name: p.metadata.uid for p in pods(cluster, objects.PLUGIN_NAMESPACE)}
    assert now == operands, "the drain evicted GPU DaemonSet pods (replaced by the DaemonSet controller)"
    stopped = [e["pod"] for e in cluster.agent.events() if e["event"] == "stop"
               and e["pod"].startswith(objects.PLUGIN_NAMESPACE + "/")]
    assert stopped == []


@pytest.mark.parametrize("path", ["site", "kubelet"])
def test_refused_evictions_are_retried_until_a_replacement_is_ready(cluster, gpu_node, tmp_path, path):
    """The budget allows no disruption while the only replica runs here; a few seconds in, the
    Deployment gets a second replica on the other node, and the drain goes through."""
    cluster.create(objects.deployment("web", TEAM, replicas=1, node_selector={"kubernetes.io/hostname": NODE}))
    cluster.create(objects.pod_disruption_budget("web", TEAM, "web", min_available=1))
    running(cluster, TEAM, 1)
    wait_for(lambda: cluster.policy().read_namespaced_pod_disruption_budget("web", TEAM).status.expected_pods == 1,
             what="the disruption controller to count the pod")
    # Once an eviction was refused (the drain says it retries), a second replica may start;
    # the cordon keeps it off this node.
    scaled = []

    def scale_up(line):
        if "FAILED - RETRYING" in line and "Evict the node's pods" in line and not scaled:
            scaled.append(line)
            cluster.apps().patch_namespaced_deployment(
                "web", TEAM, {"spec": {"replicas": 2, "template": {"spec": {"nodeSelector": None}}}})
    proc = run_playbook(cluster, tmp_path, PLAYBOOKS[path], on_line=scale_up)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert scaled, proc.stdout  # the budget refused it first
    assert [p.metadata.name for p in pods(cluster, TEAM)] == []
    assert_operands_untouched(cluster, gpu_node)
    assert_uncordoned_and_unmarked(cluster)


@pytest.mark.parametrize("path", ["site", "kubelet"])
def test_a_budget_that_never_allows_stops_the_node_uncordoned_before_any_change(cluster, gpu_node, tmp_path, path):
    cluster.create(objects.deployment("web", TEAM, replicas=1, node_selector={"kubernetes.io/hostname": NODE}))
    cluster.create(objects.pod_disruption_budget("web", TEAM, "web", min_available=1))
    web = running(cluster, TEAM, 1)[0]
    wait_for(lambda: cluster.policy().read_namespaced_pod_disruption_budget("web", TEAM).status.current_healthy == 1,
             what="the budget to see the pod")
    proc = run_playbook(cluster, tmp_path, PLAYBOOKS[path], gpuprov_drain_timeout=4, kubelet_topology_drain_timeout=4)
    assert proc.returncode != 0
    assert "NODE CHANGED" not in proc.stdout and "KUBELET RESTARTED" not in proc.stdout
    assert "drain of node gpu-a100-01 did not finish" in proc.stdout, proc.stdout
    assert "Cannot evict pod as it would violate the pod's disruption budget" in proc.stdout
    assert "it was uncordoned again" in proc.stdout
    assert [p.metadata.uid for p in pods(cluster, TEAM)] == [web.metadata.uid]
    assert_uncordoned_and_unmarked(cluster)


@pytest.mark.parametrize("path", ["site", "kubelet"])
def test_a_pod_still_terminating_stops_the_node(cluster, gpu_node, tmp_path, path):
    """Its container takes an hour to stop on SIGTERM and its grace period allows that: the
    eviction is accepted, the pod stays (terminating, its GPUs still in use), and nothing changes."""
    cluster.create(objects.deployment("slow", TEAM, replicas=1, node_selector={"kubernetes.io/hostname": NODE},
                                      grace=3600, shutdown_seconds=3600))
    running(cluster, TEAM, 1)
    proc = run_playbook(cluster, tmp_path, PLAYBOOKS[path], gpuprov_drain_timeout=3, kubelet_topology_drain_timeout=3)
    assert proc.returncode != 0
    assert "NODE CHANGED" not in proc.stdout and "KUBELET RESTARTED" not in proc.stdout
    assert "pods still on the node after 3s: team/slow-" in proc.stdout, proc.stdout
    terminating = [p for p in pods(cluster, TEAM) if p.metadata.deletion_timestamp]
    assert len(terminating) == 1
    assert_uncordoned_and_unmarked(cluster)


@pytest.mark.parametrize("path", ["site", "kubelet"])
def test_gpu_daemonset_pods_with_an_emptydir_are_not_evicted(cluster, gpu_node, tmp_path, path):
    cluster.create(objects.deployment("web", TEAM, replicas=1, node_selector={"kubernetes.io/hostname": NODE},
                                      emptydir=True))
    uid = running(cluster, TEAM, 1)[0].metadata.uid
    proc = run_playbook(cluster, tmp_path, PLAYBOOKS[path])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # The workload went (its emptyDir data with it, as with --delete-emptydir-data); its
    # replacement, pinned to this node, may be back after the uncordon.
    assert uid not in [p.metadata.uid for p in cluster.core().list_namespaced_pod(TEAM).items]
    assert_operands_untouched(cluster, gpu_node)


@pytest.mark.parametrize("path", ["site", "kubelet"])
def test_a_pod_no_controller_manages_is_never_deleted_without_opting_in(cluster, gpu_node, tmp_path, path):
    """kubectl drain refuses such a pod without --force, with or without --delete-emptydir-data;
    kubernetes.core's k8s_drain checks emptyDir before owners, so delete_emptydir_data alone would
    evict it, and nothing would bring it back."""
    cluster.create(objects.bare_pod("scratch", TEAM, NODE, emptydir=True))
    running(cluster, TEAM, 1)
    uid = pods(cluster, TEAM)[0].metadata.uid
    proc = run_playbook(cluster, tmp_path, PLAYBOOKS[path])
    assert proc.returncode != 0
    assert "NODE CHANGED" not in proc.stdout and "KUBELET RESTARTED" not in proc.stdout
    force = {"site": "gpuprov_drain_force", "kubelet": "kubelet_topology_drain_force"}[path]
    assert "pods no controller manages would be deleted for good: team/scratch" in proc.stdout, proc.stdout
    assert "set %s: true" % force in proc.stdout
    left = pods(cluster, TEAM)
    assert [p.metadata.uid for p in left] == [uid] and not left[0].metadata.deletion_timestamp
    assert_uncordoned_and_unmarked(cluster)

    forced = run_playbook(cluster, tmp_path, PLAYBOOKS[path], **{force: True})
    assert forced.returncode == 0, forced.stdout + forced.stderr
    assert pods(cluster, TEAM) == []


def web_on_node(cluster):
    cluster.create(objects.deployment("web", TEAM, replicas=1, node_selector={"kubernetes.io/hostname": NODE}))
    return running(cluster, TEAM, 1)[0].metadata.uid


def cordon(cluster, annotations=None):
    cluster.core().patch_node(NODE, {"spec": {"unschedulable": True}, "metadata": {"annotations": annotations or {}}})


MARKERS = {"site": "NODE CHANGED", "kubelet": "KUBELET RESTARTED"}


@pytest.mark.parametrize("path", ["site", "kubelet"])
def test_the_cordon_is_marked_while_gpuprov_holds_it_and_undone_after(cluster, gpu_node, tmp_path, path):
    uid = web_on_node(cluster)
    during = []

    def look(line):
        if MARKERS[path] in line and not during:
            current = node(cluster)
            during.append((current.spec.unschedulable, (current.metadata.annotations or {}).get("gpuprov.io/cordoned-by")))
    proc = run_playbook(cluster, tmp_path, PLAYBOOKS[path], on_line=look)
    assert proc.returncode == 0, proc.stdout
    assert during == [(True, "gpuprov")]
    assert uid not in [p.metadata.uid for p in cluster.core().list_namespaced_pod(TEAM).items]
    assert_uncordoned_and_unmarked(cluster)
    assert_operands_untouched(cluster, gpu_node)


@pytest.mark.parametrize("path", ["site", "kubelet"])
def test_a_node_cordoned_before_the_run_stays_cordoned(cluster, gpu_node, tmp_path, path):
    web_on_node(cluster)
    cordon(cluster)
    proc = run_playbook(cluster, tmp_path, PLAYBOOKS[path])
    assert proc.returncode == 0, proc.stdout
    assert MARKERS[path] in proc.stdout
    assert "was cordoned before this run and stays cordoned" in proc.stdout
    current = node(cluster)
    assert current.spec.unschedulable and "gpuprov.io/cordoned-by" not in (current.metadata.annotations or {})


def test_a_node_cordoned_before_the_run_stays_cordoned_when_the_drain_fails(cluster, gpu_node, tmp_path):
    web_on_node(cluster)
    cluster.create(objects.pod_disruption_budget("web", TEAM, "web", min_available=1))
    wait_for(lambda: cluster.policy().read_namespaced_pod_disruption_budget("web", TEAM).status.current_healthy == 1,
             what="the budget to see the pod")
    cordon(cluster)
    proc = run_playbook(cluster, tmp_path, PLAYBOOKS["site"], gpuprov_drain_timeout=2)
    assert proc.returncode != 0 and "it stays cordoned, as it was before the run" in proc.stdout, proc.stdout
    assert node(cluster).spec.unschedulable


@pytest.mark.parametrize("path", ["site", "kubelet"])
def test_a_node_a_failed_gpuprov_run_left_cordoned_is_uncordoned_by_the_next_run(cluster, gpu_node, tmp_path, path):
    web_on_node(cluster)
    if path == "site":
        failed = run_playbook(cluster, tmp_path, PLAYBOOKS[path], fail_change=True)
        assert failed.returncode != 0 and "NODE CHANGE FAILED" in failed.stdout, failed.stdout
        current = node(cluster)
        # Cordoned by gpuprov, and marked so: not taken for a node somebody else cordoned.
        assert current.spec.unschedulable
        assert current.metadata.annotations["gpuprov.io/cordoned-by"] == "gpuprov"
    else:
        cordon(cluster, {"gpuprov.io/cordoned-by": "gpuprov"})
    again = run_playbook(cluster, tmp_path, PLAYBOOKS[path])
    assert again.returncode == 0, again.stdout
    assert "was cordoned before this run" not in again.stdout
    assert_uncordoned_and_unmarked(cluster)


def test_a_node_the_caller_drained_is_not_drained_or_uncordoned_again_by_the_kubelet_role(cluster, gpu_node, tmp_path):
    uid = web_on_node(cluster)
    cordon(cluster)
    proc = run_playbook(cluster, tmp_path, PLAYBOOKS["kubelet"], kubelet_topology_node_drained=True)
    assert proc.returncode == 0, proc.stdout
    assert [p.metadata.uid for p in pods(cluster, TEAM)] == [uid]
    assert node(cluster).spec.unschedulable
