"""DRA in a snapshot: devices per node (published, allocated, free) and why a pod's claims wait.

Devices come from ResourceSlices and their use from ResourceClaims' allocations; nothing here
asks the cluster. A claim's CEL selectors are read only in the forms gpuprov writes (`gpuprov fit
-o dra`) and NVIDIA's specs use: an attribute equal to / in a list of strings, and
``memory.compareTo(quantity(...)) >= 0``. Other selectors are never guessed at: devices are
then counted by their class alone, and the report says so. The driver's classes
``gpu.nvidia.com`` and ``mig.nvidia.com`` select the driver's ``type`` attribute (plugin_utils/dra.py).
"""

import re

from ansible_collections.gpuprov.gpu.plugins.module_utils.quantities import k8s_quantity
from ansible_collections.gpuprov.gpu.plugins.plugin_utils import dra
from gpuprov.diagnose.placement import NODE_STATE_BLOCKERS, placement_blockers
from gpuprov.diagnose.remedies import make_remedy
from gpuprov.diagnose.sizing import MIB_PER_GIB

_STRING = r"""(?:'((?:[^'\\]|\\.)*)'|"((?:[^"\\]|\\.)*)")"""
_DOMAIN = r"""\[\s*(?:'([^']*)'|"([^"]*)")\s*\]"""
# ASCII and anchored with \Z: a CEL identifier is ASCII, and $ would accept a trailing newline.
_EQUALS = re.compile(r"^device\.attributes%s\.(\w+)\s*==\s*%s\Z" % (_DOMAIN, _STRING), re.ASCII)
_IN = re.compile(r"^device\.attributes%s\.(\w+)\s+in\s+\[(.*)\]\Z" % _DOMAIN, re.ASCII | re.S)
_MEMORY = re.compile(r"^device\.capacity%s\.memory\.compareTo\(quantity\(%s\)\)\s*>=\s*0\Z" % (_DOMAIN, _STRING),
                     re.ASCII)
_LIST_ITEM = re.compile(_STRING)


def _unquote(groups):
    text = next((g for g in groups if g is not None), "")
    return re.sub(r"\\(.)", r"\1", text)


def read_selector(expression):
    """A predicate over a DraDevice for the selector forms above, or None for any other."""
    text = (expression or "").strip()
    match = _EQUALS.match(text)
    if match:
        domain, name, value = match.group(1) or match.group(2), match.group(3), _unquote(match.groups()[3:5])
        return lambda device: device.driver == domain and device.attributes.get(name) == value
    match = _IN.match(text)
    if match:
        domain, name = match.group(1) or match.group(2), match.group(3)
        rest = match.group(4).strip()
        values = [_unquote(m.groups()) for m in _LIST_ITEM.finditer(rest)]
        if not values or _LIST_ITEM.sub("", rest).replace(",", "").strip():
            return None
        return lambda device: device.driver == domain and device.attributes.get(name) in values
    match = _MEMORY.match(text)
    if match:
        domain = match.group(1) or match.group(2)
        try:
            need = float(k8s_quantity(_unquote(match.groups()[2:4]))) / (1024 * 1024)
        except (TypeError, ValueError):
            return None
        return lambda device: device.driver == domain and device.capacity.get("memory", -1) >= need
    return None


def class_predicate(device_class):
    """The driver's own classes by name; None for a class gpuprov does not know."""
    device_type = dra.CLASS_TYPES.get(device_class)
    if device_type is None:
        return None
    return lambda device: device.driver == dra.DRIVER and device.attributes.get("type") == device_type


def allocated_keys(claims):
    return set(key for claim in claims for key in claim.allocated)


def device_usage(snapshot):
    """[{name, devices, allocated, free, kinds: [...]}] per node with DRA devices."""
    if snapshot.dra_devices is None:
        return []
    used = allocated_keys(snapshot.dra_claims or [])
    nodes = {}
    for device in snapshot.dra_devices:
        node = nodes.setdefault(device.node or "(not node-local)", {})
        memory = device.capacity.get("memory")
        key = (device.driver, device.kind, str(device.attributes.get("productName") or ""),
               round(memory / MIB_PER_GIB, 2) if isinstance(memory, float) else None)
        entry = node.setdefault(key, {"driver": key[0], "kind": key[1], "product": key[2], "memory_gib": key[3],
                                      "devices": 0, "allocated": 0, "free": 0})
        entry["devices"] += 1
        entry["allocated" if device.key in used else "free"] += 1
    rows = []
    for name in sorted(nodes):
        kinds = [nodes[name][key] for key in sorted(nodes[name], key=lambda k: (k[0], k[1], k[2], k[3] or 0))]
        rows.append({"name": name, "devices": sum(k["devices"] for k in kinds),
                     "allocated": sum(k["allocated"] for k in kinds), "free": sum(k["free"] for k in kinds),
                     "kinds": kinds})
    return rows


