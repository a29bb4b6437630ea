"""Kubernetes objects the cluster-side tests create on the control plane (tests/controlplane.py):
workloads with their controllers and budgets, and the GPU DaemonSets as the NVIDIA device plugin
chart renders them (NVIDIA/k8s-device-plugin v0.19.3 deployments/helm/nvidia-device-plugin:
templates/daemonset-device-plugin.yml and daemonset-gfd.yml), so the real DaemonSet controller
places and removes their pods."""
from ansible_collections.gpuprov.gpu.plugins.plugin_utils.gpu_operands import gpu_operand_affinity

PLUGIN_NAMESPACE = "nvidia-device-plugin"
PLUGIN_RELEASE = "nvidia-device-plugin"
# A pod the node agent runs as a holder of its node's GPUs (node_agent.py), besides the plugin and
# pods that ask for nvidia.com/ resources.
HOLDS_GPUS = "gpuprov.test/holds-gpus"


def namespace(name):
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}


def _container(name, command, **extra):
    return dict({"name": name, "image": "registry.example/%s:test" % name, "command": command}, **extra)


def deployment(name, ns, replicas=1, node_selector=None, grace=30, shutdown_seconds=None, emptydir=False,
               resources=None, labels=None):
    """A Deployment whose pods carry app=NAME (its ReplicaSet owns them)."""
    pod_labels = dict({"app": name}, **(labels or {}))
    annotations = {"gpuprov.test/shutdown-seconds": str(shutdown_seconds)} if shutdown_seconds else {}
    spec = {"containers": [_container("main", ["serve"], resources=resources or {})],
            "terminationGracePeriodSeconds": grace}
    if node_selector:
        spec["nodeSelector"] = node_selector
    if emptydir:
        spec["volumes"] = [{"name": "scratch", "emptyDir": {}}]
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": ns},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": pod_labels, "annotations": annotations}, "spec": spec}}}


def pod_disruption_budget(name, ns, app, min_available):
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": name, "namespace": ns},
            "spec": {"minAvailable": min_available, "selector": {"matchLabels": {"app": app}}}}


def bare_pod(name, ns, node, emptydir=False):
    """A pod no controller manages, bound to NODE (kubectl drain refuses it without --force)."""
    spec = {"nodeName": node, "containers": [_container("main", ["sleep", "infinity"])],
            "terminationGracePeriodSeconds": 5}
    if emptydir:
        spec["volumes"] = [{"name": "scratch", "emptyDir": {}}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns, "labels": {"app": name}},
            "spec": spec}


def device_plugin_configmap(configs, ns=PLUGIN_NAMESPACE, release=PLUGIN_RELEASE):
    """The chart's ConfigMap of named configs (templates/configmap.yml: <fullname>-configs)."""
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": release + "-configs", "namespace": ns},
            "data": dict(configs)}


def device_plugin_daemonsets(ns=PLUGIN_NAMESPACE, release=PLUGIN_RELEASE, default_config=None, affinity=None,
                             with_config=True):
    """The plugin and GFD DaemonSets as the chart renders them for gpuprov's values: the pause
    affinity on both, an emptyDir (the config-manager's /config) in each pod, and with configs
    the config-manager init container reading the node label nvidia.com/device-plugin.config."""
    affinity = gpu_operand_affinity() if affinity is None else affinity
    objects = []
    for suffix, command in (("", ["nvidia-device-plugin"]), ("-gpu-feature-discovery", ["gpu-feature-discovery"])):
        name = release + suffix
        labels = {"app.kubernetes.io/name": "nvidia-device-plugin" if not suffix else "gpu-feature-discovery",
                  "app.kubernetes.io/instance": release}
        env = [{"name": "NODE_LABEL", "value": "nvidia.com/device-plugin.config"},
               {"name": "CONFIG_FILE_SRCDIR", "value": "/available-configs"},
               {"name": "CONFIG_FILE_DST", "value": "/config/config.yaml"},
               {"name": "DEFAULT_CONFIG", "value": default_config or ""},
               {"name": "FALLBACK_STRATEGIES", "value": "named,single"}]
        spec = {"affinity": affinity, "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists",
                                                       "effect": "NoSchedule"}],
                "containers": [_container(command[0] + "-ctr", command)],
                "volumes": [{"name": "config", "emptyDir": {}}], "terminationGracePeriodSeconds": 30}
        if with_config:
            spec["initContainers"] = [_container("config-manager-init", ["config-manager"], env=env)]
            spec["containers"].insert(0, _container("config-manager-sidecar", ["config-manager"], env=env))
            spec["volumes"].append({"name": "available-configs", "configMap": {"name": release + "-configs"}})
        objects.append({"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": name, "namespace": ns,
                                                                                   "labels": labels},
                        "spec": {"selector": {"matchLabels": labels},
                                 "template": {"metadata": {"labels": labels}, "spec": spec}}})
    return objects


def gpu_daemonset(name, ns, node=None):
    """A GPU DaemonSet gpuprov did not deploy (no pause affinity), whose pod holds the node's
    GPUs (the node agent runs a holder process for it on a fleet node)."""
    labels = {"app.kubernetes.io/name": name, "app.kubernetes.io/instance": name}
    spec = {"containers": [_container(name, [name], resources={})], "terminationGracePeriodSeconds": 30}
    if node:
        spec["nodeSelector"] = {"kubernetes.io/hostname": node}
    return {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": name, "namespace": ns, "labels": labels},
            "spec": {"selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels, "annotations": {HOLDS_GPUS: "true"}}, "spec": spec}}}
