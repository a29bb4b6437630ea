"""Placement rules the scheduler applies (the subset that explains GPU pods)."""

from ansible_collections.gpuprov.gpu.plugins.module_utils.decimal_text import signed_int


# Taint effects that keep a pod off a node; PreferNoSchedule only scores it lower.
_BLOCKING_EFFECTS = ("NoSchedule", "NoExecute")
_UNSCHEDULABLE_TAINT = "node.kubernetes.io/unschedulable"
_NOT_READY_TAINTS = ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")


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
            # As the scheduler reads them: strconv.ParseInt (k8s.io/component-helpers nodeaffinity).
            left, right = signed_int(labels[key]), signed_int(values[0])
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


def describe_affinity(terms):
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
