"""`fit -o pods`: Kubernetes Deployments that run the workloads where fit put them.

One Deployment per workload (``replicas`` as asked), when all its copies landed on one node
with the same resource; copies fit spread over nodes or resources get one Deployment per
(node, resource), named ``<workload>-2``, ``-3``... Each container asks for exactly the
resource fit chose (``nvidia.com/mig-<profile>``, ``nvidia.com/gpu`` for whole, time-sliced,
MPS or multi-GPU, HAMi's ``nvidia.com/gpu`` + ``gpumem`` + ``gpucores``), has a nodeSelector for
its node, and says the memory its slot gives in annotations (for servers such as vLLM,
``--gpu-memory-utilization`` is that memory as a fraction of what the container sees).

With the pool's ``cpu_manager_policy: static`` the pods are Guaranteed (requests equal limits)
with whole CPUs: only then does the static CPU manager pin them. Otherwise they ask for CPU
and memory without pinning (a Burstable pod gets shared CPUs whatever it asks).

A workload with ``autoscale`` gets an autoscaling/v2 HorizontalPodAutoscaler per Deployment
whose maxReplicas is exactly the slots fit reserved there, so scaling out never asks for more
GPU than the packing planned.
"""

import math
import re

from ansible_collections.gpuprov.gpu.plugins.plugin_utils.terminal_text import escape
from gpuprov.fit.report import item_resources
from gpuprov.fit.units import MIB_PER_GIB

DEFAULT_CPU = 1
DEFAULT_HOST_MEMORY = "8Gi"
WORKLOAD_LABEL = "gpuprov.io/workload"
ANNOTATION_MEMORY = "gpuprov.io/gpu-memory-gib"
ANNOTATION_UTILIZATION = "gpuprov.io/gpu-memory-utilization"
ANNOTATION_PLACEMENT = "gpuprov.io/placement"
NODE_SELECTOR_LABEL = "kubernetes.io/hostname"


def dns_label(name, limit=63):
    """A workload name as a DNS-1123 label (lowercase, digits, '-'; at most ``limit`` characters)."""
    text = re.sub(r"[^a-z0-9-]+", "-", str(name).lower()).strip("-")
    text = re.sub(r"-{2,}", "-", text)[:limit].strip("-")
    return text or "workload"


def _slot(gpu, item, profile_index):
    """(slot memory MiB, memory the container sees MiB, where) for one copy on one GPU."""
    view = gpu.view
    if gpu.mode == "mig":
        g = view.geometry
        mib = g.profiles[profile_index].memory_gib * MIB_PER_GIB
        return mib, mib, g.names[profile_index]
    if item.gang is not None:
        return view.memory_mib, view.memory_mib, "whole GPU"
    if len(gpu.items) == 1:
        return view.memory_mib, view.memory_mib, "whole GPU"
    if gpu.shared_method == "hami":
        # HAMi-core shows the container its gpumem cap as the device's memory (Project-HAMi/HAMi
        # v2.10.0 README.md, its nvidia-smi inside a container; UNVERIFIED against HAMi-core's code).
        mib = math.ceil(item.memory_mib)
        return mib, mib, "HAMi slot"
    if gpu.shared_method == "mps":
        # The device plugin pins memory/N per client; the container still sees the whole GPU (UNVERIFIED).
        mib = view.model.memory_mib // len(gpu.items)
        return mib, view.memory_mib, "MPS share 1/%d" % len(gpu.items)
    # Time-slicing limits nothing: the budget is what fit reserved, out of the whole GPU.
    return item.memory_mib, view.memory_mib, "time-sliced with %d" % (len(gpu.items) - 1)


def _copies(result):
    """[(workload, copy name, host, resources, slot MiB, visible MiB, where, gpu indices)] per copy."""
    copies, gangs = [], {}
    for gpu in result.gpus:
        if gpu.mode == "mig":
            pairs = [(item, p) for item, p, _inst in gpu.placements]
        else:
            pairs = [(item, None) for item in gpu.items]
        for item, p in pairs:
            if item.gang is not None:
                gang = gangs.get(item.gang)
                if gang is None:
                    slot, visible, where = _slot(gpu, item, p)
                    gang = [item.workload, item.gang, gpu.node, item_resources(gpu, item, p),
                            slot, visible, "%d whole GPUs" % item.workload.gpus, []]
                    gangs[item.gang] = gang
                    copies.append(gang)
                gang[7].append(gpu.index)
                continue
            slot, visible, where = _slot(gpu, item, p)
            copies.append([item.workload, item.name, gpu.node, item_resources(gpu, item, p), slot, visible, where,
                           [gpu.index]])
    return copies


