# -*- coding: utf-8 -*-
# Test stand-in: the fake cluster state the stub kubernetes.core modules share.
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import signal
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


def node_selector_matches(node_selector, labels):
    """A pod's spec.nodeSelector: every key must be on the node with exactly that value."""
    return all(labels.get(key) == value for key, value in (node_selector or {}).items())


def node_affinity_matches(affinity, labels):
    required = ((affinity or {}).get("nodeAffinity") or {}).get("requiredDuringSchedulingIgnoredDuringExecution")
    if not required:
        return True
    return any(_term_matches(term, labels) for term in required.get("nodeSelectorTerms") or [])


# -- Pods, drains and the device plugin's pods -------------------------------------------------
# Added state (all optional in the JSON file):
#   nodes[NAME]: {"unschedulable": bool, "gpu": bool (the chart's DaemonSets run there),
#                 "devices": {resource: count} (what the plugin would advertise if it started
#                 now), or "physical_devices": {resource: count} (the devices it finds; it
#                 advertises them through the node's config), "allocatable": {resource: "count"}
#                 (what the Node shows)}
#   pods["NS/NAME"]: {"nodeName", "labels", "annotations", "owner": {"kind", "name"} or null,
#                     "affinity": {"nodeAffinity": ...}, "nodeSelector": {label: value} (HAMi's
#                     plugin is placed by nodeSelector alone), "holder_pid": PID (the pod's process on
#                     the node, e.g. a plugin holding a GPU: the kubelet stops it when the pod goes),
#                     "emptyDir": bool, "phase": "Running", "terminationSeconds": int}
#   pdbs["NS/NAME"]: {"selector": {labels}, "disruptionsAllowed": int,
#                     "refusalsBeforeReady": int or null: after that many refused evictions a
#                     replacement pod is ready elsewhere and one disruption is allowed; null: never}
#   daemonset_pods["NS/DS"]: {node: restart generation} for the device plugin chart's DaemonSets;
#                     a negative generation: the pod was removed from the node because the node no
#                     longer matches the chart's affinity (the DaemonSet controller re-creates it,
#                     as generation -g + 1, once the node matches again).
# A pod under eviction keeps running for its terminationSeconds (grace period); the stub has no
# clock, so k8s_drain's wait_timeout is what "passes" while it waits.

# The chart's DaemonSets: (component, name suffix). The plugin's name is the chart's fullname;
# GFD and the MPS control daemon append these suffixes (NVIDIA/k8s-device-plugin v0.20.0
# deployments/helm/nvidia-device-plugin/templates/daemonset-gfd.yml and
# daemonset-mps-control-daemon.yml; UNVERIFIED: the suffixes were not read from the tag itself).
CHART_DAEMONSETS = (("device-plugin", ""), ("gpu-feature-discovery", "-gpu-feature-discovery"),
                    ("mps-control-daemon", "-mps-control-daemon"))
# Set by the DaemonSet controller on every pod it creates (k8s.io/api extensions/v1beta1
# DaemonSetTemplateGenerationKey; pkg/controller/daemon/util CreatePodTemplate).
TEMPLATE_GENERATION_LABEL = "pod-template-generation"
CONFIG_LABEL = "nvidia.com/device-plugin.config"


def ensure_pod_state(state):
    for key in ("pods", "pdbs", "daemonset_pods"):
        state.setdefault(key, {})
    return state


def node_object(name, node):
    obj = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": node.get("labels") or {},
                                                           "annotations": node.get("annotations") or {}},
           "spec": {}, "status": {"allocatable": dict(node.get("allocatable") or {})}}
    if node.get("unschedulable"):
        obj["spec"]["unschedulable"] = True
    return obj


def selector_matches(selector, labels):
    """A label selector as kubectl and the API server read it: k=v, k!=v, k, !k, comma = and."""
    for term in [t.strip() for t in ",".join(selector or []).split(",") if t.strip()]:
        if term.startswith("!"):
            if term[1:] in labels:
                return False
        elif "!=" in term:
            key, value = term.split("!=", 1)
            if labels.get(key) == value:
                return False
        elif "=" in term:
            key, value = term.replace("==", "=").split("=", 1)
            if labels.get(key) != value:
                return False
        elif term not in labels:
            return False
    return True


def field_matches(selectors, pod):
    for term in [t.strip() for t in ",".join(selectors or []).split(",") if t.strip()]:
        key, value = term.split("=", 1)
        if key != "spec.nodeName":
            raise ValueError("fake cluster: field selector %s is not implemented" % key)
        if pod["nodeName"] != value:
            return False
    return True


def _release_of(state, namespace, ds_name):
    for key, release in state["releases"].items():
        if key.split("/", 1)[0] == namespace and release.get("chart") == "nvidia-device-plugin":
            fullname = release.get("daemonset")
            for component, suffix in CHART_DAEMONSETS:
                if fullname and ds_name == fullname + suffix:
                    return release, component
    return None, None


