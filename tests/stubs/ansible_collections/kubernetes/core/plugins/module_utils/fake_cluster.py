# -*- coding: utf-8 -*-
# Test stand-in: the fake cluster state the stub kubernetes.core modules share.
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import tempfile

STATE_ENV = "GPUPROV_FAKE_K8S_STATE"
LOG_ENV = "GPUPROV_FAKE_CALL_LOG"


def empty_state():
    return {"namespaces": ["default", "kube-system"], "nodes": {}, "repositories": {}, "releases": {},
            "daemonsets": {}}


def load(module):
    path = os.environ.get(STATE_ENV)
    if not path:
        module.fail_json(msg="fake cluster: %s is not set" % STATE_ENV)
    if not os.path.exists(path):
        return empty_state()
    with open(path) as handle:
        state = json.load(handle)
    for key, value in empty_state().items():
        state.setdefault(key, value)
    return state


def save(state):
    path = os.environ[STATE_ENV]
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(os.path.abspath(path)))
    with os.fdopen(fd, "w") as handle:
        json.dump(state, handle, indent=1, sort_keys=True)
    os.replace(tmp, path)


def record(module, tool):
    path = os.environ.get(LOG_ENV)
    if not path:
        return
    params = dict((k, v) for k, v in module.params.items() if v is not None)
    if "repo_password" in params:
        params["repo_password"] = "********"
    with open(path, "a") as handle:
        handle.write(json.dumps({"tool": tool, "params": params, "check_mode": module.check_mode}, sort_keys=True) + "\n")


# The options every kubernetes.core module takes for cluster access (k8s_auth_options).
AUTH_ARGS = dict(
    kubeconfig=dict(type="raw", aliases=["kubeconfig_path"]),
    context=dict(type="str", aliases=["kube_context"]),
    host=dict(type="str"),
    api_key=dict(type="str", no_log=True),
    validate_certs=dict(type="bool", aliases=["verify_ssl"]),
    ca_cert=dict(type="path", aliases=["ssl_ca_cert"]),
)


def crd_resources(state, name=None):
    """CustomResourceDefinitions installed in the fake cluster (state["crds"]: names such as
    servicemonitors.monitoring.coreos.com), as k8s_info lists them; none by default."""
    return [{"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
             "metadata": {"name": crd}} for crd in sorted(state.get("crds") or []) if name in (None, crd)]


# --- pods of GPU DaemonSets (state "pods": {"NAMESPACE/NAME": {...}}) -------------------------
# A pod: {"node": NAME, "labels": {...}, "affinity": {nodeAffinity...}, "holder_pid": PID}.
# "holder_pid" is the pod's process on the node (a device-plugin-like process holding the GPU).

def _term_matches(term, labels):
    """One nodeSelectorTerm against node labels (Kubernetes: expressions ANDed; NotIn and
    DoesNotExist also match a node without the label)."""
    for expr in term.get("matchExpressions") or []:
        value = labels.get(expr["key"])
        operator = expr["operator"]
        if operator == "In" and value not in expr.get("values", []):
            return False
        if operator == "NotIn" and value is not None and value in expr.get("values", []):
            return False
        if operator == "Exists" and expr["key"] not in labels:
            return False
        if operator == "DoesNotExist" and expr["key"] in labels:
            return False
    return True


def node_affinity_matches(affinity, labels):
    required = ((affinity or {}).get("nodeAffinity") or {}).get("requiredDuringSchedulingIgnoredDuringExecution")
    if not required:
        return True
    return any(_term_matches(term, labels) for term in required.get("nodeSelectorTerms") or [])


def evict_daemon_pods(state, node_name):
    """The DaemonSet controller deletes its pods from a node that no longer matches their
    required node affinity (Kubernetes docs, DaemonSet: "If node labels are changed, the
    DaemonSet will promptly ... delete Pods from newly not-matching nodes"); the kubelet then
    stops the pod's process. Returns the deleted pods' keys."""
    import signal

    labels = (state["nodes"].get(node_name) or {}).get("labels") or {}
    gone = []
    for key, pod in sorted((state.get("pods") or {}).items()):
        if pod.get("node") == node_name and not node_affinity_matches(pod.get("affinity"), labels):
            if pod.get("holder_pid"):
                try:
                    os.kill(int(pod["holder_pid"]), signal.SIGTERM)
                except (OSError, ValueError):
                    pass
            del state["pods"][key]
            gone.append(key)
    return gone


def _selector_matches(selector, labels):
    """A label selector of "k=v", "k==v", "k!=v" or "k" terms, comma-separated (kubectl syntax)."""
    for term in [t.strip() for t in selector.split(",") if t.strip()]:
        if "!=" in term:
            key, value = term.split("!=", 1)
            if labels.get(key.strip()) == value.strip():
                return False
        elif "=" in term:
            key, value = term.replace("==", "=").split("=", 1)
            if labels.get(key.strip()) != value.strip():
                return False
        elif term not in labels:
            return False
    return True


def list_pods(module, state, namespace, label_selectors, field_selectors):
    resources = []
    for field in field_selectors:
        if not field.startswith("spec.nodeName="):
            module.fail_json(msg="fake cluster: only the spec.nodeName field selector is implemented")
    nodes = [f.split("=", 1)[1] for f in field_selectors]
    for key, pod in sorted((state.get("pods") or {}).items()):
        pod_namespace, name = key.split("/", 1)
        if namespace not in (None, pod_namespace) or any(pod.get("node") != n for n in nodes):
            continue
        if not all(_selector_matches(s, pod.get("labels") or {}) for s in label_selectors):
            continue
        resources.append({"apiVersion": "v1", "kind": "Pod",
                          "metadata": {"name": name, "namespace": pod_namespace, "labels": pod.get("labels") or {}},
                          "spec": {"nodeName": pod.get("node"), "affinity": pod.get("affinity") or {}},
                          "status": {"phase": "Running"}})
    return resources
