"""`fit -o dra`: the same packing as claims for NVIDIA's DRA driver, and the Deployments that use them.

Where `-o pods` pins each copy to its node (nodeSelector) and asks for an extended resource,
here each copy asks for devices by what they are, and the scheduler picks the node:

* a copy with devices of its own (a MIG instance, a whole GPU, the whole GPUs of a multi-GPU
  workload) gets a claim from a ResourceClaimTemplate: ``count`` devices of class
  ``mig.nvidia.com`` with the profile fit chose, or ``gpu.nvidia.com`` with at least the memory
  it needs, and the GPU model fit packed it on (productName is one of the model's names);
* the copies fit packed onto one time-sliced or MPS GPU share one ResourceClaim (pods share a
  device in DRA only through one claim), which carries the driver's sharing config (GpuConfig,
  TimeSlicing or MPS with 100/N % threads and memory/N pinned memory) and asks for a GPU with
  room for all of them.

So the scheduler allocates devices of the node fit chose, or of another node with the same
devices; a preferred (not required) node affinity leans it towards fit's node, and the plan's
placements are in the annotations. HAMi is not a sharing method of the
DRA driver (`--soft-sharing hami` has no DRA form). NUMA alignment of a multi-GPU workload is
not expressed: it would need the driver's pcieRoot attribute, which a plan does not know.
Shapes (labels, annotations, containers) are those of `-o pods` (gpuprov/fit/pods.py).
"""

import math

import yaml

from ansible_collections.gpuprov.gpu.plugins.plugin_utils import dra, dra_claims
from ansible_collections.gpuprov.gpu.plugins.plugin_utils.intent import escape
from gpuprov.fit import pods
from gpuprov.fit.units import MIB_PER_GIB

CLAIM_NAME = "gpu"          # the pod's name for its claim (spec.resourceClaims[].name)
REQUEST_NAME = "gpu"        # the claim's request name
SHARED_LABEL = "gpuprov.io/shared-gpu"


class Copy:
    """One copy of a workload as fit placed it, with what its claim must ask for."""

    __slots__ = ("workload", "host", "gpus", "model", "profile", "count", "need_mib", "slot_mib", "visible_mib",
                 "where", "shared")

    def __init__(self, workload, host, gpus, model, profile, count, need_mib, slot_mib, visible_mib, where,
                 shared=None):
        self.workload = workload
        self.host = host
        self.gpus = gpus            # GPU indices on the host
        self.model = model
        self.profile = profile      # MIG profile name, or None for whole GPUs
        self.count = count
        self.need_mib = need_mib    # per device
        self.slot_mib = slot_mib
        self.visible_mib = visible_mib
        self.where = where
        self.shared = shared        # the fit Gpu it shares, or None


def copies(result):
    """[Copy] for every workload copy of the fit result, in GPU order."""
    out, gangs = [], {}
    for gpu in result.gpus:
        model = gpu.view.model
        if gpu.mode == "mig":
            names = gpu.view.geometry.names
            for item, p, _inst in gpu.placements:
                slot, visible, where = pods._slot(gpu, item, p)
                out.append(Copy(item.workload, gpu.node, [gpu.index], model, names[p], 1, item.memory_mib,
                                slot, visible, where))
            continue
        for item in gpu.items:
            slot, visible, where = pods._slot(gpu, item, None)
            if item.gang is not None:
                gang = gangs.get(item.gang)
                if gang is None:
                    gang = Copy(item.workload, gpu.node, [], model, None, item.workload.gpus, item.memory_mib,
                                slot, visible, "%d whole GPUs" % item.workload.gpus)
                    gangs[item.gang] = gang
                    out.append(gang)
                gang.gpus.append(gpu.index)
                continue
            shared = gpu if len(gpu.items) > 1 else None
            out.append(Copy(item.workload, gpu.node, [gpu.index], model, None, 1, item.memory_mib, slot, visible,
                            where, shared))
    return out


def _selectors(copy, need_mib):
    selectors = [dra_claims.product_selector(copy.model)]
    if copy.profile:
        # The profile fixes the memory; a memory bound would only repeat it with the catalog's rounding.
        selectors.append(dra_claims.profile_selector(copy.profile))
    else:
        selectors.append(dra_claims.memory_selector(need_mib))
    return selectors