def node_config(state, release, node_name):
    """The config a node's plugin loads: its label, else config.default (config-manager)."""
    values = release.get("values") or {}
    label = (state["nodes"].get(node_name, {}).get("labels") or {}).get(CONFIG_LABEL)
    return label if label is not None else (values.get("config") or {}).get("default")


def config_available(state, release, node_name):
    """config-manager exits with "specified config ... does not exist" when the node's config is
    not in the map (NVIDIA/k8s-device-plugin v0.20.0 cmd/config-manager/main.go): the pod's init
    container then crash-loops and the node has no device plugin."""
    config_map = ((release.get("values") or {}).get("config") or {}).get("map") or {}
    return node_config(state, release, node_name) in config_map


def node_labels(node):
    """A node's labels as the scheduler sees them: a node with NVIDIA GPUs ("gpu": true) also
    carries NFD's feature.node.kubernetes.io/pci-10de.present=true (nfd-worker's default
    pci device label: class 03xx, vendor 10de), which the device-plugin chart's affinity selects."""
    labels = dict(node.get("labels") or {})
    if node.get("gpu"):
        labels.setdefault("feature.node.kubernetes.io/pci-10de.present", "true")
    return labels


def _runs_on(state, release, component, node_name):
    node = state["nodes"][node_name]
    if not node.get("gpu"):
        return False
    # The chart gives .Values.affinity to each of its DaemonSets (templates/daemonset-*.yml).
    if not node_affinity_matches((release.get("values") or {}).get("affinity"), node_labels(node)):
        return False
    if component == "mps-control-daemon":
        # nodeSelector nvidia.com/mps.capable=true, which GFD sets when the config shares by MPS.
        config_map = ((release.get("values") or {}).get("config") or {}).get("map") or {}
        return "mps:" in (config_map.get(node_config(state, release, node_name)) or "")
    return True


def start_plugin(state, node_name):
    """The plugin (re)starts on a node: it advertises what the node's GPUs offer now.

    `devices` is advertised as given. `physical_devices` ({resource: count} of the devices the
    plugin finds) is advertised through the node's config, as the plugin does: every resource
    its `sharing.timeSlicing` (or `sharing.mps`) config names becomes `replicas` devices per
    device, under `rename`, or `<name>.shared` with renameByDefault (NVIDIA/k8s-device-plugin
    v0.19.3 internal/rm/device_map.go updateDeviceMapWithReplicas)."""
    node = state["nodes"][node_name]
    if "physical_devices" in node:
        node["allocatable"] = dict((k, str(v)) for k, v in advertised(state, node_name).items())
    elif "devices" in node:
        node["allocatable"] = dict((k, str(v)) for k, v in node["devices"].items())


def node_config_document(state, node_name):
    """The config (parsed) the node's plugin loads from the device plugin release, or None."""
    import yaml

    for release in state["releases"].values():
        if release.get("chart") != "nvidia-device-plugin":
            continue
        name = node_config(state, release, node_name)
        text = (((release.get("values") or {}).get("config") or {}).get("map") or {}).get(name)
        if text is not None:
            return yaml.safe_load(text)
    return None


def advertised(state, node_name):
    """{resource: count} the plugin advertises on a node with `physical_devices`."""
    physical = dict(state["nodes"][node_name]["physical_devices"])
    sharing = (node_config_document(state, node_name) or {}).get("sharing") or {}
    replicated = sharing.get("timeSlicing") or sharing.get("mps") or {}
    result = dict(physical)
    for resource in replicated.get("resources") or []:
        if resource.get("devices") not in (None, "all"):
            raise ValueError("fake cluster: replicating a subset of devices is not implemented")
        name = resource["name"]
        if name not in physical:
            continue  # the plugin skips resources it finds no device for
        rename = resource.get("rename") or (name + ".shared" if replicated.get("renameByDefault") else name)
        count = physical[name] * int(resource["replicas"])
        del result[name]
        result[rename] = result.get(rename, 0) + count
    return result


def roll_daemonsets(state, namespace, fullname, nodes=None):
    """The chart's DaemonSets restart their pods (a new pod template, or the first install)."""
    ensure_pod_state(state)
    for _component, suffix in CHART_DAEMONSETS:
        generations = state["daemonset_pods"].setdefault("%s/%s" % (namespace, fullname + suffix), {})
        for node_name in state["nodes"]:
            if nodes is None or node_name in nodes:
                generation = generations.get(node_name, 0)
                # A pod held off the node by its affinity stays off; only its template changes.
                generations[node_name] = generation - 1 if generation < 0 else generation + 1
    for node_name in state["nodes"]:
        if nodes is None or node_name in nodes:
            start_plugin(state, node_name)


