"""ResourceSlices, ResourceClaims and a pod's claims (resource.k8s.io/v1), validated into the snapshot model.

Field names and rules are those of k8s.io/api v0.37.2 resource/v1 types.go: a slice belongs to
the pool ``spec.pool.name`` of its driver, and only slices of the newest ``pool.generation``
count (older ones are being replaced); an attribute has exactly one of ``string``, ``int``,
``bool``, ``version``; its name may carry a domain (``gpu.nvidia.com/productName``), which is
the driver's own when omitted. A claim's allocation lists ``(request, driver, pool, device)``
per device and is bound to a node by ``allocation.nodeSelector`` (a ``metadata.name`` field
match for node-local devices). A pod names its claims in ``spec.resourceClaims`` (a claim, or
a template whose generated claim ``status.resourceClaimStatuses`` names).
"""

from ansible_collections.gpuprov.gpu.plugins.module_utils.quantities import k8s_quantity
from gpuprov.diagnose.snapshot import DraClaim, DraDevice, DraRequest, SnapshotError

MIB = 1024 * 1024
_VALUE_KEYS = ("string", "int", "bool", "version")


def _items(doc, source, item_kind, hint):
    # Imported here: kubernetes_objects imports this module for pod claims.
    from gpuprov.diagnose.kubernetes_objects import _list_items

    return _list_items(doc, source, item_kind, hint)


def _where(source, item, index):
    meta = item.get("metadata") or {}
    name = "%s/%s" % (meta["namespace"], meta["name"]) if meta.get("namespace") else meta.get("name")
    return "%s: items[%d] (%s)" % (source, index, name)


def _attribute(value):
    if not isinstance(value, dict):
        return None
    present = [k for k in _VALUE_KEYS if k in value]
    return value[present[0]] if len(present) == 1 else None


def _count(value):
    """A JSON whole number >= 0 (not a bool, which Python counts as an int)."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _memory_mib(text):
    try:
        value = k8s_quantity(str(text).strip())
    except ValueError:
        return None
    return None if value is None or value < 0 else float(value) / MIB


def parse_resource_slices(doc, source="resourceslices.json"):
    """([DraDevice] of the newest generation of every pool, notes)."""
    hint = "export it with `kubectl get resourceslices -o json > %s`" % source
    items = _items(doc, source, "ResourceSlice", hint)
    problems, slices = [], []
    for index, item in enumerate(items):
        where = _where(source, item, index)
        spec = item.get("spec")
        if not isinstance(spec, dict) or not isinstance(spec.get("driver"), str) or not spec.get("driver"):
            problems.append("%s: spec.driver: missing; %s" % (where, hint))
            continue
        pool = spec.get("pool")
        if (not isinstance(pool, dict) or not isinstance(pool.get("name"), str)
                or not _count(pool.get("generation")) or not _count(pool.get("resourceSliceCount"))):
            problems.append("%s: spec.pool: needs name, generation and resourceSliceCount" % where)
            continue
        devices = spec.get("devices") or []
        if not isinstance(devices, list):
            problems.append("%s: spec.devices: expected a list" % where)
            continue
        parsed = []
        for d_index, device in enumerate(devices):
            field = "%s: spec.devices[%d]" % (where, d_index)
            if not isinstance(device, dict) or not isinstance(device.get("name"), str) or not device["name"]:
                problems.append("%s.name: missing" % field)
                continue
            attributes = {}
            for name, value in (device.get("attributes") or {}).items():
                plain = _attribute(value)
                if plain is None:
                    problems.append("%s.attributes.%s: needs exactly one of string, int, bool, version" % (field, name))
                    continue
                domain, _, short = str(name).rpartition("/")
                attributes[short if domain in ("", spec["driver"]) else name] = plain
            capacity = {}
            for name, value in (device.get("capacity") or {}).items():
                text = value.get("value") if isinstance(value, dict) else None
                domain, _, short = str(name).rpartition("/")
                key = short if domain in ("", spec["driver"]) else name
                if key == "memory":
                    mib = _memory_mib(text)
                    if mib is None:
                        problems.append("%s.capacity.memory.value: %r is not a quantity" % (field, text))
                        continue
                    capacity[key] = mib
                else:
                    capacity[key] = str(text)
            parsed.append(DraDevice(node=spec.get("nodeName") or "", driver=spec["driver"], pool=pool["name"],
                                    name=device["name"], attributes=attributes, capacity=capacity))
        slices.append((spec["driver"], pool["name"], pool["generation"], pool["resourceSliceCount"], parsed))
    if problems:
        raise SnapshotError(problems)
    newest = {}
    for driver, pool, generation, _slices, _devices in slices:
        newest[(driver, pool)] = max(generation, newest.get((driver, pool), generation))
    devices, notes, seen = [], [], {}
    for driver, pool, generation, count, parsed in slices:
        if generation != newest[(driver, pool)]:
            continue
        seen[(driver, pool)] = (seen.get((driver, pool), (0, count))[0] + 1, count)
        devices.extend(parsed)
    for (driver, pool), (found, count) in sorted(seen.items()):
        if found < count:
            notes.append("%s: pool %s of driver %s: %d of %d slices; the scheduler does not use an incomplete pool"
                         % (source, pool, driver, found, count))
    return devices, notes


def _request(raw, field, problems):
    if not isinstance(raw, dict) or not isinstance(raw.get("name"), str):
        problems.append("%s.name: missing" % field)
        return None
    exactly = raw.get("exactly")
    if isinstance(exactly, dict):
        selectors = [((s.get("cel") or {}).get("expression") or "") for s in exactly.get("selectors") or []
                     if isinstance(s, dict)]
        mode = exactly.get("allocationMode") or "ExactCount"
        count = exactly.get("count", 1) if mode == "ExactCount" else 0
        if not _count(count):
            problems.append("%s.exactly.count: %r is not a device count" % (field, count))
            return None
        return DraRequest(name=raw["name"], device_class=str(exactly.get("deviceClassName") or ""), count=count,
                          selectors=selectors, mode=mode)
    alternatives = raw.get("firstAvailable")
    if isinstance(alternatives, list) and alternatives:
        classes = [str((a or {}).get("deviceClassName") or "") for a in alternatives if isinstance(a, dict)]
        return DraRequest(name=raw["name"], device_class=" or ".join(classes), count=1, mode="FirstAvailable")
    problems.append("%s: needs exactly or firstAvailable" % field)
    return None


def _bound_node(allocation):
    """The node name of an allocation's node selector (node-local devices), else ""."""
    terms = ((allocation.get("nodeSelector") or {}).get("nodeSelectorTerms") or [])
    for term in terms:
        for match in (term or {}).get("matchFields") or []:
            if match.get("key") == "metadata.name" and match.get("operator") == "In" and match.get("values"):
                return str(match["values"][0])
    return ""