def _container(workload, name, resources, static_cpu):
    cpu = workload.cpu if workload.cpu is not None else DEFAULT_CPU
    memory = str(workload.host_memory) if workload.host_memory is not None else DEFAULT_HOST_MEMORY
    limits = dict((k, v) for k, v in sorted(resources.items()))
    if static_cpu:
        # Guaranteed QoS: requests == limits, whole CPUs (the static CPU manager pins only those).
        cores = str(int(math.ceil(cpu)))
        limits.update({"cpu": cores, "memory": memory})
        requests = {"cpu": cores, "memory": memory}
    else:
        limits["memory"] = memory
        requests = {"cpu": ("%gm" % (cpu * 1000)) if cpu != int(cpu) else str(int(cpu)), "memory": memory}
    return {
        "name": name,
        "image": workload.image or "registry.example.invalid/%s:latest" % name,
        "resources": {"limits": limits, "requests": requests},
    }


def autoscale_minimums(minimum, slots):
    """The minReplicas of each of a workload's Deployments (``slots``: each one's maxReplicas):
    at least 1 each (an HPA's minimum), ``minimum`` in all where it can be, filled in order."""
    mins = [1] * len(slots)
    left = minimum - len(slots)
    while left > 0:
        grew = False
        for number, top in enumerate(slots):
            if left and mins[number] < top:
                mins[number] += 1
                left -= 1
                grew = True
        if not grew:
            break
    return mins


def autoscaler(deployment, autoscale, minimum):
    """An autoscaling/v2 HorizontalPodAutoscaler for ``deployment``: between ``minimum`` and the
    Deployment's slots (its spec.replicas as packed), on the average per-pod value of
    autoscale's metric (type Pods: the custom metrics API, e.g. Prometheus Adapter)."""
    metadata = {"name": deployment["metadata"]["name"], "labels": dict(deployment["metadata"]["labels"])}
    if deployment["metadata"].get("namespace"):
        metadata["namespace"] = deployment["metadata"]["namespace"]
    return {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": metadata,
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": deployment["metadata"]["name"]},
            "minReplicas": minimum,
            "maxReplicas": deployment["spec"]["replicas"],
            "metrics": [{"type": "Pods", "pods": {"metric": {"name": autoscale["metric"]},
                                                  "target": {"type": "AverageValue",
                                                             "averageValue": autoscale["target"]}}}],
        },
    }


def with_autoscalers(documents):
    """[(comments, Deployment)] -> [(comments, object)]: each autoscaled workload's Deployments
    followed by their HPAs. A managed Deployment leaves spec.replicas out, as the Kubernetes
    docs advise for HPA targets (Horizontal Pod Autoscaling: "Migrating Deployments and
    StatefulSets to horizontal autoscaling"), so re-applying it does not reset the scale."""
    groups = {}
    for _comments, deployment, workload in documents:
        if workload.autoscale:
            groups.setdefault(workload.name, (workload, []))[1].append(deployment)
    minimums = {}
    for workload, group in groups.values():
        slots = [d["spec"]["replicas"] for d in group]
        for deployment, minimum in zip(group, autoscale_minimums(workload.autoscale["min"], slots)):
            minimums[id(deployment)] = (minimum, sum(slots), len(group))
    out = []
    for comments, deployment, workload in documents:
        if not workload.autoscale:
            out.append((comments, deployment))
            continue
        minimum, total, count = minimums[id(deployment)]
        hpa = autoscaler(deployment, workload.autoscale, minimum)
        del deployment["spec"]["replicas"]
        note = "autoscaled by the HPA below: %d to %d replicas, the slots fit reserved here" % (
            minimum, hpa["spec"]["maxReplicas"])
        if count > 1:
            note += " (%d of the workload's %d slots; min %d in all)" % (
                hpa["spec"]["maxReplicas"], total, workload.autoscale["min"])
        out.append((comments + [note], deployment))
        out.append((["%s: scale on %s, %s per pod on average, within the %d slot(s) fit packed" % (
            workload.name, workload.autoscale["metric"], workload.autoscale["target"], hpa["spec"]["maxReplicas"])],
            hpa))
    return out