def daemonset_pods(state):
    """{"NS/NAME": pod} for the pods the chart's DaemonSets run now."""
    ensure_pod_state(state)
    pods = {}
    for ds_key, generations in sorted(state["daemonset_pods"].items()):
        namespace, ds_name = ds_key.split("/", 1)
        release, component = _release_of(state, namespace, ds_name)
        if release is None:
            continue
        for node_name, generation in sorted(generations.items()):
            if generation <= 0 or node_name not in state["nodes"] or not _runs_on(state, release, component, node_name):
                continue
            # Each of the chart's pods starts with config-manager as init container.
            ready = config_available(state, release, node_name)
            pods["%s/%s-%s-%d" % (namespace, ds_name, node_name, generation)] = {
                "nodeName": node_name, "owner": {"kind": "DaemonSet", "name": ds_name}, "emptyDir": True,
                "labels": {"app.kubernetes.io/name": component if component != "device-plugin" else "nvidia-device-plugin",
                           "app.kubernetes.io/instance": release.get("release_name", ""),
                           TEMPLATE_GENERATION_LABEL: str(generation)},
                "affinity": (release.get("values") or {}).get("affinity") or {},
                "phase": "Running", "ready": ready, "_daemonset": ds_key}
    return pods


def all_pods(state):
    pods = dict(ensure_pod_state(state)["pods"])
    pods.update(daemonset_pods(state))
    return pods


def pod_object(key, pod):
    namespace, name = key.split("/", 1)
    metadata = {"name": name, "namespace": namespace, "labels": dict(pod.get("labels") or {}),
                "annotations": dict(pod.get("annotations") or {})}
    if pod.get("owner"):
        metadata["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": pod["owner"]["kind"],
                                        "name": pod["owner"]["name"], "controller": True}]
    if pod.get("deleting"):
        metadata["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    volumes = [{"name": "data", "emptyDir": {}}] if pod.get("emptyDir") else []
    ready = pod.get("ready", True) and pod.get("phase", "Running") == "Running"
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata,
            "spec": {"nodeName": pod["nodeName"], "volumes": volumes, "affinity": dict(pod.get("affinity") or {}),
                     "nodeSelector": dict(pod.get("nodeSelector") or {})},
            "status": {"phase": pod.get("phase", "Running"),
                       "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}


def delete_pod(state, key):
    """Delete a pod; a DaemonSet pod is recreated at once on its node (a plugin restart)."""
    pods = daemonset_pods(state)
    if key in pods:
        pod = pods[key]
        state["daemonset_pods"][pod["_daemonset"]][pod["nodeName"]] += 1
        if pod["labels"]["app.kubernetes.io/name"] == "nvidia-device-plugin":
            start_plugin(state, pod["nodeName"])
        return True
    pod = state["pods"].pop(key, None)
    if pod is not None:
        stop_holder(pod)
    return pod is not None


def stop_holder(pod):
    """The kubelet stops a deleted pod's containers: its process on the node gets SIGTERM."""
    if pod.get("holder_pid"):
        try:
            os.kill(int(pod["holder_pid"]), signal.SIGTERM)
        except (OSError, ValueError):
            pass


def reconcile_daemon_pods(state, node_name):
    """The DaemonSet controller after a node's labels changed: it deletes its pods from a node
    that no longer matches their required node affinity or nodeSelector and creates them again once the node
    matches (Kubernetes docs, DaemonSet: "If node labels are changed, the DaemonSet will promptly
    add Pods to newly matching nodes and delete Pods from newly not-matching nodes"). A re-created
    device plugin pod starts afresh and advertises what the node's GPUs offer now.
    Returns the keys of the pods deleted."""
    ensure_pod_state(state)
    labels = node_labels(state["nodes"].get(node_name) or {})
    gone = []
    for key, pod in sorted(state["pods"].items()):
        owner = pod.get("owner") or {}
        if (pod.get("nodeName") == node_name and owner.get("kind") == "DaemonSet"
                and not (node_affinity_matches(pod.get("affinity"), labels)
                         and node_selector_matches(pod.get("nodeSelector"), labels))):
            stop_holder(state["pods"].pop(key))
            gone.append(key)
    before = daemonset_pods(state)
    for ds_key, generations in sorted(state["daemonset_pods"].items()):
        namespace, ds_name = ds_key.split("/", 1)
        release, component = _release_of(state, namespace, ds_name)
        generation = generations.get(node_name)
        if release is None or generation is None:
            continue
        matches = node_affinity_matches((release.get("values") or {}).get("affinity"), labels)
        if generation > 0 and not matches:
            generations[node_name] = -generation
            gone.extend(k for k, p in before.items() if p["_daemonset"] == ds_key and p["nodeName"] == node_name)
        elif generation < 0 and matches:
            generations[node_name] = -generation + 1
            if component == "device-plugin":
                start_plugin(state, node_name)
    return gone


def blocking_pdb(state, pod_key, pod):
    """The PodDisruptionBudget that refuses this pod's eviction now, or None."""
    for key, pdb in sorted(state["pdbs"].items()):
        if key.split("/", 1)[0] != pod_key.split("/", 1)[0]:
            continue
        if all((pod.get("labels") or {}).get(k) == v for k, v in pdb["selector"].items()):
            if pdb.get("disruptionsAllowed", 0) > 0:
                return None
            return key
    return None
