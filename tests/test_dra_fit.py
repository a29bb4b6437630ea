"""`gpuprov fit -o dra`: the packing as claims for NVIDIA's DRA driver and the Deployments that use
them; every object valid for resource.k8s.io/v1 and apps/v1 (strict, 1.34-1.37), and the claims
satisfiable by the slices `gpuprov export dra` renders for the inventory fit writes."""
import os
import re

import pytest
import yaml

import gpuprov.cmd_export  # noqa: F401
import gpuprov.cmd_fit  # noqa: F401

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SERVING = os.path.join(REPO, "examples", "fit", "serving.yaml")
KUBERNETES = ("1.34", "1.35", "1.36", "1.37")

SHARED_POOL = """
workloads:
  - {name: Chat, memory: 6, replicas: 3}
  - {name: Rerank, memory: 4}
  - {name: Big, memory: 14}
pool:
  - {model: T4, count: 4, gpus_per_node: 2}
"""


def validate(obj):
    kubernetes_validate = pytest.importorskip("kubernetes_validate", reason="kubernetes-validate (dev extra) is not installed")
    for version in KUBERNETES:
        kubernetes_validate.validate(obj, version, strict=True)


def documents(text):
    return [d for d in yaml.safe_load_all(text) if d]


def run_fit(gpuprov, path, *args):
    code, out, err = gpuprov("fit", str(path), *args)
    assert code == 0, err
    return out


@pytest.fixture
def shared_pool(tmp_path):
    path = tmp_path / "shared.yaml"
    path.write_text(SHARED_POOL)
    return path


def by_kind(docs, kind):
    return dict((d["metadata"]["name"], d) for d in docs if d["kind"] == kind)


def test_serving_objects_validate_and_reference_each_other(gpuprov):
    docs = documents(run_fit(gpuprov, SERVING, "-o", "dra", "-n", "ml"))
    for doc in docs:
        validate(doc)
        assert doc["metadata"]["namespace"] == "ml"
    templates = by_kind(docs, "ResourceClaimTemplate")
    deployments = by_kind(docs, "Deployment")
    assert sorted(deployments) == ["chat", "embedding", "llama-70b", "rerank"]
    for name, deployment in deployments.items():
        pod = deployment["spec"]["template"]["spec"]
        assert "nodeSelector" not in pod      # the scheduler picks the node from the devices
        (claim,) = pod["resourceClaims"]
        assert templates[claim["resourceClaimTemplateName"]]
        (container,) = pod["containers"]
        assert container["resources"]["claims"] == [{"name": claim["name"]}]
        assert not [r for r in container["resources"]["limits"] if r.startswith("nvidia.com/")]
    assert deployments["embedding"]["spec"]["replicas"] == 2
    chat = templates["chat"]["spec"]["spec"]["devices"]["requests"][0]["exactly"]
    assert chat["deviceClassName"] == "mig.nvidia.com" and chat["count"] == 1
    assert [s["cel"]["expression"] for s in chat["selectors"]] == [
        "device.attributes['gpu.nvidia.com'].productName in ['NVIDIA A100-SXM4-80GB', 'NVIDIA A100 80GB PCIe']",
        "device.attributes['gpu.nvidia.com'].profile == '1g.20gb'"]
    llama = templates["llama-70b"]["spec"]["spec"]["devices"]["requests"][0]["exactly"]
    assert llama["deviceClassName"] == "gpu.nvidia.com" and llama["count"] == 2
    assert llama["selectors"][1]["cel"]["expression"] == \
        "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('70Gi')) >= 0"