def parse_resource_claims(doc, source="resourceclaims.json"):
    hint = "export it with `kubectl get resourceclaims -A -o json > %s`" % source
    items = _items(doc, source, "ResourceClaim", hint)
    problems, claims = [], []
    for index, item in enumerate(items):
        where = _where(source, item, index)
        meta = item["metadata"]
        devices = ((item.get("spec") or {}).get("devices") or {})
        if not isinstance(devices, dict):
            problems.append("%s: spec.devices: expected an object" % where)
            continue
        before = len(problems)
        requests = [_request(raw, "%s: spec.devices.requests[%d]" % (where, r_index), problems)
                    for r_index, raw in enumerate(devices.get("requests") or [])]
        sharing = []
        for config in devices.get("config") or []:
            parameters = ((config or {}).get("opaque") or {}).get("parameters") or {}
            strategy = (parameters.get("sharing") or {}).get("strategy") if isinstance(parameters, dict) else None
            if strategy:
                sharing.append(str(strategy))
        status = item.get("status") or {}
        allocation = status.get("allocation") or {}
        allocated = []
        for r_index, result in enumerate((allocation.get("devices") or {}).get("results") or []):
            if not isinstance(result, dict) or not all(isinstance(result.get(k), str) for k in ("driver", "pool",
                                                                                                   "device")):
                problems.append("%s: status.allocation.devices.results[%d]: needs driver, pool and device"
                                % (where, r_index))
                continue
            allocated.append((result["driver"], result["pool"], result["device"]))
        if len(problems) > before:
            continue
        claims.append(DraClaim(
            namespace=meta.get("namespace") or "default", name=meta["name"], requests=[r for r in requests if r],
            allocated=allocated, node=_bound_node(allocation),
            reserved_for=[str(r.get("name")) for r in status.get("reservedFor") or []
                          if isinstance(r, dict) and r.get("resource", "pods") == "pods"],
            sharing=sharing, deleting=bool(meta.get("deletionTimestamp"))))
    if problems:
        raise SnapshotError(problems)
    return claims


def pod_resource_claims(spec, status, where, problems):
    """[{name, claim, template}] of a pod's spec.resourceClaims."""
    generated = {}
    for entry in (status or {}).get("resourceClaimStatuses") or []:
        if isinstance(entry, dict) and isinstance(entry.get("name"), str):
            generated[entry["name"]] = entry.get("resourceClaimName") or ""
    claims = []
    for index, entry in enumerate(spec.get("resourceClaims") or []):
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
            problems.append("%s spec.resourceClaims[%d].name: missing" % (where, index))
            continue
        template = entry.get("resourceClaimTemplateName") or ""
        name = entry.get("resourceClaimName") or ""
        if bool(template) == bool(name):
            problems.append("%s spec.resourceClaims[%d]: needs one of resourceClaimName or resourceClaimTemplateName"
                            % (where, index))
            continue
        claims.append({"name": entry["name"], "claim": name or generated.get(entry["name"], ""), "template": template})
    return claims
