"""Nodes, pods and events from `kubectl get ... -o json`, validated into the snapshot model."""

import re

from ansible_collections.gpuprov.gpu.plugins.module_utils.decimal_text import digits_value
from ansible_collections.gpuprov.gpu.plugins.module_utils.quantities import k8s_quantity
from gpuprov.diagnose.dra_objects import pod_resource_claims
from gpuprov.diagnose.snapshot import Node, Pod, SchedulingEvent, SnapshotError


# Resource names that are GPUs: whole GPUs, renamed shared GPUs, MIG devices.
_GPU_RESOURCE = re.compile(r"^nvidia\.com/(gpu(\.shared)?|mig-[0-9a-z.+-]+)\Z")
TERMINATED_PHASES = ("Succeeded", "Failed")


def _describe_item(item, index):
    meta = item.get("metadata") if isinstance(item, dict) else None
    name = meta.get("name") if isinstance(meta, dict) else None
    namespace = meta.get("namespace") if isinstance(meta, dict) else None
    if name and namespace:
        return "items[%d] (%s/%s)" % (index, namespace, name)
    if name:
        return "items[%d] (%s)" % (index, name)
    return "items[%d]" % index


def _list_items(doc, source, item_kind, hint):
    """Items of a `kubectl get -o json` list of `item_kind`, or problems naming the file."""
    if not isinstance(doc, dict):
        raise SnapshotError("%s: expected a JSON object (a %sList), got %s; %s"
                            % (source, item_kind, type(doc).__name__, hint))
    kind = doc.get("kind")
    if kind not in ("List", item_kind + "List"):
        if kind == item_kind:
            raise SnapshotError("%s: kind: is a single %s, expected a %sList; %s"
                                % (source, item_kind, item_kind, hint))
        raise SnapshotError("%s: kind: is %r, expected %sList or List; %s" % (source, kind, item_kind, hint))
    items = doc.get("items")
    if items is None:
        items = []
    if not isinstance(items, list):
        raise SnapshotError("%s: items: expected a list, got %s; %s" % (source, type(items).__name__, hint))
    problems = []
    for index, item in enumerate(items):
        if not isinstance(item, dict):
            problems.append("%s: items[%d]: expected an object, got %s" % (source, index, type(item).__name__))
            continue
        # Items of a `kind: List` carry their own kind; items of a typed list may omit it.
        if item.get("kind", item_kind) != item_kind:
            problems.append("%s: %s: kind: is %r, expected %s; %s"
                            % (source, _describe_item(item, index), item.get("kind"), item_kind, hint))
            continue
        meta = item.get("metadata")
        if not isinstance(meta, dict) or not isinstance(meta.get("name"), str) or not meta.get("name"):
            problems.append("%s: %s: metadata.name: missing" % (source, _describe_item(item, index)))
    if problems:
        raise SnapshotError(problems)
    return items


def _gpu_quantities(mapping, where, problems):
    """GPU resources of an allocatable/capacity/requests map as ints (extended resources are integers)."""
    result = {}
    if mapping is None:
        return result
    if not isinstance(mapping, dict):
        problems.append("%s: expected a map of resource quantities, got %s" % (where, type(mapping).__name__))
        return result
    for name, raw in mapping.items():
        if not _GPU_RESOURCE.match(str(name)):
            continue
        try:
            count = k8s_quantity(str(raw).strip())
        except ValueError:
            count = None
        if count is None or count.denominator != 1 or count < 0:
            problems.append("%s.%s: %r is not a whole number; extended resources such as GPUs are counted in units"
                            % (where, name, raw))
            continue
        result[name] = int(count)
    return result


def is_gpu_resource(name):
    return bool(_GPU_RESOURCE.match(name))


