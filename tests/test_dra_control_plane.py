"""DRA against the real control plane (tests/controlplane.py: kube-apiserver, kube-scheduler and
kube-controller-manager of the pinned Kubernetes release, DRA on by default since 1.34).

The slices `gpuprov export dra` renders for fit's inventory are published as NVIDIA's driver
would (one pool per node, named after it), the objects of `gpuprov fit -o dra` are applied, and
the real scheduler allocates every claim: to devices of the node fit chose, of the model and MIG
profile fit chose. One copy more than the packing holds stays Pending with the scheduler's own
reason, which `gpuprov diagnose` reads and names, and `gpuprov pool` counts the devices.
"""
import json
import os
import time

import pytest
import yaml

import gpuprov.cmd_diagnose  # noqa: F401
import gpuprov.cmd_export  # noqa: F401
import gpuprov.cmd_fit  # noqa: F401
import gpuprov.cmd_pool  # noqa: F401

pytestmark = pytest.mark.control_plane

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SERVING = os.path.join(REPO, "examples", "fit", "serving.yaml")
SHARED = """
workloads:
  - {name: Chat, memory: 6, replicas: 3, cpu: 1, host_memory: 1Gi}
  - {name: Rerank, memory: 4, cpu: 1, host_memory: 1Gi}
  - {name: Big, memory: 14, cpu: 1, host_memory: 1Gi}
pool:
  - {model: T4, count: 4, gpus_per_node: 2}
"""
NAMESPACE = "dra-serving"
TIMEOUT = 120


def documents(text):
    return [d for d in yaml.safe_load_all(text) if d]


def run(gpuprov, *args):
    code, out, err = gpuprov(*args)
    assert code == 0, err
    return out


@pytest.fixture
def dra_cluster(request):
    """The control plane, with what a test publishes cluster-wide (slices, classes) removed after it.

    It comes from the `cluster` fixture of tests/conftest.py (tests/controlplane.py); a tree
    without that fixture skips, or fails under GPUPROV_REQUIRE_PEERS=1 as every peer test does."""
    try:
        cluster = request.getfixturevalue("cluster")
    except pytest.FixtureLookupError:
        reason = "no control plane fixture (`cluster`, tests/controlplane.py) in this tree"
        if os.environ.get("GPUPROV_REQUIRE_PEERS") == "1":
            pytest.fail(reason)
        pytest.skip(reason)
    from kubernetes import client

    resource = client.ResourceV1Api(cluster.api_client())
    yield cluster, resource
    for item in resource.list_resource_slice(label_selector="app.kubernetes.io/managed-by=gpuprov").items:
        resource.delete_resource_slice(item.metadata.name)
    for name in ("gpu.nvidia.com", "mig.nvidia.com"):
        try:
            resource.delete_device_class(name)
        except client.ApiException as error:
            if error.status != 404:
                raise


def publish(gpuprov, cluster, tmp_path, fit_input):
    """Nodes of fit's inventory, their slices as the driver publishes them, and the driver's classes."""
    inventory = tmp_path / "fit-inventory.yml"
    run(gpuprov, "fit", str(fit_input), "-o", "inventory", "-w", str(inventory))
    exported = documents(run(gpuprov, "export", "-i", str(inventory), "dra"))
    slices = [d for d in exported if d["kind"] == "ResourceSlice"]
    for resource_slice in slices:
        name = resource_slice["spec"]["nodeName"]
        cluster.add_node(name, labels={"kubernetes.io/hostname": name}, cpu="64", memory="512Gi")
    for document in exported:          # DeviceClasses first in the file order does not matter to the API
        cluster.create(document)
    return dict((s["spec"]["nodeName"], dict((d["name"], d) for d in s["spec"]["devices"])) for s in slices)


def apply_fit(gpuprov, cluster, fit_input, namespace):
    cluster.core().create_namespace({"metadata": {"name": namespace}})
    applied = documents(run(gpuprov, "fit", str(fit_input), "-o", "dra", "-n", namespace))
    for document in applied:
        cluster.create(document)
    return applied