def _shared_claim_name(gpu):
    return pods.dns_label("%s-gpu-%d-shared" % (gpu.node, gpu.index))


def _shared_claim(gpu, first, namespace):
    """The ResourceClaim the copies on one shared GPU reference, with the driver's sharing config."""
    method = gpu.shared_method
    if method == "mps":
        need = len(gpu.items) * max(i.memory_mib for i in gpu.items)
        config = dra_claims.sharing_config(dra_claims.MPS, clients=len(gpu.items), memory_mib=gpu.view.model.memory_mib,
                                           requests=[REQUEST_NAME])
    else:
        need = sum(i.memory_mib for i in gpu.items)
        config = dra_claims.sharing_config(dra_claims.TIME_SLICING, requests=[REQUEST_NAME])
    request = dra_claims.device_request(REQUEST_NAME, dra.GPU_CLASS, 1, _selectors(first, need))
    name = _shared_claim_name(gpu)
    labels = {SHARED_LABEL: name, "app.kubernetes.io/managed-by": "gpuprov"}
    claim = dra_claims.resource_claim(name, dra_claims.claim_spec([request], [config]), namespace, labels)
    strategy = dra_claims.MPS if method == "mps" else dra_claims.TIME_SLICING
    comments = ["%s GPU %d (%s): %s by %s; one claim, so its pods share the GPU" % (
        gpu.node, gpu.index, gpu.view.model.key, "MPS" if method == "mps" else "time-sliced",
        ", ".join(i.name for i in gpu.items)),
        "the driver needs its %s feature gate (alpha, off by default in %s): helm --set featureGates.%s=true"
        % (dra_claims.FEATURE_GATES[strategy], dra.DRIVER_RELEASE, dra_claims.FEATURE_GATES[strategy])]
    return comments, claim


def _placement(group):
    places = []
    for c in group:
        text = "%s GPU %s" % (c.host, ",".join(str(i) for i in sorted(c.gpus)))
        for entry in places:
            if entry[0] == text:
                entry[1] += 1
                break
        else:
            places.append([text, 1])
    return "; ".join(t if n == 1 else "%s (x%d)" % (t, n) for t, n in places)


def _prefer_nodes(group):
    """A preference (never a requirement) for the node(s) fit chose: the scheduler still takes
    equivalent devices elsewhere, but where it can it follows the packing, so a multi-GPU claim
    does not find its node's GPUs taken by copies fit put on another node."""
    hosts = sorted(set(c.host for c in group))
    return {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{
        "weight": 100, "preference": {"matchExpressions": [
            {"key": pods.NODE_SELECTOR_LABEL, "operator": "In", "values": hosts}]}}]}}


