"""Why do pods queue beside idle GPUs?

Pure logic behind `gpuprov diagnose` and `gpuprov baseline`: load and validate a cluster
snapshot, run the checks in a fixed order and stop at the first that explains what is seen,
and build a report (plain dicts and lists, ready for JSON).

The order is the one operators learn the hard way:

1. allocation  every GPU resource on the node is requested by a running pod: sharing
               (time-slicing, MIG) adds slots, sized here from the memory headroom.
2. memory      the node is fully allocated and its GPU memory is (nearly) full, so a
               second copy of the current work would not fit: time-slicing will not help.
3. placement   GPUs are free, but the Pending pods may not go there (node selector, node
               affinity, taints, a cordoned node, a request larger than any node).
4. application running pods hold GPUs but keep them idle: SM activity cycles between 0
               and high (CPU-bound input pipeline) or stays low while memory is in use (I/O-
               or network-bound). More GPUs will not help.

Inputs (see docs/diagnose.md for the full description):

- ``nodes.json``, ``pods.json``, ``events.json``: ``kubectl get nodes|pods -A|events -A -o json``.
- ``facts/<node>.json`` (optional): gpu_facts output, the bare ``{"gpus": [...]}`` object, or
  the module result ``{"gpu_facts": {...}}`` / ``{"ansible_facts": {"gpu_facts": {...}}}``.
  ``ansible --tree`` writes the same result to ``facts/<node>`` (no extension); both work.
- ``utilization/<node>.csv`` (optional): what
  ``nvidia-smi --query-gpu=timestamp,index,name,memory.used,memory.total,utilization.gpu
  --format=csv,noheader,nounits -l 1`` writes on that node. A single ``utilization.csv`` is
  accepted too: with a node name as an extra first column, or without it when the snapshot
  has exactly one GPU node.

Nothing here talks to a cluster or prints: cmd_diagnose.py and cmd_baseline.py do that.
"""
import csv
import io
import json
import math
import os
import re
from dataclasses import dataclass, field

from ansible_collections.gpuprov.gpu.plugins.plugin_utils import catalog

SCHEMA = "gpuprov.diagnose/v1"

CHECKS = ("allocation", "memory", "placement", "application")

# Sizing rules. Kept as named constants so the report and the docs can quote them.
# Share of a GPU's memory that the copies may fill; the rest is left for CUDA contexts,
# fragmentation and growth between samples.
MEMORY_USABLE_FRACTION = 0.9
# A MIG instance must hold the current per-pod memory use plus this margin.
MIG_MEMORY_MARGIN = 1.1
# Time-slicing replicas are also limited so that the copies' summed mean SM utilisation
# stays under this.
SM_TARGET_PERCENT = 80
# Never suggest more time-slicing replicas than this by default (--max-replicas).
DEFAULT_MAX_REPLICAS = 8

# SM activity patterns (nvidia-smi utilization.gpu: percent of the sample period in which
# at least one kernel ran; a coarse stand-in for DCGM's SM activity).
SM_IDLE_PERCENT = 5          # at or below: no kernel ran
SM_HIGH_PERCENT = 60         # at or above: a burst of work
SM_LOW_PERCENT = 30          # p95 below this while memory is in use: starved
SM_BUSY_MEAN_PERCENT = 60    # mean at or above this: the GPU is doing real work
CYCLE_MIN_SHARE = 0.2        # share of samples both idle and high to call it cycling
MEMORY_IN_USE_FRACTION = 0.05  # memory used above this share of total: someone holds it

# Resource names that are GPUs: whole GPUs, renamed shared GPUs, MIG devices.
_GPU_RESOURCE = re.compile(r"^nvidia\.com/(gpu(\.shared)?|mig-[0-9a-z.+-]+)$")
_TERMINATED_PHASES = ("Succeeded", "Failed")
# Taint effects that keep a pod off a node; PreferNoSchedule only scores it lower.
_BLOCKING_EFFECTS = ("NoSchedule", "NoExecute")
_UNSCHEDULABLE_TAINT = "node.kubernetes.io/unschedulable"
_NOT_READY_TAINTS = ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")

UTILIZATION_FIELDS = ("timestamp", "index", "name", "memory.used", "memory.total", "utilization.gpu")
NVIDIA_SMI_QUERY = ",".join(UTILIZATION_FIELDS)
# nvidia-smi's own timestamp format, e.g. 2026/11/30 10:00:01.123
_TIMESTAMP = re.compile(r"^\d{4}/\d{2}/\d{2} \d{2}:\d{2}:\d{2}(\.\d+)?$")
_NOT_AVAILABLE = ("[N/A]", "N/A", "[Not Supported]", "[Unknown Error]", "[GPU is lost]")

MIB_PER_GIB = 1024


class SnapshotError(Exception):
    """Bad or missing input. Each problem reads `FILE: FIELD: what is wrong; what to do`."""

    def __init__(self, problems):
        self.problems = [problems] if isinstance(problems, str) else list(problems)
        super().__init__("\n".join(self.problems))


# --------------------------------------------------------------------------------------
# Data read from the snapshot


@dataclass
class Node:
    name: str
    allocatable: dict            # GPU resource -> int
    capacity: dict               # GPU resource -> int
    labels: dict = field(default_factory=dict)
    taints: list = field(default_factory=list)   # [{key, value, effect}]
    unschedulable: bool = False
    ready: bool = True

    @property
    def is_gpu_node(self):
        return bool(self.allocatable or self.capacity) or self.labels.get("nvidia.com/gpu.present") == "true"


@dataclass
class Pod:
    namespace: str
    name: str
    phase: str
    node_name: str = ""
    requests: dict = field(default_factory=dict)     # GPU resource -> int
    node_selector: dict = field(default_factory=dict)
    node_affinity_terms: list = None                 # required terms, None when there are none
    tolerations: list = field(default_factory=list)
    scheduling_gates: list = field(default_factory=list)
    scheduler_name: str = "default-scheduler"

    @property
    def key(self):
        return "%s/%s" % (self.namespace, self.name)

    @property
    def is_pending(self):
        return self.phase == "Pending" and not self.node_name


@dataclass
class SchedulingEvent:
    namespace: str
    pod: str
    message: str
    time: str = ""
    count: int = 1


@dataclass
class GpuFact:
    index: int
    name: str
    uuid: str
    memory_total_mib: float
    memory_used_mib: float
    process_count: int
    mig_capable: bool = None      # None: unknown
    mig_enabled: bool = False


@dataclass
class UtilizationSample:
    timestamp: str
    index: int
    name: str
    memory_used_mib: float
    memory_total_mib: float
    utilization_gpu: float        # None when nvidia-smi printed [N/A]


@dataclass
class Snapshot:
    nodes: list
    pods: list
    events: list
    facts: dict = field(default_factory=dict)          # node -> [GpuFact]
    utilization: dict = field(default_factory=dict)    # node -> [UtilizationSample]
    notes: list = field(default_factory=list)          # what could not be read, and why
    source: str = ""


# --------------------------------------------------------------------------------------
# Kubernetes objects


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
        text = str(raw).strip()
        if not re.fullmatch(r"\d+", text):
            problems.append("%s.%s: %r is not a whole number; extended resources such as GPUs are counted in units"
                            % (where, name, raw))
            continue
        result[name] = int(text)
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
            count=int(count) if str(count).isdigit() else 1,
        ))
    if problems:
        raise SnapshotError(problems)
    return events


# --------------------------------------------------------------------------------------
# Scheduler messages
#
# "0/9 nodes are available: 1 node(s) had untolerated taint {dedicated: llm-serving},
#  2 Insufficient nvidia.com/gpu, 6 node(s) didn't match Pod's node affinity/selector.
#  preemption: 0/9 nodes are available: 2 No preemption victims found for incoming pod, ..."

_MESSAGE_HEAD = re.compile(r"^\s*(\d+)/(\d+) nodes are available:?\s*(.*)$", re.S)
_REASON_SPLIT = re.compile(r",\s+(?=\d+\s)")