def test_shared_gpus_are_one_claim_with_the_sharing_config(gpuprov, shared_pool):
    docs = documents(run_fit(gpuprov, shared_pool, "-o", "dra"))
    for doc in docs:
        validate(doc)
    claims = by_kind(docs, "ResourceClaim")
    assert sorted(claims) == ["fit-t4-01-gpu-0-shared", "fit-t4-01-gpu-1-shared"]
    for claim in claims.values():
        devices = claim["spec"]["devices"]
        assert devices["config"] == [{"opaque": {"driver": "gpu.nvidia.com", "parameters": {
            "apiVersion": "resource.nvidia.com/v1beta1", "kind": "GpuConfig",
            "sharing": {"strategy": "TimeSlicing", "timeSlicingConfig": {"interval": "Default"}}}},
            "requests": ["gpu"]}]
    # GPU 0 holds Chat#1 (6 GiB) and Rerank (4 GiB): the claim needs a T4 with room for both.
    gpu0 = claims["fit-t4-01-gpu-0-shared"]["spec"]["devices"]["requests"][0]["exactly"]["selectors"]
    assert gpu0[1]["cel"]["expression"].endswith("quantity('10Gi')) >= 0")
    users = {}
    for deployment in by_kind(docs, "Deployment").values():
        (claim,) = deployment["spec"]["template"]["spec"]["resourceClaims"]
        users.setdefault(claim.get("resourceClaimName") or claim.get("resourceClaimTemplateName"), []).append(
            (deployment["metadata"]["name"], deployment["spec"]["replicas"]))
    assert sorted(users["fit-t4-01-gpu-0-shared"]) == [("chat", 1), ("rerank", 1)]
    assert users["fit-t4-01-gpu-1-shared"] == [("chat-2", 2)]
    assert users["big"] == [("big", 1)]     # a GPU of its own: a claim per pod from its template
    text = run_fit(gpuprov, shared_pool, "-o", "dra")
    assert "needs its TimeSlicingSettings feature gate" in text


def test_mps_sharing_config(gpuprov, tmp_path):
    path = tmp_path / "mps.yaml"
    path.write_text("workloads:\n  - {name: A, memory: 10, replicas: 4}\npool: {model: L40S, count: 1}\n")
    docs = documents(run_fit(gpuprov, path, "-o", "dra", "--soft-sharing", "mps"))
    for doc in docs:
        validate(doc)
    (claim,) = by_kind(docs, "ResourceClaim").values()
    sharing = claim["spec"]["devices"]["config"][0]["opaque"]["parameters"]["sharing"]
    # four MPS clients: 25 % of the threads and a quarter of the L40S's 46068 MiB each
    assert sharing == {"strategy": "MPS", "mpsConfig": {"defaultActiveThreadPercentage": 25,
                                                        "defaultPinnedDeviceMemoryLimit": "11517Mi"}}


def test_hami_has_no_dra_form(gpuprov, shared_pool):
    code, out, err = gpuprov("fit", str(shared_pool), "-o", "dra", "--soft-sharing", "hami")
    assert code == 2 and out == ""
    assert "--soft-sharing hami: NVIDIA's DRA driver shares a GPU by time-slicing or MPS only" in err


def test_names_in_comments_cannot_add_yaml(gpuprov, tmp_path):
    path = tmp_path / "w.yaml"
    path.write_text('workloads:\n  - {name: "x\\nkind: Secret", memory: 4}\npool: {model: T4, count: 1}\n')
    text = run_fit(gpuprov, path, "-o", "dra")
    docs = documents(text)
    assert {d["kind"] for d in docs} == {"ResourceClaimTemplate", "Deployment"}
    assert "\nkind: Secret" not in text


# -- the claims against the devices `export dra` renders for fit's inventory ----------------
#
# gpuprov writes three selector forms only; this reads exactly those (and fails on any other),
# so that the packing is checked here on every run. The real scheduler does the same against
# the real API server in test_dra_control_plane.py.

_PRODUCT = re.compile(r"^device\.attributes\['gpu\.nvidia\.com'\]\.productName (?:== '([^']*)'|in \[(.*)\])$")
_PROFILE = re.compile(r"^device\.attributes\['gpu\.nvidia\.com'\]\.profile == '([^']*)'$")
_MEMORY = re.compile(r"^device\.capacity\['gpu\.nvidia\.com'\]\.memory\.compareTo\(quantity\('(\d+)(Mi|Gi)'\)\) >= 0$")
_CLASS_TYPE = {"gpu.nvidia.com": "gpu", "mig.nvidia.com": "mig"}


def _mib(value):
    number, unit = re.match(r"^(\d+)(Mi|Gi)$", value).groups()
    return int(number) * (1024 if unit == "Gi" else 1)