def parse_nodes(doc, source="nodes.json"):
    hint = "export it with `kubectl get nodes -o json > %s`" % source
    items = _list_items(doc, source, "Node", hint)
    nodes, problems = [], []
    for index, item in enumerate(items):
        where = "%s: %s" % (source, _describe_item(item, index))
        status = item.get("status")
        if not isinstance(status, dict):
            problems.append("%s: status: missing; a node without status cannot be checked; %s" % (where, hint))
            continue
        if not isinstance(status.get("allocatable"), dict):
            problems.append("%s: status.allocatable: missing; kubectl always includes it, so the file is cut or "
                            "edited; %s" % (where, hint))
            continue
        allocatable = _gpu_quantities(status["allocatable"], where + ": status.allocatable", problems)
        capacity = _gpu_quantities(status.get("capacity"), where + ": status.capacity", problems)
        spec = item.get("spec") or {}
        labels = item["metadata"].get("labels") or {}
        taints = []
        for t_index, taint in enumerate(spec.get("taints") or []):
            if not isinstance(taint, dict) or not taint.get("key") or not taint.get("effect"):
                problems.append("%s: spec.taints[%d]: needs key and effect" % (where, t_index))
                continue
            taints.append({"key": taint["key"], "value": taint.get("value", ""), "effect": taint["effect"]})
        ready = True
        for condition in status.get("conditions") or []:
            if isinstance(condition, dict) and condition.get("type") == "Ready":
                ready = condition.get("status") == "True"
        nodes.append(Node(
            name=item["metadata"]["name"],
            allocatable=allocatable,
            capacity=capacity or dict(allocatable),
            labels={str(k): str(v) for k, v in labels.items()},
            taints=taints,
            unschedulable=bool(spec.get("unschedulable")),
            ready=ready,
        ))
    if problems:
        raise SnapshotError(problems)
    return nodes


# HAMi's per-GPU asks (Project-HAMi/HAMi v2.10.0 docs/config.md, nvidia.com/gpumem and gpucores): only HAMi's scheduler counts them; they
# are not node resources, so they stay out of the GPU requests the checks compare.
HAMI_RESOURCES = ("nvidia.com/gpumem", "nvidia.com/gpumem-percentage", "nvidia.com/gpucores")


def pod_hami_requests(spec, where, problems):
    """{HAMi resource: largest value any container asks} (limits, else requests)."""
    result = {}
    for c_index, container in enumerate(spec.get("containers") or []):
        resources = container.get("resources") or {}
        for part in ("requests", "limits"):
            mapping = resources.get(part) or {}
            if not isinstance(mapping, dict):
                continue
            for name in HAMI_RESOURCES:
                if name not in mapping:
                    continue
                try:
                    value = k8s_quantity(str(mapping[name]).strip())
                except ValueError:
                    value = None
                if value is None or value.denominator != 1 or value < 0:
                    problems.append("%s.spec.containers[%d].resources.%s.%s: %r is not a whole number"
                                    % (where, c_index, part, name, mapping[name]))
                    continue
                if name != "nvidia.com/gpumem" and value > 100:
                    problems.append("%s.spec.containers[%d].resources.%s.%s: %s is a percentage, at most 100 "
                                    "(HAMi's webhook rejects more)" % (where, c_index, part, name, value))
                    continue
                result[name] = max(result.get(name, 0), int(value))
    return result


def _container_requests(container, where, problems):
    resources = container.get("resources") or {}
    requests = _gpu_quantities(resources.get("requests"), where + ".resources.requests", problems)
    # For extended resources a limit alone sets the request too.
    for name, value in _gpu_quantities(resources.get("limits"), where + ".resources.limits", problems).items():
        requests.setdefault(name, value)
    return requests


def pod_gpu_requests(spec, where, problems):
    """Effective GPU requests of a pod, the way the scheduler adds them up.

    Regular containers run together and add up; classic init containers run one at a time
    before them, so the pod needs the largest of them; sidecars (init containers with
    restartPolicy Always) keep running and add to both.
    """
    total, sidecars, init_peak = {}, {}, {}
    for c_index, container in enumerate(spec.get("containers") or []):
        requests = _container_requests(container, "%s.spec.containers[%d]" % (where, c_index), problems)
        for name, value in requests.items():
            total[name] = total.get(name, 0) + value
    for c_index, container in enumerate(spec.get("initContainers") or []):
        requests = _container_requests(container, "%s.spec.initContainers[%d]" % (where, c_index), problems)
        if container.get("restartPolicy") == "Always":
            for name, value in requests.items():
                sidecars[name] = sidecars.get(name, 0) + value
        else:
            for name, value in requests.items():
                init_peak[name] = max(init_peak.get(name, 0), value + sidecars.get(name, 0))
    effective = {}
    for name in set(total) | set(sidecars) | set(init_peak):
        value = max(total.get(name, 0) + sidecars.get(name, 0), init_peak.get(name, 0))
        if value:
            effective[name] = value
    return effective


