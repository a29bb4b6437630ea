"""`gpuprov diagnose` and `gpuprov pool` where a cluster uses DRA: devices per node from
ResourceSlices (those `gpuprov export dra` renders), their use from ResourceClaims, and why the
claims of a Pending pod wait, named from the scheduler's own reason and the devices."""
import json

import pytest

import gpuprov.cmd_diagnose  # noqa: F401
import gpuprov.cmd_pool  # noqa: F401

INVENTORY = """
all:
  hosts:
    dra-a100:
      gpuprov_gpu_model: A100-80GB
      gpuprov_gpu_count: 2
      gpuprov_sharing:
        strategy: mig
        mig:
          devices:
            - {devices: [0], mig-enabled: true, mig-devices: {"1g.20gb": 1, "1g.10gb": 3}}
            - {devices: [1], mig-enabled: false}
    dra-t4:
      gpuprov_gpu_model: T4
      gpuprov_gpu_count: 1
"""
NO_ROOM = ("0/2 nodes are available: 2 cannot allocate all claims. preemption: 0/2 nodes are available: "
           "2 Preemption is not helpful for scheduling.")


def node(name, taints=None):
    return {"metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "spec": {"taints": taints} if taints else {},
            "status": {"allocatable": {"cpu": "32"}, "conditions": [{"type": "Ready", "status": "True"}]}}


def pod(name, claim=None, template=None, generated=None, node_name=None, phase="Pending", tolerations=None):
    entry = {"name": "gpu"}
    if claim:
        entry["resourceClaimName"] = claim
    else:
        entry["resourceClaimTemplateName"] = template
    spec = {"resourceClaims": [entry], "containers": [{"name": "c", "resources": {"claims": [{"name": "gpu"}]}}]}
    if node_name:
        spec["nodeName"] = node_name
    if tolerations:
        spec["tolerations"] = tolerations
    status = {"phase": phase}
    if generated:
        status["resourceClaimStatuses"] = [{"name": "gpu", "resourceClaimName": generated}]
    return {"metadata": {"name": name, "namespace": "ml"}, "spec": spec, "status": status}