def describe_request(request):
    parts = ["%s %s" % (request.count or "all", request.device_class)]
    for selector in request.selectors:
        match = _EQUALS.match(selector.strip()) or _IN.match(selector.strip())
        memory = _MEMORY.match(selector.strip())
        if match and match.group(3) in ("profile", "productName"):
            values = [_unquote(m.groups()) for m in _LIST_ITEM.finditer(selector.split(".%s" % match.group(3), 1)[1])]
            parts.append("%s %s" % (match.group(3), " or ".join(values)))
        elif memory:
            parts.append("memory >= %s" % _unquote(memory.groups()[2:4]))
        else:
            parts.append("selector %r" % selector)
    return ", ".join(parts)


def _claim_summary(claim, entry):
    return {"name": entry["name"], "claim": claim.name if claim else entry["claim"], "template": entry["template"],
            "allocated": bool(claim and claim.allocated), "node": claim.node if claim else "",
            "devices": ["%s/%s" % (pool, device) for _driver, pool, device in (claim.allocated if claim else [])],
            "requests": [describe_request(r) for r in (claim.requests if claim else [])],
            "sharing": list(claim.sharing) if claim else []}


def analyse_dra_pod(pod, snapshot, nodes, event_result):
    """The finding for a Pending pod with ResourceClaims (same keys as pod_checks.analyse_pod)."""
    result = {"namespace": pod.namespace, "name": pod.name, "requests": dict(pod.requests), "check": None,
              "status": None, "summary": "", "evidence": [], "remedy": None, "nodes": [], "scheduler": None,
              "claims": []}
    if event_result:
        result["scheduler"] = event_result
        result["evidence"].append("scheduler: %s" % event_result["message"])
    claims = dict((c.key, c) for c in snapshot.dra_claims or [])
    entries = [(entry, claims.get("%s/%s" % (pod.namespace, entry["claim"])) if entry["claim"] else None)
               for entry in pod.claims]
    result["claims"] = [_claim_summary(claim, entry) for entry, claim in entries]
    if pod.scheduling_gates:
        result["status"] = "gated"
        result["summary"] = "waits on scheduling gates %s, not on devices" % ", ".join(pod.scheduling_gates)
        return result
    if snapshot.dra_claims is None:
        result["status"] = "dra-not-read"
        result["summary"] = ("uses ResourceClaims %s, but the snapshot has no resourceslices.json/resourceclaims.json"
                             % ", ".join(e["claim"] or e["template"] for e, _c in entries))
        result["remedy"] = make_remedy("add `kubectl get resourceslices -o json` and `kubectl get resourceclaims -A "
                                       "-o json` to the snapshot (live mode reads them itself)")
        return result
    missing = [entry for entry, claim in entries if claim is None]
    if missing:
        result["check"] = "placement"
        result["status"] = "dra-claim-missing"
        texts = []
        for entry in missing:
            if entry["template"] and not entry["claim"]:
                texts.append("the claim from template %s is not created yet" % entry["template"])
            else:
                texts.append("ResourceClaim %s does not exist" % entry["claim"])
        result["summary"] = "; ".join(texts)
        result["remedy"] = make_remedy("create the claim (apply the ResourceClaim or its ResourceClaimTemplate in "
                                       "namespace %s); claims from templates are made by kube-controller-manager's "
                                       "resource-claim controller" % pod.namespace)
        return result
    pending = [(entry, claim) for entry, claim in entries if not claim.allocated]
    reasons = (event_result or {}).get("reasons") or []
    if not pending:
        bound = sorted(set(c.node for _e, c in entries if c.node))
        result["status"] = "dra-claims-allocated"
        result["summary"] = "its claims are allocated%s; the pod waits on something else%s" % (
            " on %s" % ", ".join(bound) if bound else "",
            ": %s" % ", ".join("%d %s" % (r["count"], r["reason"]) for r in reasons) if reasons else "")
        result["nodes"] = bound
        return result
    class_missing = [r for r in reasons if r["category"] == "dra-class"]
    if class_missing:
        result["check"] = "placement"
        result["status"] = "dra-class-missing"
        result["summary"] = "device class %s does not exist" % ", ".join(sorted({r["detail"] for r in class_missing}))
        result["remedy"] = make_remedy("install the driver's DeviceClasses (its chart does; `gpuprov export dra` "
                                       "writes gpu.nvidia.com and mig.nvidia.com)")
        return result
    used = allocated_keys(snapshot.dra_claims)
    node_by_name = dict((n.name, n) for n in nodes)
    for entry, claim in pending:
        for request in claim.requests:
            finding = _request_finding(pod, claim, request, snapshot.dra_devices, used, node_by_name)
            if finding is None:
                continue
            check, status, summary, remedy, where = finding
            result.update(check=check, status=status, summary=summary, remedy=remedy, nodes=where)
            return result
    roomy = sorted(set(d.node for d in snapshot.dra_devices if d.key not in used))
    result["status"] = "unexplained"
    result["summary"] = ("devices matching its claims are free on %s: the snapshot is older than the last scheduling "
                         "attempt, or the claims compete for the same devices" % (", ".join(roomy) or "no node"))
    return result