# (category, pattern) in the order they are tried; the first match names the reason.
_REASON_PATTERNS = (
    ("insufficient", re.compile(r"^Insufficient (?P<detail>\S+)$")),
    ("cordoned", re.compile(r"^node\(s\) were unschedulable$")),
    ("cordoned", re.compile(r"^node\(s\) had (?:untolerated )?taint \{node\.kubernetes\.io/unschedulable: ?\}")),
    ("not-ready", re.compile(r"^node\(s\) had (?:untolerated )?taint "
                             r"\{node\.kubernetes\.io/(?:not-ready|unreachable)")),
    ("taint", re.compile(r"^node\(s\) had (?:untolerated )?taint (?P<detail>\{[^}]*\})")),
    ("selector", re.compile(r"^node\(s\) didn't match Pod's node affinity(?:/selector)?$")),
    ("selector", re.compile(r"^node\(s\) didn't match node selector$")),
    ("pod-affinity", re.compile(r"^node\(s\) didn't (?:match pod (?:anti-)?affinity rules|satisfy existing pods "
                                r"anti-affinity rules)")),
    ("topology-spread", re.compile(r"^node\(s\) didn't match pod topology spread constraints")),
    ("volume", re.compile(r"volume|persistent")),
    ("ports", re.compile(r"free ports")),
    ("too-many-pods", re.compile(r"^Too many pods$")),
)


def parse_scheduler_message(message):
    """Split a FailedScheduling message into [{count, reason, category, detail}].

    Returns [] for messages of another form (the report then quotes the message as is).
    The preemption part after ". preemption:" says why preemption would not help and is
    left out.
    """
    match = _MESSAGE_HEAD.match(message or "")
    if not match:
        return []
    body = match.group(3)
    body = re.split(r"\.?\s+preemption:", body, maxsplit=1)[0].strip().rstrip(".")
    reasons = []
    for part in _REASON_SPLIT.split(body):
        part_match = re.match(r"^(\d+)\s+(.*)$", part.strip())
        if not part_match:
            continue
        count, text = int(part_match.group(1)), part_match.group(2).strip()
        category, detail = "other", ""
        for name, pattern in _REASON_PATTERNS:
            found = pattern.search(text)
            if found:
                category = name
                detail = found.groupdict().get("detail") or ""
                break
        reasons.append({"count": count, "reason": text, "category": category, "detail": detail})
    return reasons


# --------------------------------------------------------------------------------------
# Placement rules the scheduler applies (the subset that explains GPU pods)


def _match_expression(expression, labels):
    key, operator = expression.get("key"), expression.get("operator")
    values = [str(v) for v in expression.get("values") or []]
    present = key in labels
    if operator == "In":
        return present and labels[key] in values
    if operator == "NotIn":
        return not present or labels[key] not in values
    if operator == "Exists":
        return present
    if operator == "DoesNotExist":
        return not present
    if operator in ("Gt", "Lt") and present and len(values) == 1:
        try:
            left, right = int(labels[key]), int(values[0])
        except ValueError:
            return False
        return left > right if operator == "Gt" else left < right
    return False


def node_affinity_matches(terms, node):
    """Required node affinity: any term matches; within a term every expression must."""
    if terms is None:
        return True
    fields = {"metadata.name": node.name}
    for term in terms:
        if not isinstance(term, dict):
            continue
        expressions = term.get("matchExpressions") or []
        field_expressions = term.get("matchFields") or []
        # An empty term matches no node.
        if not expressions and not field_expressions:
            continue
        if all(_match_expression(e, node.labels) for e in expressions) and \
                all(_match_expression(e, fields) for e in field_expressions):
            return True
    return False


def tolerates(toleration, taint):
    effect = toleration.get("effect")
    if effect and effect != taint["effect"]:
        return False
    operator = toleration.get("operator") or "Equal"
    key = toleration.get("key") or ""
    if not key:
        return operator == "Exists"
    if key != taint["key"]:
        return False
    if operator == "Exists":
        return True
    return (toleration.get("value") or "") == (taint.get("value") or "")


def untolerated_taints(pod, node):
    return [t for t in node.taints
            if t["effect"] in _BLOCKING_EFFECTS
            and t["key"] != _UNSCHEDULABLE_TAINT and t["key"] not in _NOT_READY_TAINTS
            and not any(tolerates(tol, t) for tol in pod.tolerations)]


def format_taint(taint):
    return "%s=%s:%s" % (taint["key"], taint.get("value", ""), taint["effect"]) if taint.get("value") \
        else "%s:%s" % (taint["key"], taint["effect"])


NODE_STATE_BLOCKERS = ("cordoned", "not-ready", "taint")


def _describe_affinity(terms):
    described = []
    for term in terms or []:
        parts = []
        for expression in (term or {}).get("matchExpressions") or []:
            values = ",".join(str(v) for v in expression.get("values") or [])
            parts.append("%s %s %s" % (expression.get("key"), expression.get("operator"), values) if values
                         else "%s %s" % (expression.get("key"), expression.get("operator")))
        for expression in (term or {}).get("matchFields") or []:
            parts.append("%s %s %s" % (expression.get("key"), expression.get("operator"),
                                       ",".join(str(v) for v in expression.get("values") or [])))
        described.append(" and ".join(parts) or "an empty term")
    return " or ".join(described) or "no terms"


def placement_blockers(pod, node):
    """Why the scheduler keeps `pod` off `node` whatever is allocated there: [(category, detail)]."""
    blockers = []
    if node.unschedulable:
        blockers.append(("cordoned", "node is cordoned (spec.unschedulable)"))
    if not node.ready:
        blockers.append(("not-ready", "node is NotReady"))
    for taint in untolerated_taints(pod, node):
        blockers.append(("taint", "untolerated taint %s" % format_taint(taint)))
    missing = ["%s=%s" % (k, v) for k, v in sorted(pod.node_selector.items()) if node.labels.get(k) != v]
    if missing:
        blockers.append(("selector", "node lacks nodeSelector label %s" % ", ".join(missing)))
    if not node_affinity_matches(pod.node_affinity_terms, node):
        blockers.append(("affinity", "node does not match the pod's required node affinity"))
    return blockers


# --------------------------------------------------------------------------------------
# GPU facts and utilisation


def _number(value, where, problems, minimum=0):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        problems.append("%s: expected a number, got %r" % (where, value))
        return None
    if value < minimum:
        problems.append("%s: %r is below %s" % (where, value, minimum))
        return None
    return value


def _mig_state(value):
    """(capable, enabled) from gpu_facts' mig_mode_current; capable is None when unknown."""
    if value is None:
        return None, False
    if isinstance(value, bool):
        return True, value
    if isinstance(value, int):
        return True, value == 1
    text = str(value).strip().lower()
    if text in ("enabled", "enable", "1", "true"):
        return True, True
    if text in ("disabled", "disable", "0", "false"):
        return True, False
    if text in ("n/a", "[n/a]", "not supported", "[not supported]", "not_supported", "unsupported"):
        return False, False
    return None, False


def unwrap_gpu_facts(doc, source):
    """The gpu_facts object from the bare form or a module result; SnapshotError otherwise."""
    if not isinstance(doc, dict):
        raise SnapshotError("%s: expected a JSON object with gpus, got %s" % (source, type(doc).__name__))
    if doc.get("unreachable") or doc.get("failed"):
        raise SnapshotError("%s: the gpu_facts run failed on this node: %s"
                            % (source, doc.get("msg") or "no message"))
    if isinstance(doc.get("ansible_facts"), dict):
        doc = doc["ansible_facts"]
    if "gpu_facts" in doc:
        doc = doc["gpu_facts"]
        if not isinstance(doc, dict):
            raise SnapshotError("%s: gpu_facts: expected an object with gpus" % source)
    if "gpus" not in doc:
        raise SnapshotError("%s: gpus: missing; expected gpu_facts output ({\"gpus\": [...]}) or the module "
                            "result ({\"ansible_facts\": {\"gpu_facts\": {...}}})" % source)
    return doc