def wait_for(what, check, timeout=TIMEOUT):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = check()
        if last is True:
            return
        time.sleep(0.5)
    raise AssertionError("%s not reached after %ss: %s" % (what, timeout, last))


def pods_and_claims(cluster, resource, namespace):
    pods = cluster.core().list_namespaced_pod(namespace).items
    claims = dict((c.metadata.name, c) for c in resource.list_namespaced_resource_claim(namespace).items)
    return pods, claims


def claim_of(pod):
    (entry,) = pod.spec.resource_claims
    if entry.resource_claim_name:
        return entry.resource_claim_name
    for status in pod.status.resource_claim_statuses or []:
        if status.name == entry.name:
            return status.resource_claim_name
    return None


def all_running(cluster, resource, namespace, expected_pods):
    pods, claims = pods_and_claims(cluster, resource, namespace)
    if len(pods) != expected_pods:
        return "%d of %d pods" % (len(pods), expected_pods)
    waiting = [p.metadata.name for p in pods if p.status.phase != "Running" or not p.spec.node_name]
    unallocated = [name for name, c in claims.items() if not (c.status and c.status.allocation)]
    return True if not waiting and not unallocated else "pods waiting %s, claims unallocated %s" % (
        waiting, unallocated)


def allocated_devices(claim):
    return [(r.pool, r.device) for r in claim.status.allocation.devices.results]


def test_the_scheduler_allocates_the_serving_packing(gpuprov, dra_cluster, tmp_path):
    cluster, resource = dra_cluster
    published = publish(gpuprov, cluster, tmp_path, SERVING)
    applied = apply_fit(gpuprov, cluster, SERVING, NAMESPACE)
    deployments = dict((d["metadata"]["name"], d) for d in applied if d["kind"] == "Deployment")
    templates = dict((d["metadata"]["name"], d) for d in applied if d["kind"] == "ResourceClaimTemplate")
    replicas = sum(d["spec"]["replicas"] for d in deployments.values())
    wait_for("every pod Running with its claims allocated", lambda: all_running(cluster, resource, NAMESPACE, replicas))

    pods, claims = pods_and_claims(cluster, resource, NAMESPACE)
    used = []
    for pod in pods:
        workload = pod.metadata.labels["gpuprov.io/workload"]
        placement = deployments[workload]["spec"]["template"]["metadata"]["annotations"]["gpuprov.io/placement"]
        fit_node, fit_gpus = placement.split(" GPU ")[0], placement.split(" GPU ")[1].split(" ")[0]
        claim = claims[claim_of(pod)]
        request = templates[workload]["spec"]["spec"]["devices"]["requests"][0]["exactly"]
        devices = allocated_devices(claim)
        assert len(devices) == request["count"]
        # the node fit chose; the devices of the kind fit chose there (or equivalent ones on it)
        assert pod.spec.node_name == fit_node and {pool for pool, _ in devices} == {fit_node}
        for pool, name in devices:
            device = published[pool][name]
            assert device["attributes"]["productName"]["string"] == "NVIDIA A100-SXM4-80GB"
            if request["deviceClassName"] == "mig.nvidia.com":
                profile = request["selectors"][1]["cel"]["expression"].split("== ")[1].strip("'")
                assert device["attributes"]["profile"]["string"] == profile
                # a MIG device of the GPU fit put the workload on
                assert name.startswith("gpu-%s-mig-" % fit_gpus)
            else:
                assert device["attributes"]["type"]["string"] == "gpu"
            used.append((pool, name))
    assert len(used) == len(set(used)), "a device allocated twice"

    # One Embedding more than the packing holds: the node's three 1g.10gb devices are taken.
    cluster.apps().patch_namespaced_deployment_scale("embedding", NAMESPACE, {"spec": {"replicas": 3}})

    def pending_with_reason():
        pods = cluster.core().list_namespaced_pod(NAMESPACE, label_selector="gpuprov.io/workload=embedding").items
        waiting = [p for p in pods if not p.spec.node_name]
        if not waiting:
            return "no Pending embedding pod yet"
        events = cluster.core().list_namespaced_event(
            NAMESPACE, field_selector="reason=FailedScheduling,involvedObject.name=%s" % waiting[0].metadata.name).items
        return True if events else "no FailedScheduling event for %s yet" % waiting[0].metadata.name
    wait_for("the extra copy Pending with a FailedScheduling event", pending_with_reason)
    waiting = [p for p in cluster.core().list_namespaced_pod(NAMESPACE).items if not p.spec.node_name]
    (extra,) = waiting
    (event,) = cluster.core().list_namespaced_event(
        NAMESPACE, field_selector="reason=FailedScheduling,involvedObject.name=%s" % extra.metadata.name).items[-1:]
    assert "cannot allocate all claims" in event.message, event.message

    report = json.loads(run(gpuprov, "diagnose", "--kubeconfig", cluster.kubeconfig, "-o", "json"))
    finding = next(p for p in report["pods"] if p["name"] == extra.metadata.name)
    assert finding["scheduler"]["message"] == event.message
    assert [r["category"] for r in finding["scheduler"]["reasons"]] == ["dra-allocation"]
    assert (finding["check"], finding["status"]) == ("allocation", "dra-allocated"), finding
    assert "profile 1g.10gb" in finding["summary"] and "fit-a100-80gb-01 0/3 free" in finding["summary"]
    node = next(n for n in report["dra"]["nodes"] if n["name"] == "fit-a100-80gb-01")
    kinds = dict((k["kind"], (k["devices"], k["allocated"])) for k in node["kinds"])
    assert kinds["mig 1g.10gb"] == (3, 3) and kinds["mig 1g.20gb"] == (1, 1)
    assert kinds["gpu"][1] == 2          # Llama-70B's two whole GPUs; the third is free

    rows = json.loads(run(gpuprov, "pool", "--kubeconfig", cluster.kubeconfig, "-o", "json"))["nodes"]
    mig = next(r for r in rows if r["resource"] == "dra:gpu.nvidia.com/mig-1g.10gb")
    assert (mig["allocatable"], mig["allocated"], mig["free"]) == (3, 3, 0)