def _request_finding(pod, claim, request, devices, used, node_by_name):
    """(check, status, summary, remedy, nodes) for the first reason this request cannot be met, else None."""
    predicates = [class_predicate(request.device_class)]
    readers = [read_selector(s) for s in request.selectors]
    unread = [s for s, reader in zip(request.selectors, readers) if reader is None]
    predicates += [r for r in readers if r is not None]
    known = predicates[0] is not None
    if not known:
        predicates = predicates[1:]
    matching = [d for d in devices if all(p(d) for p in predicates)]
    what = "claim %s request %s (%s)" % (claim.name, request.name, describe_request(request))
    caveat = ""
    if unread or not known:
        caveat = " (counted without %s gpuprov cannot read)" % " and ".join(
            (["class %s" % request.device_class] if not known else []) + (["its selectors"] if unread else []))
    need = request.count or 1
    if not matching:
        summary = "no ResourceSlice offers a device for %s%s" % (what, caveat)
        return ("placement", "dra-not-offered", summary,
                make_remedy("plan nodes with such devices (`gpuprov export dra -i INV` shows what the driver would "
                            "publish for a plan) and check that the driver's kubelet plugin runs on them"), [])
    per_node = {}
    for device in matching:
        counts = per_node.setdefault(device.node, [0, 0])
        counts[0] += 1
        if device.key not in used:
            counts[1] += 1
    open_nodes, closed = [], {}
    for name, (_total, free) in per_node.items():
        node = node_by_name.get(name)
        blockers = placement_blockers(pod, node) if node is not None else [("missing", "not in the snapshot")]
        if blockers:
            closed[name] = blockers
        elif free >= need:
            open_nodes.append(name)
    if open_nodes:
        return None
    inventory = ", ".join("%s %d/%d free" % (name, per_node[name][1], per_node[name][0]) for name in sorted(per_node))
    free_on_closed = sorted(name for name in closed if per_node[name][1] >= need)
    if free_on_closed and all(all(c in NODE_STATE_BLOCKERS or c in ("selector", "affinity") for c, _d in closed[n])
                              for n in free_on_closed):
        details = "; ".join("%s (%s)" % (n, ", ".join(d for _c, d in closed[n])) for n in free_on_closed)
        return ("placement", "dra-blocked", "devices for %s are free only on nodes closed to it: %s%s"
                % (what, details, caveat), make_remedy("open those nodes to the pod (tolerations, selector, uncordon) "
                                                       "or free devices elsewhere"), free_on_closed)
    kind = sorted(set(d.kind for d in matching))
    if need > 1 and all(total < need for name, (total, _free) in per_node.items() if name not in closed):
        return ("placement", "dra-too-large", "%s needs %d devices on one node; no node it may use has that many: %s%s"
                % (what, need, inventory, caveat),
                make_remedy("ask for fewer devices per claim, or plan a node with %d %s devices" % (need, ", ".join(kind))),
                sorted(per_node))
    return ("allocation", "dra-allocated", "every device that matches %s is allocated: %s%s" % (what, inventory, caveat),
            make_remedy("free %s or add more: delete the claims of finished work, or plan more %s devices (gpuprov "
                        "plan, then `gpuprov fit -o dra` for the new packing)" % (", ".join(kind), ", ".join(kind))),
            sorted(per_node))