def parse_gpu_facts(doc, source, notes=None):
    """[GpuFact] from a facts file. GPUs gpu_facts could not read (their `error` is set),
    and a node whose driver was unavailable, are left out with a line in `notes`."""
    notes = [] if notes is None else notes
    facts = unwrap_gpu_facts(doc, source)
    if facts.get("driver_available") is False:
        notes.append("%s: the node's driver was not available when the facts were gathered (%s); its GPU "
                     "figures are unknown" % (source, facts.get("driver_error") or "no reason given"))
        return []
    gpus = facts["gpus"]
    if not isinstance(gpus, list):
        raise SnapshotError("%s: gpus: expected a list, got %s" % (source, type(gpus).__name__))
    result, problems = [], []
    for position, gpu in enumerate(gpus):
        where = "%s: gpus[%d]" % (source, position)
        if not isinstance(gpu, dict):
            problems.append("%s: expected an object" % where)
            continue
        if gpu.get("error"):
            notes.append("%s: gpu_facts could not read this GPU (%s); left out" % (where, gpu["error"]))
            continue
        before = len(problems)
        index = gpu.get("index", position)
        if isinstance(index, bool) or not isinstance(index, int):
            problems.append("%s.index: expected an integer, got %r" % (where, index))
        total = _number(gpu.get("memory_total_mib"), where + ".memory_total_mib", problems, minimum=1)
        used = _number(gpu.get("memory_used_mib"), where + ".memory_used_mib", problems)
        processes = gpu.get("processes") or []
        if not isinstance(processes, list):
            problems.append("%s.processes: expected a list" % where)
        if len(problems) > before:
            continue
        capable, enabled = _mig_state(gpu.get("mig_mode_current"))
        if isinstance(gpu.get("mig_capable"), bool):
            capable = gpu["mig_capable"]
        result.append(GpuFact(index=index, name=str(gpu.get("name") or ""), uuid=str(gpu.get("uuid") or ""),
                              memory_total_mib=float(total), memory_used_mib=float(used),
                              process_count=len(processes), mig_capable=capable, mig_enabled=enabled))
    if problems:
        raise SnapshotError(problems)
    return result


def _csv_number(text, where, problems, integer=False):
    if text in _NOT_AVAILABLE:
        return None
    try:
        value = int(text) if integer else float(text)
    except ValueError:
        problems.append("%s: %r is not a number" % (where, text))
        return None
    return value


def parse_utilization_csv(text, source, with_node=False):
    """Samples from nvidia-smi's CSV (see NVIDIA_SMI_QUERY); with_node: a node name column first.

    Returns [UtilizationSample], or {node: [UtilizationSample]} when with_node is set.
    A header line (`timestamp, index, ...`) is skipped, so output without `noheader` works.
    """
    problems = []
    samples = {} if with_node else []
    width = len(UTILIZATION_FIELDS) + (1 if with_node else 0)
    for line_number, row in enumerate(csv.reader(io.StringIO(text), skipinitialspace=True), start=1):
        if not row or all(not cell.strip() for cell in row):
            continue
        row = [cell.strip() for cell in row]
        where = "%s: line %d" % (source, line_number)
        if row[1 if with_node else 0].lower().startswith("timestamp"):
            continue
        if len(row) != width:
            problems.append("%s: expected %d fields (%s), got %d; record with `nvidia-smi --query-gpu=%s "
                            "--format=csv,noheader,nounits -l 1`"
                            % (where, width, ", ".join((("node",) if with_node else ()) + UTILIZATION_FIELDS),
                               len(row), NVIDIA_SMI_QUERY))
            if len(problems) >= 10:
                break
            continue
        node = row.pop(0) if with_node else None
        timestamp, index, name, used, total, util = row
        if not _TIMESTAMP.match(timestamp):
            problems.append("%s: timestamp: %r is not nvidia-smi's YYYY/MM/DD HH:MM:SS.mmm" % (where, timestamp))
        before = len(problems)
        index_value = _csv_number(index, where + ": index", problems, integer=True)
        used_value = _csv_number(used, where + ": memory.used", problems)
        total_value = _csv_number(total, where + ": memory.total", problems)
        util_value = _csv_number(util, where + ": utilization.gpu", problems)
        if index_value is None and len(problems) == before:
            problems.append("%s: index: missing" % where)
        if len(problems) > before or not _TIMESTAMP.match(timestamp):
            if len(problems) >= 10:
                break
            continue
        sample = UtilizationSample(timestamp=timestamp, index=index_value, name=name,
                                   memory_used_mib=used_value, memory_total_mib=total_value,
                                   utilization_gpu=util_value)
        if with_node:
            samples.setdefault(node, []).append(sample)
        else:
            samples.append(sample)
    if problems:
        raise SnapshotError(problems)
    return samples