def parse_pods(doc, source="pods.json"):
    hint = "export it with `kubectl get pods -A -o json > %s`" % source
    items = _list_items(doc, source, "Pod", hint)
    pods, problems = [], []
    for index, item in enumerate(items):
        where = "%s: %s" % (source, _describe_item(item, index))
        meta = item["metadata"]
        spec = item.get("spec")
        status = item.get("status")
        if not isinstance(spec, dict):
            problems.append("%s: spec: missing; %s" % (where, hint))
            continue
        if not isinstance(status, dict):
            problems.append("%s: status: missing; without status.phase the pod cannot be told Pending from "
                            "Running; %s" % (where, hint))
            continue
        if not isinstance(status.get("phase"), str):
            problems.append("%s: status.phase: missing; %s" % (where, hint))
            continue
        if not isinstance(spec.get("containers"), list):
            problems.append("%s: spec.containers: missing" % where)
            continue
        before = len(problems)
        requests = pod_gpu_requests(spec, where + ":", problems)
        hami = pod_hami_requests(spec, where + ":", problems)
        claims = pod_resource_claims(spec, status, where + ":", problems)
        affinity = ((spec.get("affinity") or {}).get("nodeAffinity") or {})
        required = affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
        terms = None
        if required is not None:
            terms = required.get("nodeSelectorTerms") if isinstance(required, dict) else None
            if not isinstance(terms, list):
                problems.append("%s: spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution."
                                "nodeSelectorTerms: expected a list" % where)
        if len(problems) > before:
            continue
        pods.append(Pod(
            namespace=meta.get("namespace") or "default",
            name=meta["name"],
            phase=status["phase"],
            node_name=spec.get("nodeName") or "",
            requests=requests,
            node_selector={str(k): str(v) for k, v in (spec.get("nodeSelector") or {}).items()},
            node_affinity_terms=terms,
            tolerations=[t for t in spec.get("tolerations") or [] if isinstance(t, dict)],
            scheduling_gates=[g.get("name", "") for g in spec.get("schedulingGates") or [] if isinstance(g, dict)],
            scheduler_name=spec.get("schedulerName") or "default-scheduler",
            hami=hami,
            claims=claims,
        ))
    if problems:
        raise SnapshotError(problems)
    return pods


def _event_time(event):
    series = event.get("series") or {}
    candidates = [series.get("lastObservedTime"), event.get("lastTimestamp"), event.get("eventTime"),
                  event.get("firstTimestamp"), (event.get("metadata") or {}).get("creationTimestamp")]
    # RFC 3339 times in UTC sort as strings; take the newest one the event carries.
    return max((c for c in candidates if isinstance(c, str) and c), default="")


def parse_events(doc, source="events.json"):
    """FailedScheduling events about pods; other events are read and ignored."""
    hint = "export it with `kubectl get events -A -o json > %s`" % source
    items = _list_items(doc, source, "Event", hint)
    events, problems = [], []
    for index, item in enumerate(items):
        where = "%s: %s" % (source, _describe_item(item, index))
        if item.get("reason") != "FailedScheduling":
            continue
        involved = item.get("involvedObject") or item.get("regarding")
        if not isinstance(involved, dict) or not involved.get("name"):
            problems.append("%s: involvedObject.name: missing; cannot tell which pod the event is about" % where)
            continue
        if involved.get("kind", "Pod") != "Pod":
            continue
        message = item.get("message") or item.get("note") or ""
        count = item.get("count") or (item.get("series") or {}).get("count") or 1
        events.append(SchedulingEvent(
            namespace=involved.get("namespace") or item["metadata"].get("namespace") or "default",
            pod=involved["name"],
            message=str(message),
            time=_event_time(item),
            count=count if isinstance(count, int) and not isinstance(count, bool) and count > 0
            else digits_value(str(count)) or 1,
        ))
    if problems:
        raise SnapshotError(problems)
    return events