def test_pods_packed_onto_one_gpu_share_its_claim(gpuprov, dra_cluster, tmp_path):
    cluster, resource = dra_cluster
    fit_input = tmp_path / "shared.yaml"
    fit_input.write_text(SHARED)
    published = publish(gpuprov, cluster, tmp_path, fit_input)
    applied = apply_fit(gpuprov, cluster, fit_input, "dra-shared")
    replicas = sum(d["spec"]["replicas"] for d in applied if d["kind"] == "Deployment")
    wait_for("every pod Running with its claims allocated", lambda: all_running(cluster, resource, "dra-shared", replicas))
    pods, claims = pods_and_claims(cluster, resource, "dra-shared")
    shared = dict((d["metadata"]["name"], d) for d in applied if d["kind"] == "ResourceClaim")
    assert len(shared) == 2
    for name in shared:
        claim = claims[name]
        users = [p for p in pods if claim_of(p) == name]
        # fit put two copies on each time-sliced GPU: both pods use the one claim, on its node
        assert len(users) == 2
        assert sorted(r.name for r in claim.status.reserved_for) == sorted(p.metadata.name for p in users)
        (device,) = allocated_devices(claim)
        assert {p.spec.node_name for p in users} == {device[0]}
        assert published[device[0]][device[1]]["attributes"]["productName"]["string"] == "Tesla T4"
        parameters = claim.spec.devices.config[0].opaque.parameters
        assert parameters["kind"] == "GpuConfig" and parameters["sharing"]["strategy"] == "TimeSlicing"
    devices = [d for c in claims.values() for d in allocated_devices(c)]
    assert len(devices) == len(set(devices)) == 3          # two shared T4s and Big's own