def percentile(values, fraction):
    """Nearest-rank percentile (no interpolation): a value that was actually observed."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(fraction * len(ordered)))
    return ordered[rank - 1]


def classify_sm(values, memory_used_fraction):
    """Name the pattern of a GPU's SM utilisation series.

    cycling  bursts of work between idle samples: the GPU waits for its input (CPU-bound).
    low      memory is held but kernels rarely run: waiting on I/O or the network.
    busy     doing real work most of the time.
    idle     nothing runs and little memory is held.
    moderate none of the above.
    """
    if not values:
        return None
    count = len(values)
    idle_share = sum(1 for v in values if v <= SM_IDLE_PERCENT) / count
    high_share = sum(1 for v in values if v >= SM_HIGH_PERCENT) / count
    mean = sum(values) / count
    memory_in_use = memory_used_fraction is not None and memory_used_fraction >= MEMORY_IN_USE_FRACTION
    if idle_share >= CYCLE_MIN_SHARE and high_share >= CYCLE_MIN_SHARE:
        return "cycling"
    if mean >= SM_BUSY_MEAN_PERCENT:
        return "busy"
    if max(values) <= SM_IDLE_PERCENT and not memory_in_use:
        return "idle"
    if percentile(values, 0.95) < SM_LOW_PERCENT and memory_in_use:
        return "low"
    return "moderate"


def summarise_utilization(samples):
    """Per GPU: samples, mean and p95 SM utilisation, mean/p95/max memory used, pattern.

    Returns a list sorted by GPU index of dicts with the keys index, name, samples,
    sm_mean, sm_p95, memory_used_mean_mib, memory_used_p95_mib, memory_used_max_mib,
    memory_total_mib, pattern, first, last. Values nvidia-smi reported as [N/A] are left
    out of the statistics; a statistic with no values is None.
    """
    by_index = {}
    for sample in samples:
        by_index.setdefault(sample.index, []).append(sample)
    summaries = []
    for index in sorted(by_index):
        series = by_index[index]
        sm = [s.utilization_gpu for s in series if s.utilization_gpu is not None]
        used = [s.memory_used_mib for s in series if s.memory_used_mib is not None]
        totals = [s.memory_total_mib for s in series if s.memory_total_mib]
        total = max(totals) if totals else None
        used_p95 = percentile(used, 0.95)
        summaries.append({
            "index": index,
            "name": series[-1].name,
            "samples": len(series),
            "sm_mean": round(sum(sm) / len(sm), 1) if sm else None,
            "sm_p95": percentile(sm, 0.95),
            "memory_used_mean_mib": round(sum(used) / len(used), 1) if used else None,
            "memory_used_p95_mib": used_p95,
            "memory_used_max_mib": max(used) if used else None,
            "memory_total_mib": total,
            "pattern": classify_sm(sm, (used_p95 / total) if (used_p95 is not None and total) else None),
            "first": min(s.timestamp for s in series),
            "last": max(s.timestamp for s in series),
        })
    return summaries


# --------------------------------------------------------------------------------------
# Loading a snapshot directory


def _read_json(path, label):
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except FileNotFoundError:
        raise SnapshotError("%s: missing" % label) from None
    except IsADirectoryError:
        raise SnapshotError("%s: is a directory, expected a JSON file" % label) from None
    except UnicodeDecodeError as error:
        raise SnapshotError("%s: not UTF-8 text (%s)" % (label, error.reason)) from None
    except json.JSONDecodeError as error:
        raise SnapshotError("%s: invalid JSON at line %d column %d: %s"
                            % (label, error.lineno, error.colno, error.msg)) from None
    except OSError as error:
        raise SnapshotError("%s: cannot read: %s" % (label, error.strerror)) from None


def _read_text(path, label):
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read()
    except UnicodeDecodeError as error:
        raise SnapshotError("%s: not UTF-8 text (%s)" % (label, error.reason)) from None
    except OSError as error:
        raise SnapshotError("%s: cannot read: %s" % (label, error.strerror)) from None


def _node_files(directory, extension):
    """{node: path} for DIR/<node><extension> (and DIR/<node> when extension is .json)."""
    files = {}
    if not os.path.isdir(directory):
        return files
    for entry in sorted(os.listdir(directory)):
        path = os.path.join(directory, entry)
        if not os.path.isfile(path) or entry.startswith("."):
            continue
        if entry.endswith(extension):
            files[entry[: -len(extension)]] = path
        elif extension == ".json" and "." not in entry:
            # `ansible --tree DIR` names each file after the host, with no extension.
            files.setdefault(entry, path)
    return files


def load_gpu_data(directory, nodes, label_prefix=""):
    """Facts and utilisation for `nodes` from DIR/facts/ and DIR/utilization[/].

    Both are optional. Returns (facts, utilization, notes); a file that is present but
    malformed raises SnapshotError, a file for a node the snapshot does not know is noted
    and ignored.
    """
    known = {node.name for node in nodes}
    gpu_nodes = [node.name for node in nodes if node.is_gpu_node]
    facts, utilization, notes = {}, {}, []
    problems = []

    def per_node(folder, suffix, parse):
        """parse(path, label) for each DIR/<folder>/<node><suffix> of a known node."""
        found = {}
        for node_name, path in _node_files(os.path.join(directory, folder), suffix).items():
            label = label_prefix + os.path.relpath(path, directory)
            if node_name not in known:
                notes.append("%s: no node %s in the snapshot; ignored" % (label, node_name))
                continue
            try:
                value = parse(path, label)
            except SnapshotError as error:
                problems.extend(error.problems)
                continue
            found[node_name] = value
        return found

    # A facts file listing no GPU says nothing about the node: leave the node out.
    facts.update((node, gpus) for node, gpus in per_node(
        "facts", ".json", lambda path, label: parse_gpu_facts(_read_json(path, label), label, notes)).items() if gpus)
    utilization.update(per_node("utilization", ".csv",
                                lambda path, label: parse_utilization_csv(_read_text(path, label), label)))

    single = os.path.join(directory, "utilization.csv")
    if os.path.isfile(single):
        label = label_prefix + "utilization.csv"
        text = _read_text(single, label)
        first = next((line for line in text.splitlines() if line.strip()), "")
        columns = len(next(csv.reader([first], skipinitialspace=True), [])) if first else 0
        try:
            if columns == len(UTILIZATION_FIELDS) + 1:
                for node_name, samples in parse_utilization_csv(text, label, with_node=True).items():
                    if node_name not in known:
                        notes.append("%s: no node %s in the snapshot; its rows are ignored" % (label, node_name))
                        continue
                    utilization.setdefault(node_name, []).extend(samples)
            elif columns == len(UTILIZATION_FIELDS) and len(gpu_nodes) == 1:
                utilization.setdefault(gpu_nodes[0], []).extend(parse_utilization_csv(text, label))
            elif columns == len(UTILIZATION_FIELDS):
                problems.append("%s: rows have no node column but the snapshot has %d GPU nodes; put each node's "
                                "CSV in utilization/<node>.csv, or add the node name as a first column"
                                % (label, len(gpu_nodes)))
            elif first:
                parse_utilization_csv(text, label)   # reports the bad field count with its line
        except SnapshotError as error:
            problems.extend(error.problems)
    if problems:
        raise SnapshotError(problems)
    return facts, utilization, notes


def load_snapshot(directory):
    """Read a snapshot directory; raise SnapshotError naming every bad file and field."""
    if not os.path.isdir(directory):
        raise SnapshotError("%s: not a directory; --snapshot takes a folder holding nodes.json, pods.json and "
                            "events.json" % directory)
    problems = []
    parsed = {}
    for filename, parser in (("nodes.json", parse_nodes), ("pods.json", parse_pods), ("events.json", parse_events)):
        path = os.path.join(directory, filename)
        try:
            parsed[filename] = parser(_read_json(path, filename), filename)
        except SnapshotError as error:
            if error.problems and error.problems[0] == "%s: missing" % filename:
                kind = {"nodes.json": "nodes", "pods.json": "pods -A", "events.json": "events -A"}[filename]
                error.problems[0] += "; create it with `kubectl get %s -o json > %s`" % (kind, path)
            problems.extend(error.problems)
    if problems:
        raise SnapshotError(problems)
    nodes = parsed["nodes.json"]
    facts, utilization, notes = load_gpu_data(directory, nodes)
    return Snapshot(nodes=nodes, pods=parsed["pods.json"], events=parsed["events.json"],
                    facts=facts, utilization=utilization, notes=notes, source=directory)


# --------------------------------------------------------------------------------------
# Sizing


def gib(mib):
    return mib / MIB_PER_GIB


def _fmt_gib(mib):
    value = gib(mib)
    return ("%.0f" % value) if value >= 10 else ("%.1f" % value)


def gpu_model(names):
    """The catalog model for the first of `names` the catalog knows, or None."""
    for name in names:
        if not name:
            continue
        # GFD's product label gets -SHARED under sharing and -MIG-<profile> under MIG single.
        name = re.sub(r"(-SHARED|-MIG-\S+)$", "", str(name))
        try:
            return catalog.lookup(name)
        except catalog.UnknownModelError:
            continue
    return None


def _mig_profiles(model):
    return [p for p in model.mig.profiles.values() if not p.media_extensions] if model and model.mig else []


def mig_option(model, need_mib):
    """The MIG profile that holds `need_mib` (plus MIG_MEMORY_MARGIN) most times per GPU, or None."""
    fitting = [p for p in _mig_profiles(model) if need_mib * MIG_MEMORY_MARGIN <= p.memory_gib * MIB_PER_GIB]
    if not fitting:
        return None
    return max(fitting, key=lambda p: (p.max_count, -p.memory_slices))


def mig_cap_option(model):
    """The largest MIG profile that still gives two or more per GPU: a memory cap per pod."""
    several = [p for p in _mig_profiles(model) if p.max_count >= 2]
    return max(several, key=lambda p: p.memory_gib) if several else None


def _flow(value):
    """A value as a one-line YAML flow collection, for inventory lines in the report."""
    if isinstance(value, dict):
        return "{%s}" % ", ".join("%s: %s" % (_flow(k), _flow(v)) for k, v in value.items())
    if isinstance(value, list):
        return "[%s]" % ", ".join(_flow(v) for v in value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str) and not re.fullmatch(r"[A-Za-z][A-Za-z0-9_-]*", value):
        return json.dumps(value)
    return str(value)


def sharing_line(sharing):
    """The inventory line that asks gpuprov for `sharing` (intent.py's gpuprov_sharing)."""
    return "gpuprov_sharing: %s" % _flow(sharing)


def mig_sharing(profile, per_gpu):
    return {"strategy": "mig", "mig": {"devices": [
        {"devices": "all", "mig-enabled": True, "mig-devices": {profile: per_gpu}}]}}


# --------------------------------------------------------------------------------------
# The checks


@dataclass
class _NodeState:
    node: Node
    pods: list
    resources: list           # [{name, capacity, allocatable, allocated, free}]
    gpus: list                # merged per-GPU view
    physical_gpus: int
    replicas_now: int
    mig_capable: bool
    mig_enabled: bool
    model: object = None      # catalog.GpuModel, None when not in the catalog


def _merge_gpus(facts, summaries):
    gpus = {}
    for fact in facts or []:
        gpus[fact.index] = {
            "index": fact.index, "name": fact.name, "memory_total_mib": fact.memory_total_mib,
            "memory_used_mib": fact.memory_used_mib, "memory_peak_mib": fact.memory_used_mib,
            "processes": fact.process_count, "sm_mean": None, "sm_p95": None, "pattern": None,
            "samples": 0, "mig_capable": fact.mig_capable, "mig_enabled": fact.mig_enabled,
        }
    for summary in summaries or []:
        gpu = gpus.setdefault(summary["index"], {
            "index": summary["index"], "name": summary["name"], "memory_total_mib": summary["memory_total_mib"],
            "memory_used_mib": summary["memory_used_mean_mib"], "memory_peak_mib": None, "processes": None,
            "mig_capable": None, "mig_enabled": False,
        })
        gpu.update(sm_mean=summary["sm_mean"], sm_p95=summary["sm_p95"], pattern=summary["pattern"],
                   samples=summary["samples"])
        if not gpu.get("name"):
            gpu["name"] = summary["name"]
        if not gpu.get("memory_total_mib"):
            gpu["memory_total_mib"] = summary["memory_total_mib"]
        peaks = [v for v in (gpu.get("memory_peak_mib"), summary["memory_used_max_mib"]) if v is not None]
        gpu["memory_peak_mib"] = max(peaks) if peaks else None
    return [gpus[index] for index in sorted(gpus)]


def _node_state(node, pods_on_node, facts, samples):
    resources = []
    for name in sorted(set(node.allocatable) | set(node.capacity)):
        allocatable = node.allocatable.get(name, 0)
        allocated = sum(pod.requests.get(name, 0) for pod in pods_on_node)
        resources.append({"name": name, "capacity": node.capacity.get(name, allocatable),
                          "allocatable": allocatable, "allocated": allocated,
                          "free": max(allocatable - allocated, 0)})
    gpus = _merge_gpus(facts, summarise_utilization(samples) if samples else None)
    physical = len(gpus)
    if not physical and node.labels.get("nvidia.com/gpu.count", "").isdigit():
        physical = int(node.labels["nvidia.com/gpu.count"])
    whole = node.capacity.get("nvidia.com/gpu") or node.capacity.get("nvidia.com/gpu.shared") or 0
    if not physical:
        physical = whole
    replicas_now = whole // physical if (physical and whole and whole % physical == 0) else 1
    mig_enabled = any(r["name"].startswith("nvidia.com/mig-") for r in resources) or \
        any(g.get("mig_enabled") for g in gpus)
    model = gpu_model([g.get("name") for g in gpus] + [node.labels.get("nvidia.com/gpu.product")])
    capable_values = [g.get("mig_capable") for g in gpus if g.get("mig_capable") is not None]
    if model is not None:
        mig_capable = model.mig_capable
    elif capable_values:
        mig_capable = all(capable_values)
    elif node.labels.get("nvidia.com/mig.capable") in ("true", "false"):
        mig_capable = node.labels["nvidia.com/mig.capable"] == "true"
    else:
        mig_capable = None
    return _NodeState(node=node, pods=pods_on_node, resources=resources, gpus=gpus, physical_gpus=physical,
                      replicas_now=max(replicas_now, 1), mig_capable=bool(mig_capable or mig_enabled),
                      mig_enabled=mig_enabled, model=model)


def _sizing(state, max_replicas):
    """How many copies of today's work each GPU could hold; the limiting factor says why not more."""
    memory_copies, sm_copies = [], []
    for gpu in state.gpus:
        total, peak = gpu.get("memory_total_mib"), gpu.get("memory_peak_mib")
        if total and peak:
            per_pod = peak / state.replicas_now
            memory_copies.append((math.floor(MEMORY_USABLE_FRACTION * total / per_pod), gpu))
        if gpu.get("sm_mean") is not None and gpu["sm_mean"] > 0:
            per_pod = gpu["sm_mean"] / state.replicas_now
            sm_copies.append((math.floor(SM_TARGET_PERCENT / per_pod), gpu))
    have_memory = any(g.get("memory_total_mib") and g.get("memory_peak_mib") is not None for g in state.gpus)
    by_memory = min((c for c, _ in memory_copies), default=None)
    by_sm = min((c for c, _ in sm_copies), default=None)
    limits = []
    if by_memory is not None:
        limits.append(("memory", by_memory))
    elif not have_memory:
        # Without memory figures, only the smallest step is a safe suggestion. (Known and
        # zero everywhere means no memory limit at all.)
        limits.append(("unknown-memory", max(2, state.replicas_now)))
    if by_sm is not None:
        limits.append(("sm", by_sm))
    limits.append(("max-replicas", max_replicas))
    # min() keeps the first of equal values: a tie is explained by the measured limit.
    limit_name, replicas = min(limits, key=lambda item: item[1])
    return {"replicas": replicas, "limited_by": limit_name, "by_memory": by_memory, "by_sm": by_sm,
            "have_memory": have_memory, "have_sm": any(g.get("sm_mean") is not None for g in state.gpus)}


def _span(values, fmt):
    low, high = min(values), max(values)
    return fmt(low) if fmt(low) == fmt(high) else "%s-%s" % (fmt(low), fmt(high))


def _gpu_evidence(state):
    """One line for all GPUs of a node; the per-GPU figures stay in the report's `gpus`."""
    if not state.gpus:
        return []
    names = sorted({g.get("name") or "GPU" for g in state.gpus})
    parts = []
    with_memory = [g for g in state.gpus if g.get("memory_peak_mib") is not None and g.get("memory_total_mib")]
    if with_memory:
        parts.append("memory peak %s of %s GiB" % (_span([g["memory_peak_mib"] for g in with_memory], _fmt_gib),
                                                   _span([g["memory_total_mib"] for g in with_memory], _fmt_gib)))
    with_sm = [g for g in state.gpus if g.get("sm_mean") is not None]
    if with_sm:
        patterns = {}
        for gpu in with_sm:
            patterns[gpu["pattern"]] = patterns.get(gpu["pattern"], 0) + 1
        parts.append("SM mean %s%%, p95 %s%% over %d samples (%s)" % (
            _span([g["sm_mean"] for g in with_sm], lambda v: "%.0f" % v),
            _span([g["sm_p95"] for g in with_sm], lambda v: "%.0f" % v),
            min(g["samples"] for g in with_sm),
            ", ".join("%s x%d" % (name, count) for name, count in sorted(patterns.items()))))
    return ["%d x %s: %s" % (len(state.gpus), "/".join(names), "; ".join(parts) or "no figures")]


def _node_sm_mean(state):
    values = [g["sm_mean"] for g in state.gpus if g.get("sm_mean") is not None]
    return round(sum(values) / len(values), 1) if values else None


def _node_memory_peak(state):
    known = [g for g in state.gpus if g.get("memory_peak_mib") is not None and g.get("memory_total_mib")]
    if not known:
        return None
    tightest = max(known, key=lambda g: g["memory_peak_mib"] / g["memory_total_mib"])
    return {"used_mib": tightest["memory_peak_mib"], "total_mib": tightest["memory_total_mib"],
            "gpu": tightest["index"]}


def _shareable_resources(state):
    return [r for r in state.resources if r["allocatable"] > 0]


def _allocation_remedy(state, sizing):
    replicas = sizing["replicas"]
    shareable = _shareable_resources(state)
    if state.replicas_now > 1:
        # Already time-sliced: the new replica count replaces the old one.
        added = sum(r["allocatable"] * replicas // state.replicas_now - r["allocatable"] for r in shareable)
    else:
        added = sum(r["allocatable"] * (replicas - 1) for r in shareable)
    resource_names = ", ".join(r["name"] for r in shareable)
    summary = "time-slicing %d would add %s of %s" % (replicas, _slots(added), resource_names)
    if state.mig_enabled:
        # Each MIG device is advertised `replicas` times; the MIG layout stays as it is.
        sharing = {"strategy": "mig", "time_slicing_replicas": replicas}
        inventory = "add `time_slicing_replicas: %d` to this node's gpuprov_sharing (strategy mig)" % replicas
    else:
        sharing = {"strategy": "time-slicing", "replicas": replicas}
        inventory = sharing_line(sharing)
    why = {"memory": "as many copies of today's per-GPU memory use as fit in %d%% of the memory"
                     % round(MEMORY_USABLE_FRACTION * 100),
           "sm": "as many copies as keep the mean SM use under %d%%" % SM_TARGET_PERCENT,
           "max-replicas": "capped by --max-replicas",
           "unknown-memory": ""}[sizing["limited_by"]]
    remedy = _remedy(summary, sharing=sharing, inventory=inventory, added_slots=added, sizing=why)
    if not sizing["have_memory"]:
        remedy["sizing"] = ("memory use unknown (no facts or utilisation for this node): %d is a guess; run "
                            "`gpuprov baseline` or add facts/%s.json before raising it" % (replicas, state.node.name))
    if state.mig_enabled:
        remedy["summary"] += " (time-slicing each MIG device)"
    mig = _mig_alternative(state)
    if mig:
        remedy["alternatives"].append(mig)
    return remedy


def _mig_alternative(state):
    """MIG instead of time-slicing: isolated memory, when today's per-GPU use fits an instance."""
    if state.mig_enabled or not state.mig_capable or not state.gpus:
        return None
    if any(g.get("memory_peak_mib") is None for g in state.gpus):
        return None
    need = max(g["memory_peak_mib"] for g in state.gpus) / state.replicas_now
    profile = mig_option(state.model, need)
    if profile is None or profile.max_count < 2:
        return None
    whole = state.node.allocatable.get("nvidia.com/gpu", state.physical_gpus)
    added = state.physical_gpus * profile.max_count - whole
    sharing = mig_sharing(profile.name, profile.max_count)
    return {"summary": "MIG %s x%d per GPU holds today's use too (%s GiB each, memory and SMs isolated) and "
                       "would add %s; pods then request %s" % (profile.name, profile.max_count,
                                                              _fmt_gib(profile.memory_gib * MIB_PER_GIB),
                                                              _slots(added), profile.resource_name),
            "sharing": sharing, "inventory": sharing_line(sharing), "added_slots": added}


def _memory_remedy(state):
    alternatives = []
    model = state.model
    if state.mig_capable and not state.mig_enabled:
        profile = mig_cap_option(model)
        if profile is not None:
            sharing = mig_sharing(profile.name, profile.max_count)
            alternatives.append({
                "summary": "if the pods need less memory than they hold (TensorFlow and JAX preallocate most of "
                           "it), MIG %s x%d caps each at %s GiB" % (profile.name, profile.max_count,
                                                                    _fmt_gib(profile.memory_gib * MIB_PER_GIB)),
                "sharing": sharing, "inventory": sharing_line(sharing),
                "added_slots": state.physical_gpus * (profile.max_count - 1)})
    total = max((g.get("memory_total_mib") or 0 for g in state.gpus), default=0)
    # MPS needs Volta or newer and does not run on MIG devices.
    mps_ok = not state.mig_enabled and (model is None or float(model.compute_capability) >= 7.0)
    if total and mps_ok:
        sharing = {"strategy": "mps", "replicas": 2}
        alternatives.append({
            "summary": "%sMPS with 2 clients per GPU: the device plugin limits each to %s GiB of device memory"
                       % ("or " if alternatives else "if the pods need less memory than they hold, ",
                          _fmt_gib(total / 2)),
            "sharing": sharing, "inventory": sharing_line(sharing), "added_slots": state.physical_gpus})
    summary = "time-slicing will not help: a second copy of today's work does not fit in GPU memory"
    if alternatives:
        summary += "; MIG or MPS memory limits might (if the pods need less than they hold), otherwise only " \
                   "more GPUs help"
    else:
        summary += "; only more GPUs (or smaller models) help"
    return _remedy(summary, alternatives=alternatives)


def _application_note(state):
    cycling = [g for g in state.gpus if g.get("pattern") == "cycling"]
    low = [g for g in state.gpus if g.get("pattern") == "low"]
    lines = []
    if cycling:
        lines.append("GPU %s: SM activity cycles between idle and busy: the pods wait on their CPU-side "
                     "input pipeline (data loading, preprocessing)" % ",".join(str(g["index"]) for g in cycling))
    if low:
        lines.append("GPU %s: memory held but SM activity stays under %d%%: the pods wait on something else "
                     "(I/O, the network, a person at a notebook)" % (",".join(str(g["index"]) for g in low),
                                                                      SM_LOW_PERCENT))
    return cycling, low, lines


def _analyse_node(state, placement_victims, max_replicas):
    node = state.node
    result = {
        "name": node.name, "check": None, "status": None, "summary": "", "evidence": [], "remedy": None,
        "not_run": [], "resources": state.resources, "gpus": state.gpus,
        "physical_gpus": state.physical_gpus, "replicas_now": state.replicas_now,
        "sm_mean": _node_sm_mean(state), "memory_peak": _node_memory_peak(state),
        "gpu_pods": sorted(p.key for p in state.pods if p.requests),
    }
    if not state.gpus:
        result["not_run"].append({"check": "memory", "reason": "no facts/%s.json and no utilization data for "
                                                               "this node" % node.name})
    if not any(g.get("sm_mean") is not None for g in state.gpus):
        result["not_run"].append({"check": "application", "reason": "no utilization data for this node; record it "
                                                                    "with `gpuprov baseline --out DIR`"})
    shareable = _shareable_resources(state)
    if not shareable:
        result["summary"] = "advertises no GPUs (capacity %s, allocatable 0): the device plugin is not running " \
                            "or reports the GPUs unhealthy" % (", ".join("%s %d" % (r["name"], r["capacity"])
                                                                         for r in state.resources) or "none")
        result["status"] = "unavailable"
        return result
    fully = all(r["allocated"] >= r["allocatable"] for r in shareable)
    if not fully:
        result["evidence"].append(", ".join("%d/%d %s allocated" % (r["allocated"], r["allocatable"], r["name"])
                                            for r in shareable))
    if node.unschedulable:
        result["evidence"].append("node is cordoned")
    result["evidence"].extend(_gpu_evidence(state))
    cycling, low, app_lines = _application_note(state)

    if fully:
        sizing = _sizing(state, max_replicas)
        result["sizing"] = sizing
        memory = _node_memory_peak(state)
        memory_text = (", memory peak %s of %s GiB (GPU %d)" % (_fmt_gib(memory["used_mib"]),
                                                                 _fmt_gib(memory["total_mib"]), memory["gpu"])
                       if memory else ", memory unknown")
        sm_text = ", mean SM %.0f%%" % result["sm_mean"] if result["sm_mean"] is not None else ""
        counts = ", ".join("%d/%d %s" % (r["allocated"], r["allocatable"], r["name"]) for r in shareable)
        if sizing["by_memory"] is not None and sizing["by_memory"] <= state.replicas_now:
            result.update(check="memory", status="memory-bound",
                          summary="%s allocated%s%s" % (counts, sm_text, memory_text))
            result["remedy"] = _memory_remedy(state)
            result["evidence"].extend(app_lines)
            return result
        if sizing["replicas"] <= state.replicas_now:
            # Allocation explains the queue, but sharing more would not help: say what would.
            if sizing["limited_by"] == "sm":
                status, text = "busy", "GPUs are busy: sharing would slow every pod; only more GPUs help"
            elif sizing["limited_by"] == "unknown-memory":
                status, text = "needs-data", ("already time-sliced %d ways and memory use is unknown: add "
                                              "facts/%s.json or run `gpuprov baseline` before adding replicas"
                                              % (state.replicas_now, node.name))
            else:
                status, text = "at-limit", ("already time-sliced %d ways, the --max-replicas limit; only more "
                                            "GPUs help" % state.replicas_now)
            result.update(check="allocation", status=status,
                          summary="%s allocated%s%s" % (counts, sm_text, memory_text))
            result["remedy"] = _remedy(text)
            result["evidence"].extend(app_lines)
            return result
        result.update(check="allocation", status="sharing-helps",
                      summary="%s allocated%s%s" % (counts, sm_text, memory_text))
        result["remedy"] = _allocation_remedy(state, sizing)
        result["evidence"].extend(app_lines)
        return result

    victims = placement_victims.get(node.name) or []
    if victims:
        by_reason = {}
        for pod_key, detail in victims:
            by_reason.setdefault(detail, []).append(pod_key)
        free = ", ".join("%d %s" % (r["free"], r["name"]) for r in shareable if r["free"])
        result.update(check="placement", status="unreachable",
                      summary="%s free, but %d Pending pod(s) may not use them" % (free, len(victims)))
        # The per-pod lines below say it again, with the pods.
        result["evidence"] = [line for line in result["evidence"] if line != "node is cordoned"]
        for detail, pod_keys in sorted(by_reason.items()):
            result["evidence"].append("%s: %s" % (detail, ", ".join(sorted(pod_keys))))
        result["remedy"] = _placement_remedy_for_node(node, by_reason)
        return result

    if cycling or low:
        result.update(check="application", status="app-bound",
                      summary="pods hold GPUs they keep idle; more GPUs will not help")
        result["evidence"].extend(app_lines)
        result["evidence"].append("GPU pods on the node: %s" % ", ".join(result["gpu_pods"]))
        actions = []
        if cycling:
            actions.append("CPU-bound pods: give them more CPU and data-loader workers (e.g. PyTorch "
                           "DataLoader num_workers, pinned memory), cache decoded inputs")
        if low:
            actions.append("I/O- or network-bound pods: stage data on local disk, raise read-ahead or "
                           "prefetch, check the storage/network path")
        result["remedy"] = _remedy("; ".join(actions))
        return result

    free = sum(r["free"] for r in shareable)
    allocated = sum(r["allocated"] for r in shareable)
    if allocated == 0:
        result.update(status="idle", summary="idle: no pod uses its GPUs and no Pending pod is kept off it")
    else:
        result.update(status="ok", summary="%d free, no Pending pod is kept off it" % free)
    return result


def _placement_remedy_for_node(node, by_reason):
    commands, actions = [], []
    for detail in by_reason:
        if detail.startswith("untolerated taint "):
            taint = detail[len("untolerated taint "):]
            key_value, effect = taint.rsplit(":", 1)
            key, _, value = key_value.partition("=")
            toleration = {"key": key, "operator": "Equal", "value": value, "effect": effect} if value else \
                {"key": key, "operator": "Exists", "effect": effect}
            actions.append("add the toleration %s to the pods meant for this node, or remove the taint"
                           % json.dumps(toleration, separators=(", ", ": ")))
            commands.append("kubectl taint nodes %s %s-" % (node.name, taint))
        elif detail.startswith("node is cordoned"):
            actions.append("uncordon the node once its maintenance is done")
            commands.append("kubectl uncordon %s" % node.name)
        elif detail.startswith("node lacks nodeSelector label"):
            actions.append("%s: label the node if it should take these pods, or relax the pods' nodeSelector"
                           % detail)
        elif detail.startswith("node does not match"):
            actions.append("relax the pods' required node affinity, or label the node to match it")
        elif detail == "node is NotReady":
            actions.append("bring the node back to Ready (kubelet, network, container runtime)")
    return _remedy("; ".join(sorted(set(actions))), commands=sorted(set(commands)))


def _has_room(state, requests):
    """Whether the node has `requests` free now (allocatable less what its pods request)."""
    return all(state.node.allocatable.get(name, 0) - sum(p.requests.get(name, 0) for p in state.pods) >= count
               for name, count in requests.items())


def _latest_events(events):
    latest = {}
    for event in events:
        key = "%s/%s" % (event.namespace, event.pod)
        if key not in latest or event.time >= latest[key].time:
            latest[key] = event
    return latest


def _remedy(summary, sharing=None, inventory=None, added_slots=0, sizing=None, alternatives=None, commands=None):
    """A report remedy: what to do, and when it is a gpuprov setting, the inventory line."""
    return {"summary": summary, "sharing": sharing, "inventory": inventory, "added_slots": added_slots,
            "sizing": sizing, "alternatives": list(alternatives or []), "commands": list(commands or [])}


def _slots(count):
    return "%d slot%s" % (count, "" if count == 1 else "s")


def _format_requests(requests):
    return ", ".join("%d %s" % (v, k) for k, v in sorted(requests.items()))


def _analyse_pod(pod, states, node_results, event):
    result = {"namespace": pod.namespace, "name": pod.name, "requests": dict(pod.requests), "check": None,
              "status": None,
              "summary": "", "evidence": [], "remedy": None, "nodes": [], "scheduler": None}
    if event:
        result["scheduler"] = {"message": event.message, "time": event.time, "count": event.count,
                               "reasons": parse_scheduler_message(event.message)}
        result["evidence"].append("scheduler: %s" % event.message)
    if pod.scheduling_gates:
        result["summary"] = "waits on scheduling gates %s, not on GPUs" % ", ".join(pod.scheduling_gates)
        result["status"] = "gated"
        return result

    offering = {name: [s for s in states if s.node.allocatable.get(name, 0) > 0] for name in pod.requests}
    capable = [s for s in states if all(s.node.allocatable.get(n, 0) >= v for n, v in pod.requests.items())]
    if not capable:
        result["check"] = "placement"
        result["status"] = "too-large"
        lines = []
        for name, value in sorted(pod.requests.items()):
            nodes = offering[name]
            if not nodes:
                lines.append("no node advertises %s" % name)
            else:
                biggest = max(nodes, key=lambda s: s.node.allocatable[name])
                if biggest.node.allocatable[name] < value:
                    lines.append("requests %d %s; the largest node offers %d (%s)"
                                 % (value, name, biggest.node.allocatable[name], biggest.node.name))
        if not lines:
            lines.append("no single node offers all of %s" % _format_requests(pod.requests))
        if all(line.startswith("no node advertises") for line in lines):
            result["status"] = "not-offered"
        result["summary"] = "; ".join(lines)
        actions = []
        if any(line.startswith("no node advertises nvidia.com/mig-") for line in lines):
            actions.append("configure that MIG profile on some nodes (gpuprov_sharing with strategy mig; "
                           "`gpuprov catalog` lists the profiles), or request nvidia.com/gpu")
        if any(line.startswith("requests ") for line in lines):
            actions.append("lower the request to what one node offers, or split the job across pods "
                           "(multi-node training: torchrun/MPI with one pod per node)")
        result["remedy"] = _remedy("; ".join(actions) or "request a combination one node offers")
        return result

    blocked, feasible = {}, []
    for state in capable:
        blockers = placement_blockers(pod, state.node)
        if blockers:
            blocked[state.node.name] = blockers
        else:
            feasible.append(state)

    def has_room(state):
        return _has_room(state, pod.requests)

    if not feasible:
        result["check"] = "placement"
        # Nodes the pod itself asks for (selector and affinity match) but that are closed to it.
        selected = {name: blockers for name, blockers in blocked.items()
                    if all(category in NODE_STATE_BLOCKERS for category, _ in blockers)}
        if not selected:
            lacks = sorted({category for blockers in blocked.values() for category, _ in blockers
                            if category in ("selector", "affinity")})
            result["status"] = "affinity" if lacks == ["affinity"] else "selector"
            asked = []
            if "selector" in lacks:
                asked.append("nodeSelector %s" % ", ".join("%s=%s" % kv for kv in sorted(pod.node_selector.items())))
            if "affinity" in lacks:
                asked.append("required node affinity (%s)" % _describe_affinity(pod.node_affinity_terms))
            result["summary"] = "no node with enough GPUs matches its %s" % " and ".join(asked)
            result["nodes"] = sorted(blocked)
            result["remedy"] = _pod_placement_remedy(pod, blocked, states, only=("selector", "affinity"))
            return result
        grouped = {}
        for node_name, blockers in selected.items():
            for category, detail in blockers:
                grouped.setdefault(detail, []).append(node_name)
        categories = sorted({category for blockers in selected.values() for category, _ in blockers})
        result["status"] = categories[0] if len(categories) == 1 else "+".join(categories)
        result["summary"] = "the node(s) it selects are closed to it: " + "; ".join(
            "%s (%s)" % (detail, ", ".join(sorted(nodes))) for detail, nodes in sorted(grouped.items()))
        result["nodes"] = sorted(selected)
        result["remedy"] = _pod_placement_remedy(pod, selected, states)
        return result

    full = [s for s in feasible if not has_room(s)]
    if len(full) == len(feasible):
        verdicts = {s.node.name: node_results[s.node.name] for s in full}
        result["nodes"] = sorted(verdicts)
        helping = [r for r in verdicts.values() if r.get("remedy") and r["remedy"].get("sharing")]
        memory_bound = [r for r in verdicts.values() if r.get("check") == "memory"]
        # Free nodes the pod selects but that are closed to it (taint, cordon, NotReady).
        free_elsewhere = sorted(name for name, blockers in blocked.items()
                                if all(category in NODE_STATE_BLOCKERS for category, _ in blockers)
                                and has_room(next(s for s in states if s.node.name == name)))
        result["evidence"].append("%d node(s) may take it and none has %s free: %s"
                                  % (len(full), _format_requests(pod.requests), ", ".join(sorted(verdicts))))
        if free_elsewhere:
            result["evidence"].append("GPUs are free on %s, which it selects but may not use (%s)"
                                      % (", ".join(free_elsewhere),
                                         "; ".join(sorted({d for n in free_elsewhere for _, d in blocked[n]}))))
        if memory_bound and len(memory_bound) == len(verdicts):
            result["check"] = "memory"
            result["status"] = "memory-bound"
            result["summary"] = "the nodes it may use are fully allocated and their GPU memory is full: " \
                                "time-slicing will not help"
            result["remedy"] = _remedy("see node(s) %s: MIG or MPS with memory limits might help, otherwise "
                                       "add GPUs" % ", ".join(sorted(verdicts)))
            return result
        result["check"] = "allocation"
        result["status"] = "allocation-bound"
        result["summary"] = "all %s on the %d node(s) it may use are allocated" % (
            ", ".join(sorted(pod.requests)), len(verdicts))
        if helping:
            slots = sum(r["remedy"]["added_slots"] for r in helping)
            parts = ["%s on %s" % (r["remedy"]["inventory"], r["name"]) for r in helping]
            result["remedy"] = _remedy("sharing adds %s: %s" % (_slots(slots), "; ".join(parts)),
                                       added_slots=slots)
            others = [r for r in verdicts.values() if r not in helping]
            if others:
                result["remedy"]["summary"] += " (not on %s: %s)" % (
                    ", ".join(r["name"] for r in others), "; ".join(sorted({r.get("status", "") for r in others})))
        else:
            result["remedy"] = _remedy("no node it may use has room for sharing (%s): add GPUs"
                                       % "; ".join("%s %s" % (r["name"], r.get("status", ""))
                                                   for r in verdicts.values()))
        if free_elsewhere:
            result["remedy"]["summary"] += "; or open %s to it (see that node)" % ", ".join(free_elsewhere)
        return result

    # A node it may use has room: the reason lies outside GPUs and node rules.
    roomy = sorted(s.node.name for s in feasible if has_room(s))
    result["nodes"] = roomy
    reasons = result["scheduler"]["reasons"] if result["scheduler"] else []
    other = [r for r in reasons if r["category"] not in ("taint", "selector", "cordoned", "not-ready")
             and not (r["category"] == "insufficient" and is_gpu_resource(r["detail"]))]
    if other:
        result["check"] = "placement"
        result["status"] = "other-constraint"
        result["summary"] = "GPUs are free on %s, but the scheduler rejects it there: %s" % (
            ", ".join(roomy), ", ".join("%d %s" % (r["count"], r["reason"]) for r in other))
        actions = []
        if any(r["category"] == "insufficient" for r in other):
            actions.append("lower the pod's CPU/memory requests or free them on the GPU nodes; no single node "
                           "satisfies every request at once")
        if any(r["category"] in ("pod-affinity", "topology-spread") for r in other):
            actions.append("relax the pod (anti-)affinity or topology spread constraints")
        if any(r["category"] == "volume" for r in other):
            actions.append("check the pod's volumes: their zone or binding rules exclude the GPU nodes")
        result["remedy"] = _remedy("; ".join(actions) or "see the scheduler message")
        return result
    result["status"] = "unexplained"
    result["summary"] = "GPUs are free on %s and the pod may use them: the snapshot is older than the last " \
                        "scheduling attempt, or its scheduler (%s) is not running" % (", ".join(roomy),
                                                                                     pod.scheduler_name)
    return result


def _pod_placement_remedy(pod, blocked, states, only=None):
    commands, actions = set(), set()
    for node_name, blockers in blocked.items():
        for category, detail in blockers:
            if only and category not in only:
                continue
            if category == "taint":
                taint = detail[len("untolerated taint "):]
                actions.add("tolerate %s in the pod spec, or remove the taint" % taint)
                commands.add("kubectl taint nodes %s %s-" % (node_name, taint))
            elif category == "cordoned":
                actions.add("uncordon the cordoned node(s)")
                commands.add("kubectl uncordon %s" % node_name)
            elif category == "selector":
                actions.add("the nodes with enough GPUs lack the pod's nodeSelector %s; fix the selector or "
                            "label the nodes" % ", ".join("%s=%s" % kv for kv in sorted(pod.node_selector.items())))
            elif category == "affinity":
                actions.add("the nodes with enough GPUs do not match the pod's required node affinity; relax it "
                            "or label the nodes")
            elif category == "not-ready":
                actions.add("bring NotReady node(s) back")
    return _remedy("; ".join(sorted(actions)), commands=sorted(commands))


def diagnose(snapshot, max_replicas=DEFAULT_MAX_REPLICAS):
    """Run the checks over a Snapshot and return the report (see docs/diagnose.md)."""
    if max_replicas < 2:
        raise ValueError("max_replicas must be at least 2 (time-slicing needs 2 replicas or more)")
    live_pods = [p for p in snapshot.pods if p.phase not in _TERMINATED_PHASES]
    bound = {}
    for pod in live_pods:
        if pod.node_name:
            bound.setdefault(pod.node_name, []).append(pod)
    gpu_nodes = [n for n in snapshot.nodes if n.is_gpu_node]
    states = [_node_state(n, bound.get(n.name, []), snapshot.facts.get(n.name), snapshot.utilization.get(n.name))
              for n in gpu_nodes]
    pending = sorted((p for p in live_pods if p.is_pending and p.requests), key=lambda p: p.key)

    # Which free nodes turn Pending pods away, and why: the node side of check 3. A node
    # counts when it would take the pod but for its own state (taints, cordon, NotReady);
    # a selector or affinity mismatch counts only for pods no node may take at all, since
    # a pod that selects other nodes on purpose says nothing about this one.
    placement_victims = {}
    for pod in pending:
        blockers_by_node = {s.node.name: placement_blockers(pod, s.node) for s in states}
        any_feasible = any(
            not blockers_by_node[s.node.name] and
            all(s.node.allocatable.get(n, 0) >= v for n, v in pod.requests.items()) for s in states)
        for state in states:
            blockers = blockers_by_node[state.node.name]
            if not blockers or not _has_room(state, pod.requests):
                continue
            if any_feasible and not all(category in NODE_STATE_BLOCKERS for category, _ in blockers):
                continue
            for _category, detail in blockers:
                placement_victims.setdefault(state.node.name, []).append((pod.key, detail))

    node_results = {}
    for state in states:
        node_results[state.node.name] = _analyse_node(state, placement_victims, max_replicas)
    latest = _latest_events(snapshot.events)
    pod_results = [_analyse_pod(pod, states, node_results, latest.get(pod.key)) for pod in pending]

    not_run = []
    missing_memory = [r["name"] for r in node_results.values() if any(n["check"] == "memory" for n in r["not_run"])]
    if missing_memory:
        not_run.append({"check": "memory", "nodes": missing_memory,
                        "reason": "no facts/<node>.json and no utilization data"})
    missing_sm = [r["name"] for r in node_results.values()
                  if any(n["check"] == "application" for n in r["not_run"])]
    if missing_sm:
        not_run.append({"check": "application", "nodes": missing_sm,
                        "reason": "no utilization data (utilization/<node>.csv); record it with "
                                  "`gpuprov baseline --out DIR`"})
    without_event = [p["namespace"] + "/" + p["name"] for p in pod_results if not p["scheduler"]]
    if without_event:
        not_run.append({"check": "placement", "pods": without_event,
                        "reason": "no FailedScheduling event (events expire after an hour by default): judged "
                                  "from the pod spec, node labels and taints only"})

    by_check = {name: 0 for name in CHECKS}
    for item in list(node_results.values()) + pod_results:
        if item["check"]:
            by_check[item["check"]] += 1
    summary = {
        "nodes": len(snapshot.nodes),
        "gpu_nodes": len(gpu_nodes),
        "gpus": sum(s.physical_gpus for s in states),
        "pending_gpu_pods": len(pending),
        "pending_by_check": {name: sum(1 for p in pod_results if p["check"] == name) for name in CHECKS},
        "nodes_by_check": {name: sum(1 for r in node_results.values() if r["check"] == name) for name in CHECKS},
        "slots_from_sharing": sum(r["remedy"]["added_slots"] for r in node_results.values()
                                  if r["remedy"] and r["remedy"].get("sharing") and r["check"] == "allocation"),
    }
    summary["pending_unexplained"] = sum(1 for p in pod_results if p["check"] is None)
    return {
        "schema": SCHEMA,
        "source": snapshot.source,
        "summary": summary,
        "not_run": not_run,
        "notes": list(snapshot.notes),
        "nodes": [node_results[s.node.name] for s in states],
        "pods": pod_results,
        "thresholds": {
            "memory_usable_fraction": MEMORY_USABLE_FRACTION,
            "sm_target_percent": SM_TARGET_PERCENT,
            "max_replicas": max_replicas,
            "mig_memory_margin": MIG_MEMORY_MARGIN,
        },
    }