def _deployments(result, namespace=None):
    nodes = dict((n.host, n) for n in result.nodes)
    groups = []  # [workload, key, [copies]]
    for copy in _copies(result):
        workload, _name, host, resources, slot, visible, where, _indices = copy
        key = (host, tuple(sorted(resources.items())), round(slot), round(visible), where)
        for group in groups:
            if group[0] is workload and group[1] == key:
                group[2].append(copy)
                break
        else:
            groups.append([workload, key, [copy]])
    documents, numbers, used = [], {}, set()
    for workload, key, copies in groups:
        numbers[workload.name] = numbers.get(workload.name, 0) + 1
        base = dns_label(workload.name, 55)
        name = base if numbers[workload.name] == 1 else "%s-%d" % (base, numbers[workload.name])
        while name in used:  # two names that sanitise alike
            name += "-x"
        used.add(name)
        host, resources, slot, visible = key[0], dict(key[1]), copies[0][4], copies[0][5]
        node = nodes[host]
        static_cpu = node.view.entry.cpu_manager_policy == "static"
        utilization = min(1.0, slot / float(visible))
        labels = {WORKLOAD_LABEL: name, "app.kubernetes.io/name": base, "app.kubernetes.io/managed-by": "gpuprov"}
        places = []
        for c in copies:
            text = "%s GPU %s" % (c[2], ",".join(str(i) for i in sorted(c[7])))
            for entry in places:
                if entry[0] == text:
                    entry[1] += 1
                    break
            else:
                places.append([text, 1])
        placement = "; ".join(t if n == 1 else "%s (x%d)" % (t, n) for t, n in places)
        annotations = {ANNOTATION_MEMORY: "%.2f" % (slot / MIB_PER_GIB),
                       ANNOTATION_UTILIZATION: "%.2f" % (math.floor(utilization * 100) / 100.0),
                       ANNOTATION_PLACEMENT: placement}
        metadata = {"name": name, "labels": dict(labels)}
        if namespace:
            metadata["namespace"] = namespace
        deployment = {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": metadata,
            "spec": {
                "replicas": len(copies),
                "selector": {"matchLabels": {WORKLOAD_LABEL: name}},
                "template": {
                    "metadata": {"labels": labels, "annotations": annotations},
                    "spec": {
                        "nodeSelector": {NODE_SELECTOR_LABEL: host},
                        "containers": [_container(workload, base, resources, static_cpu)],
                    },
                },
            },
        }
        comments = ["%s: %d cop%s on %s (%s), %s GiB of GPU memory per slot%s" % (
            workload.name, len(copies), "y" if len(copies) == 1 else "ies", placement, copies[0][6],
            "%.2f" % (slot / MIB_PER_GIB), "; Guaranteed, whole CPUs (static CPU manager)" if static_cpu else ""),
            "vLLM: --gpu-memory-utilization %s (the slot's memory / what the container sees)"
            % annotations[ANNOTATION_UTILIZATION]]
        if workload.image is None:
            comments.append("replace the placeholder image with the workload's own")
        documents.append((comments, deployment, workload))
    return documents


def pods_text(result, source=None, namespace=None):
    """The Deployments as one multi-document YAML stream with comments."""
    import yaml

    parts = []
    for comments, deployment in with_autoscalers(_deployments(result, namespace)):
        # Comments are escaped to one line each: a workload name with a newline cannot end the
        # comment and add YAML of its own. Every value goes through the YAML dumper.
        head = "".join("# %s\n" % escape(line) for line in comments)
        parts.append(head + yaml.safe_dump(deployment, sort_keys=False, default_flow_style=False))
    hpas = sum(1 for part in parts if "\nkind: HorizontalPodAutoscaler\n" in part)
    first = "# gpuprov fit%s -o pods: %d Deployment(s)%s; nodes as in `gpuprov fit -o inventory`.\n" % (
        " " + escape(source) if source else "", len(parts) - hpas,
        ", %d HorizontalPodAutoscaler(s)" % hpas if hpas else "")
    return first + "---\n".join(parts)