def _matches(request, device):
    attributes = device["attributes"]
    if attributes["type"]["string"] != _CLASS_TYPE[request["deviceClassName"]]:
        return False
    for selector in request["selectors"]:
        expression = selector["cel"]["expression"]
        product, profile, memory = _PRODUCT.match(expression), _PROFILE.match(expression), _MEMORY.match(expression)
        if product:
            names = [product.group(1)] if product.group(1) is not None else re.findall(r"'([^']*)'", product.group(2))
            if attributes["productName"]["string"] not in names:
                return False
        elif profile:
            if attributes.get("profile", {}).get("string") != profile.group(1):
                return False
        elif memory:
            need = int(memory.group(1)) * (1024 if memory.group(2) == "Gi" else 1)
            if _mib(device["capacity"]["memory"]["value"]) < need:
                return False
        else:
            raise AssertionError("not a selector gpuprov writes: %s" % expression)
    return True


def _allocate(claims, slices):
    """Every claim gets its count of distinct devices on one node (multi-device claims first)."""
    free = dict((s["spec"]["nodeName"], list(s["spec"]["devices"])) for s in slices)
    result = {}
    for name, request in sorted(claims, key=lambda c: -c[1]["count"]):
        for node, devices in sorted(free.items()):
            matching = [d for d in devices if _matches(request, d)]
            if len(matching) >= request["count"]:
                taken = matching[:request["count"]]
                free[node] = [d for d in devices if d not in taken]
                result[name] = (node, [d["name"] for d in taken])
                break
        else:
            raise AssertionError("claim %s finds no node with %d matching free device(s)" % (name, request["count"]))
    return result


@pytest.mark.parametrize("source", ["serving", "shared"])
def test_every_claim_finds_devices_in_the_exported_slices(gpuprov, tmp_path, shared_pool, source):
    path = SERVING if source == "serving" else shared_pool
    inventory = tmp_path / "fit-inventory.yml"
    run_fit(gpuprov, path, "-o", "inventory", "-w", str(inventory))
    code, out, err = gpuprov("export", "-i", str(inventory), "dra")
    assert code == 0, err
    slices = [d for d in documents(out) if d["kind"] == "ResourceSlice"]
    docs = documents(run_fit(gpuprov, path, "-o", "dra"))
    templates = by_kind(docs, "ResourceClaimTemplate")
    claims = [(name, c["spec"]["devices"]["requests"][0]["exactly"]) for name, c in by_kind(docs, "ResourceClaim").items()]
    for deployment in by_kind(docs, "Deployment").values():
        (claim,) = deployment["spec"]["template"]["spec"]["resourceClaims"]
        template = claim.get("resourceClaimTemplateName")
        if template:
            request = templates[template]["spec"]["spec"]["devices"]["requests"][0]["exactly"]
            claims += [("%s-%d" % (deployment["metadata"]["name"], i), request)
                       for i in range(deployment["spec"]["replicas"])]
    allocation = _allocate(claims, slices)
    assert len(allocation) == len(claims)
    if source == "serving":
        # one MIG-partitioned GPU and two whole ones on the node fit planned
        assert {node for node, _devices in allocation.values()} == {"fit-a100-80gb-01"}
        assert sorted(len(names) for _node, names in allocation.values()) == [1, 1, 1, 1, 2]
    # one more copy than the packing holds does not fit any more
    extra = ("one-too-many", dict(claims[0][1]))
    with pytest.raises(AssertionError, match="finds no node"):
        _allocate(claims + [extra] * 4, slices)


def test_autoscaled_workloads_get_the_hpa_within_the_packing(gpuprov):
    docs = documents(run_fit(gpuprov, os.path.join(REPO, "examples", "fit", "autoscale.yaml"), "-o", "dra"))
    for doc in docs:
        validate(doc)
    assert [d["kind"] for d in docs] == ["ResourceClaimTemplate", "Deployment", "ResourceClaimTemplate", "Deployment",
                                         "HorizontalPodAutoscaler"]
    chat = by_kind(docs, "Deployment")["chat"]
    assert "replicas" not in chat["spec"]    # left to the HPA
    (hpa,) = by_kind(docs, "HorizontalPodAutoscaler").values()
    assert (hpa["spec"]["minReplicas"], hpa["spec"]["maxReplicas"]) == (2, 4)
    assert hpa["spec"]["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": "chat"}
    assert by_kind(docs, "Deployment")["batch"]["spec"]["replicas"] == 1