def documents(result, namespace=None):
    """[(comment lines, object)]: claim templates, shared claims and Deployments, in fit order."""
    nodes = dict((n.host, n) for n in result.nodes)
    groups = []   # [key, [Copy]]
    for copy in copies(result):
        if copy.shared is not None:
            key = (id(copy.workload), "shared", copy.shared.node, copy.shared.index)
        else:
            key = (id(copy.workload), copy.model.key, copy.profile, copy.count, math.ceil(copy.need_mib),
                   nodes[copy.host].view.entry.cpu_manager_policy == "static")
        for group in groups:
            if group[0] == key:
                group[1].append(copy)
                break
        else:
            groups.append([key, [copy]])

    entries, numbers, used, claimed = [], {}, set(), set()   # [(claim objects before it, comments, Deployment, workload)]
    for _key, group in groups:
        before = []
        first = group[0]
        workload = first.workload
        numbers[workload.name] = numbers.get(workload.name, 0) + 1
        base = pods.dns_label(workload.name, 55)
        name = base if numbers[workload.name] == 1 else "%s-%d" % (base, numbers[workload.name])
        while name in used:
            name += "-x"
        used.add(name)
        static_cpu = nodes[first.host].view.entry.cpu_manager_policy == "static"
        labels = {pods.WORKLOAD_LABEL: name, "app.kubernetes.io/name": base, "app.kubernetes.io/managed-by": "gpuprov"}
        placement = _placement(group)
        utilization = min(1.0, first.slot_mib / float(first.visible_mib))
        annotations = {pods.ANNOTATION_MEMORY: "%.2f" % (first.slot_mib / MIB_PER_GIB),
                       pods.ANNOTATION_UTILIZATION: "%.2f" % (math.floor(utilization * 100) / 100.0),
                       pods.ANNOTATION_PLACEMENT: placement}
        if first.shared is not None:
            claim_name = _shared_claim_name(first.shared)
            if claim_name not in claimed:
                claimed.add(claim_name)
                before.append(_shared_claim(first.shared, first, namespace))
            pod_claim = {"name": CLAIM_NAME, "resourceClaimName": claim_name}
            asks = "the shared claim %s" % claim_name
        else:
            device_class = dra.MIG_CLASS if first.profile else dra.GPU_CLASS
            request = dra_claims.device_request(REQUEST_NAME, device_class, first.count,
                                                _selectors(first, first.need_mib))
            template = dra_claims.resource_claim_template(name, dra_claims.claim_spec([request]), namespace,
                                                          {pods.WORKLOAD_LABEL: name,
                                                           "app.kubernetes.io/managed-by": "gpuprov"})
            what = ("one %s MIG device" % first.profile if first.profile else
                    "%d whole GPU%s with %s GiB or more" % (first.count, "" if first.count == 1 else "s",
                                                         "%.2f" % (first.need_mib / MIB_PER_GIB)))
            before.append((["%s: each pod claims %s (%s, class %s)" % (workload.name, what, first.model.key,
                                                                   device_class)], template))
            pod_claim = {"name": CLAIM_NAME, "resourceClaimTemplateName": name}
            asks = "a claim of its own from template %s" % name
        container = pods._container(workload, base, {}, static_cpu)
        container["resources"]["claims"] = [{"name": CLAIM_NAME}]
        metadata = {"name": name, "labels": dict(labels)}
        if namespace:
            metadata["namespace"] = namespace
        deployment = {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": metadata,
            "spec": {
                "replicas": len(group),
                "selector": {"matchLabels": {pods.WORKLOAD_LABEL: name}},
                "template": {
                    "metadata": {"labels": labels, "annotations": annotations},
                    "spec": {"affinity": _prefer_nodes(group), "resourceClaims": [pod_claim],
                             "containers": [container]},
                },
            },
        }
        comments = ["%s: %d cop%s, %s %s; fit placed %s on %s (%s), %s GiB of GPU memory per slot%s" % (
            workload.name, len(group), "y" if len(group) == 1 else "ies", "with" if len(group) == 1 else "each with",
            asks,
            "it" if len(group) == 1 else "them", placement, first.where, "%.2f" % (first.slot_mib / MIB_PER_GIB),
            "; Guaranteed, whole CPUs (static CPU manager)" if static_cpu else "")]
        if workload.image is None:
            comments.append("replace the placeholder image with the workload's own")
        entries.append((before, comments, deployment, workload))
    # Autoscaled workloads get the HPA of `-o pods`, capped at the copies fit packed: a pod beyond
    # them would claim a device (or a share of a GPU) the packing never reserved.
    claims_before = dict((id(deployment), before) for before, _c, deployment, _w in entries)
    out = []
    for comments, document in pods.with_autoscalers([(c, d, w) for _b, c, d, w in entries]):
        out.extend(claims_before.get(id(document), []))
        out.append((comments, document))
    return out


def dra_text(result, source=None, namespace=None):
    """The objects as one multi-document YAML stream with comments."""
    parts, kinds = [], {}
    for comments, document in documents(result, namespace):
        # One escaped line per comment: no workload name can end a comment and add YAML.
        head = "".join("# %s\n" % escape(line) for line in comments)
        parts.append(head + yaml.safe_dump(document, sort_keys=False, default_flow_style=False, width=1000))
        kinds[document["kind"]] = kinds.get(document["kind"], 0) + 1
    first = ("# gpuprov fit%s -o dra: %s for NVIDIA's DRA driver (%s %s); the scheduler picks the nodes.\n"
             "# The cluster needs the driver's DeviceClasses (its chart, or `gpuprov export dra`).\n" % (
                 " " + escape(source) if source else "",
                 ", ".join("%d %s" % (n, k) for k, n in kinds.items()), dra.DRIVER, dra.DRIVER_RELEASE))
    return first + "---\n".join(parts)