def claim(name, device_class, selectors, allocated=None, node_name=None, reserved=(), count=1, sharing=None):
    spec = {"devices": {"requests": [{"name": "gpu", "exactly": {
        "deviceClassName": device_class, "allocationMode": "ExactCount", "count": count,
        "selectors": [{"cel": {"expression": e}} for e in selectors]}}]}}
    if sharing:
        spec["devices"]["config"] = [{"requests": ["gpu"], "opaque": {"driver": "gpu.nvidia.com", "parameters": {
            "apiVersion": "resource.nvidia.com/v1beta1", "kind": "GpuConfig", "sharing": {"strategy": sharing}}}}]
    item = {"metadata": {"name": name, "namespace": "ml"}, "spec": spec, "status": {}}
    if allocated:
        item["status"] = {"allocation": {
            "devices": {"results": [{"request": "gpu", "driver": "gpu.nvidia.com", "pool": node_name, "device": d}
                                    for d in allocated]},
            "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                {"key": "metadata.name", "operator": "In", "values": [node_name]}]}]}},
            "reservedFor": [{"resource": "pods", "name": r, "uid": "uid-" + r} for r in reserved]}
    return item


def event(pod_name, message):
    return {"metadata": {"name": pod_name + ".1", "namespace": "ml"}, "reason": "FailedScheduling",
            "involvedObject": {"kind": "Pod", "name": pod_name, "namespace": "ml"}, "message": message,
            "lastTimestamp": "2026-12-01T10:00:00Z"}


A100 = "device.attributes['gpu.nvidia.com'].productName in ['NVIDIA A100-SXM4-80GB', 'NVIDIA A100 80GB PCIe']"
T4 = "device.attributes['gpu.nvidia.com'].productName == 'Tesla T4'"


def profile(name):
    return "device.attributes['gpu.nvidia.com'].profile == '%s'" % name


@pytest.fixture
def snapshot(tmp_path, gpuprov):
    (tmp_path / "inv.yml").write_text(INVENTORY)
    code, out, err = gpuprov("export", "-i", str(tmp_path / "inv.yml"), "dra", "-o", "json")
    assert code == 0, err
    import yaml

    text = next(f["content"] for f in json.loads(out)["files"] if f["name"] == "dra-resourceslices.yaml")
    slices = [d for d in yaml.safe_load_all(text) if d]
    nodes = [node("dra-a100"), node("dra-t4", taints=[{"key": "team", "value": "vision", "effect": "NoSchedule"}])]
    pods = [
        pod("chat-0", template="chat", generated="chat-0-gpu-a1", node_name="dra-a100", phase="Running"),
        pod("chat-1", template="chat", generated="chat-1-gpu-b2"),
        pod("wants-3g", claim="big-mig"),
        pod("new-0", template="chat"),
        pod("t4-job", claim="t4"),
        pod("odd-class", claim="odd"),
        pod("llama-0", template="llama", generated="llama-0-gpu-c3"),
    ]
    claims = [
        claim("chat-0-gpu-a1", "mig.nvidia.com", [A100, profile("1g.20gb")], allocated=["gpu-0-mig-1g20gb-15-0"],
              node_name="dra-a100", reserved=["chat-0"]),
        claim("chat-1-gpu-b2", "mig.nvidia.com", [A100, profile("1g.20gb")]),
        claim("big-mig", "mig.nvidia.com", [A100, profile("3g.40gb")]),
        claim("t4", "gpu.nvidia.com", [T4], sharing="TimeSlicing"),
        claim("odd", "foo.example.com", []),
        claim("llama-0-gpu-c3", "gpu.nvidia.com",
              [A100, "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('70Gi')) >= 0"], count=2),
    ]
    events = [event("chat-1", NO_ROOM), event("wants-3g", NO_ROOM), event("t4-job", NO_ROOM),
              event("odd-class", "0/2 nodes are available: request gpu: device class foo.example.com does not exist."),
              event("llama-0", NO_ROOM)]
    for name, kind, items in (("nodes", "NodeList", nodes), ("pods", "PodList", pods), ("events", "EventList", events),
                              ("resourceslices", "ResourceSliceList", slices),
                              ("resourceclaims", "ResourceClaimList", claims)):
        (tmp_path / ("%s.json" % name)).write_text(json.dumps({"kind": kind, "items": items}))
    return tmp_path


def diagnose(gpuprov, path, *args):
    code, out, err = gpuprov("diagnose", "--snapshot", str(path), *args)
    assert code == 0, err
    return out


def pods_of(report):
    return dict((p["name"], p) for p in report["pods"])


def test_devices_per_node_allocated_and_free(gpuprov, snapshot):
    report = json.loads(diagnose(gpuprov, snapshot, "-o", "json"))
    nodes = dict((n["name"], n) for n in report["dra"]["nodes"])
    a100 = dict((k["kind"], k) for k in nodes["dra-a100"]["kinds"])
    assert (a100["mig 1g.20gb"]["devices"], a100["mig 1g.20gb"]["allocated"], a100["mig 1g.20gb"]["free"]) == (1, 1, 0)
    assert (a100["mig 1g.10gb"]["devices"], a100["mig 1g.10gb"]["free"]) == (3, 3)
    assert (a100["gpu"]["devices"], a100["gpu"]["free"], a100["gpu"]["memory_gib"]) == (1, 1, 80.0)
    assert a100["gpu"]["product"] == "NVIDIA A100-SXM4-80GB"
    assert nodes["dra-t4"]["kinds"][0]["kind"] == "gpu" and nodes["dra-t4"]["free"] == 1
    assert report["dra"]["claims"] == {"total": 6, "allocated": 1, "pending": 5}
    assert report["summary"]["dra_devices"] == 6 and report["summary"]["dra_devices_free"] == 5
    assert report["summary"]["pending_gpu_pods"] == 6


def test_each_pending_pod_is_named_by_its_claims(gpuprov, snapshot):
    pods = pods_of(json.loads(diagnose(gpuprov, snapshot, "-o", "json")))
    chat = pods["chat-1"]
    # the scheduler's own reason, read and kept
    assert chat["scheduler"]["reasons"] == [{"count": 2, "reason": "cannot allocate all claims",
                                             "category": "dra-allocation", "detail": ""}]
    assert (chat["check"], chat["status"]) == ("allocation", "dra-allocated")
    assert "every device that matches claim chat-1-gpu-b2 request gpu (1 mig.nvidia.com" in chat["summary"]
    assert "profile 1g.20gb" in chat["summary"] and "dra-a100 0/1 free" in chat["summary"]
    assert chat["claims"][0]["claim"] == "chat-1-gpu-b2" and chat["claims"][0]["allocated"] is False
    assert (pods["wants-3g"]["check"], pods["wants-3g"]["status"]) == ("placement", "dra-not-offered")
    assert "no ResourceSlice offers a device for claim big-mig" in pods["wants-3g"]["summary"]
    assert (pods["new-0"]["check"], pods["new-0"]["status"]) == ("placement", "dra-claim-missing")
    assert "the claim from template chat is not created yet" in pods["new-0"]["summary"]
    t4 = pods["t4-job"]
    assert (t4["check"], t4["status"]) == ("placement", "dra-blocked")
    assert "free only on nodes closed to it: dra-t4 (untolerated taint team=vision:NoSchedule" in t4["summary"]
    assert t4["claims"][0]["sharing"] == ["TimeSlicing"]
    assert (pods["odd-class"]["check"], pods["odd-class"]["status"]) == ("placement", "dra-class-missing")
    # two whole A100s with 70 GiB on one node: the node has one whole GPU
    llama = pods["llama-0"]
    assert (llama["check"], llama["status"]) == ("placement", "dra-too-large")
    assert "needs 2 devices on one node; no node it may use has that many: dra-a100 1/1 free" in llama["summary"]
    assert "memory >= 70Gi" in llama["summary"]


def test_a_toleration_opens_the_node(gpuprov, snapshot):
    pods = json.loads((snapshot / "pods.json").read_text())
    job = next(p for p in pods["items"] if p["metadata"]["name"] == "t4-job")
    job["spec"]["tolerations"] = [{"key": "team", "operator": "Equal", "value": "vision", "effect": "NoSchedule"}]
    (snapshot / "pods.json").write_text(json.dumps(pods))
    t4 = pods_of(json.loads(diagnose(gpuprov, snapshot, "-o", "json")))["t4-job"]
    # the device is free and the pod may go there: nothing in the snapshot explains the wait
    assert (t4["check"], t4["status"]) == (None, "unexplained")


def test_selectors_gpuprov_cannot_read_are_said_so(gpuprov, snapshot):
    claims = json.loads((snapshot / "resourceclaims.json").read_text())
    big = next(c for c in claims["items"] if c["metadata"]["name"] == "big-mig")
    big["spec"]["devices"]["requests"][0]["exactly"]["selectors"].append(
        {"cel": {"expression": "device.attributes['gpu.nvidia.com'].cudaComputeCapability.isGreaterThan(semver('8.0.0'))"}})
    (snapshot / "resourceclaims.json").write_text(json.dumps(claims))
    pod = pods_of(json.loads(diagnose(gpuprov, snapshot, "-o", "json")))["wants-3g"]
    assert "(counted without its selectors gpuprov cannot read)" in pod["summary"]


def test_table_has_the_dra_section(gpuprov, snapshot):
    out = diagnose(gpuprov, snapshot)
    assert "DRA devices (ResourceSlices; allocated by ResourceClaims):" in out
    assert "6 Pending GPU pod(s); DRA: 6 device(s), 5 free" in out.splitlines()[0]
    assert "Claims: 6, 1 allocated, 5 waiting" in out
    row = next(line for line in out.splitlines() if "mig 1g.20gb" in line)
    assert row.split()[-2:] == ["1/1", "0"]
    assert "ml/chat-1" in out and "claim chat-1-gpu-b2" in out


def test_pool_lists_dra_devices_beside_device_plugin_resources(gpuprov, snapshot):
    code, out, err = gpuprov("pool", "--snapshot", str(snapshot), "-o", "json")
    assert code == 0, err
    rows = dict(((r["node"], r["resource"]), r) for r in json.loads(out)["nodes"])
    mig = rows[("dra-a100", "dra:gpu.nvidia.com/mig-1g.20gb")]
    assert (mig["allocatable"], mig["allocated"], mig["free"], mig["sharing"]) == (1, 1, 0, "dra")
    whole = rows[("dra-a100", "dra:gpu.nvidia.com/gpu")]
    assert (whole["free"], whole["slot_gib"], whole["free_gib"]) == (1, 80.0, 80.0)
    code, out, _err = gpuprov("pool", "--snapshot", str(snapshot), "--fits", "15", "-o", "json")
    assert code == 0
    fits = sorted((r["node"], r["resource"]) for r in json.loads(out)["nodes"])
    # 1g.10gb (9.75 GiB) is too small; the tainted T4's node is not blocked for pool (taints are per pod)
    assert fits == [("dra-a100", "dra:gpu.nvidia.com/gpu"), ("dra-t4", "dra:gpu.nvidia.com/gpu")]
    code, out, _err = gpuprov("pool", "--snapshot", str(snapshot))
    assert "dra:gpu.nvidia.com/mig-1g.10gb" in out


def test_only_the_newest_generation_of_a_pool_counts(gpuprov, snapshot):
    slices = json.loads((snapshot / "resourceslices.json").read_text())
    old = json.loads(json.dumps(next(s for s in slices["items"] if s["spec"]["nodeName"] == "dra-t4")))
    old["metadata"]["name"] = "old"
    old["spec"]["pool"]["generation"] = 0
    old["spec"]["devices"][0]["name"] = "gpu-9"
    incomplete = json.loads(json.dumps(old))
    incomplete["metadata"]["name"] = "next"
    incomplete["spec"]["pool"] = {"name": "dra-t4-extra", "generation": 3, "resourceSliceCount": 2}
    slices["items"] += [old, incomplete]
    (snapshot / "resourceslices.json").write_text(json.dumps(slices))
    report = json.loads(diagnose(gpuprov, snapshot, "-o", "json"))
    t4 = next(n for n in report["dra"]["nodes"] if n["name"] == "dra-t4")
    assert t4["devices"] == 2      # gpu-0 of the current pool and gpu-9 of the extra pool, not the old gpu-9
    assert any("pool dra-t4-extra of driver gpu.nvidia.com: 1 of 2 slices" in n for n in report["notes"])


def test_slices_without_claims_and_bad_objects_are_bad_input(gpuprov, snapshot):
    claims = (snapshot / "resourceclaims.json").read_text()
    (snapshot / "resourceclaims.json").unlink()
    code, _out, err = gpuprov("diagnose", "--snapshot", str(snapshot))
    assert code == 2
    assert "resourceclaims.json: missing beside resourceslices.json" in err and "kubectl get resourceclaims -A" in err
    (snapshot / "resourceclaims.json").write_text(claims)
    slices = json.loads((snapshot / "resourceslices.json").read_text())
    slices["items"][0]["spec"]["devices"][0]["attributes"]["productName"] = {"string": "x", "int": 1}
    (snapshot / "resourceslices.json").write_text(json.dumps(slices))
    for command in ("diagnose", "pool"):
        code, _out, err = gpuprov(command, "--snapshot", str(snapshot))
        assert code == 2
        assert "resourceslices.json: items[0] (dra-a100-gpu.nvidia.com): spec.devices[0].attributes.productName: " \
               "needs exactly one of string, int, bool, version" in err


def test_a_snapshot_without_dra_has_no_dra_section(gpuprov, snapshot):
    for name in ("resourceslices.json", "resourceclaims.json"):
        (snapshot / name).unlink()
    report = json.loads(diagnose(gpuprov, snapshot, "-o", "json"))
    assert report["dra"] is None
    chat = pods_of(report)["chat-1"]
    assert chat["status"] == "dra-not-read" and "kubectl get resourceclaims -A -o json" in chat["remedy"]["summary"]


class _FakeResourceV1Api:
    documents = {}

    def __init__(self, api_client):
        pass

    def list_resource_slice(self):
        return self.documents["resourceslices"]

    def list_resource_claim_for_all_namespaces(self):
        return self.documents["resourceclaims"]


class _FakeCoreV1Api:
    documents = {}

    def __init__(self, api_client):
        pass

    def list_node(self):
        return self.documents["nodes"]

    def list_pod_for_all_namespaces(self):
        return self.documents["pods"]

    def list_event_for_all_namespaces(self, field_selector=None):
        return self.documents["events"]


def test_live_mode_reads_slices_and_claims(gpuprov, snapshot, monkeypatch, tmp_path):
    kubernetes = pytest.importorskip("kubernetes")
    (tmp_path / "kc").write_text("apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: "
                                 "'https://127.0.0.1:6443'}}]\nusers: [{name: u, user: {token: x}}]\n"
                                 "contexts: [{name: c, context: {cluster: c, user: u}}]\ncurrent-context: c\n")
    documents = dict((name, json.loads((snapshot / ("%s.json" % name)).read_text()))
                     for name in ("nodes", "pods", "events", "resourceslices", "resourceclaims"))
    _FakeCoreV1Api.documents = _FakeResourceV1Api.documents = documents
    monkeypatch.setattr(kubernetes.config, "new_client_from_config",
                        lambda config_file=None, context=None: kubernetes.client.ApiClient())
    monkeypatch.setattr(kubernetes.client, "CoreV1Api", _FakeCoreV1Api)
    monkeypatch.setattr(kubernetes.client, "ResourceV1Api", _FakeResourceV1Api)
    code, out, err = gpuprov("diagnose", "--kubeconfig", str(tmp_path / "kc"), "-o", "json")
    assert code == 0, err
    live = json.loads(out)
    offline = json.loads(diagnose(gpuprov, snapshot, "-o", "json"))
    assert live["dra"] == offline["dra"]
    assert [(p["name"], p["status"]) for p in live["pods"]] == [(p["name"], p["status"]) for p in offline["pods"]]
    code, out, err = gpuprov("pool", "--kubeconfig", str(tmp_path / "kc"), "-o", "json")
    assert code == 0, err
    assert any(r["resource"].startswith("dra:") for r in json.loads(out)["nodes"])


def test_html_report_has_the_dra_devices(gpuprov, snapshot, tmp_path):
    diagnose(gpuprov, snapshot, "--report", str(tmp_path / "r.html"))
    page = (tmp_path / "r.html").read_text()
    assert "<h2>DRA devices</h2>" in page
    assert "<td>dra-a100</td><td>gpu.nvidia.com mig 1g.20gb</td><td>NVIDIA A100-SXM4-80GB</td><td>19.62 GiB</td>" \
           "<td>1/1</td><td>0</td>" in page
    assert "<b>ml/chat-1</b> [allocation]" in page
