"""The kubelets' part for a test control plane (tests/controlplane.py): there is no container
runtime here, so one process plays every node's kubelet against the real API server.

    python tests/node_agent.py --kubeconfig FILE --dir DIR

Nodes are declared by JSON files DIR/nodes/<name>.json (written atomically by
controlplane.NodeAgent.add_node); the agent creates each Node, and deletes it when its file goes:

    {"name": "gpu-a100-01", "labels": {...}, "taints": [...], "unschedulable": false,
     "address": "127.0.0.1", "cpu": "64", "memory": "512Gi", "pods": "110",
     "extended": {"nvidia.com/gpu": 8},            # advertised from the start
     "kubelet_port_file": PATH,                    # a kubelet API (fake-kubelet serve --api-port-file)
                                                   #   the API server's node proxy reaches
     "plugin": {"devices": {"nvidia.com/gpu": 8}}  # what a device plugin pod advertises when it
               or {"nvml_state": PATH},            #   starts: fixed, or read from the fake NVML
     "holder": {"nvml_state": PATH, "mount_pid_file": PATH}}
                       # a fleet node (tests/fleet): a pod that uses its GPUs runs a process in
                       # the node's mount namespace (that of the pid in the file; the agent's
                       # own without the file, as for a molecule scenario's localhost node),
                       # listed as a holder of every GPU in the node's fake NVML state while
                       # the pod runs

What the agent does, as a kubelet would:
- Node status: Ready and the pressure conditions, capacity and allocatable (cpu, memory, pods
  and the extended resources), node info; the Lease in kube-node-lease renewed every 10 s (the
  node lifecycle controller removes the not-ready taint the API server puts on a new Node and
  would mark the node unreachable without it).
- Pods bound to its nodes by the scheduler or the DaemonSet controller start: status Running
  and Ready, with a pod IP. A device plugin pod of the NVIDIA chart (a container whose command
  is nvidia-device-plugin) reads its config the
  way config-manager does (the node label nvidia.com/device-plugin.config, else
  DEFAULT_CONFIG, from the ConfigMap mounted as available-configs): a label naming a config
  the ConfigMap lacks leaves the pod's init container crash-looping and the pod not Ready
  (NVIDIA/k8s-device-plugin v0.19.3 cmd/config-manager/main.go), otherwise the node's
  allocatable gets what the plugin advertises. When the plugin pod goes, its resources stay in
  capacity and drop to 0 in allocatable (the kubelet's device manager marks a stopped plugin's
  devices unhealthy: kubernetes v1.37.2 pkg/kubelet/cm/devicemanager/manager.go GetCapacity).
- A pod whose deletion the API asks for (deletionTimestamp set) is removed once its containers
  have stopped: at once, or after the annotation gpuprov.test/shutdown-seconds (a container that
  takes that long to exit on SIGTERM), but never later than its grace period, as the kubelet
  kills containers then. The agent then deletes it with grace period 0, as the kubelet does.
- On a node with "holder", a pod that uses the GPUs (the device plugin's, one whose
  containers ask for nvidia.com/ resources, or one annotated gpuprov.test/holds-gpus=true) runs a `sleep` in the node's mount namespace while
  it runs: a GPU reset or an Ampere MIG mode change then fails "in use", as on a real node, and
  the kubelet's stop of the pod (SIGTERM) releases the GPUs.
- Every pod start and stop is appended to DIR/events.jsonl ({"event": "start"|"stop", "pod":
  "NS/NAME", "uid", "node", "time"}), and every cordon change seen with the number of nodes
  cordoned at that moment ({"event": "cordoned", "nodes": [...]}), so tests can see what
  happened between two API reads (a pod evicted and replaced, nodes drained at once).
"""
import argparse
import datetime
import json
import os
import queue
import signal
import sys
import threading
import time

from kubernetes import client, config, watch
from kubernetes.client.rest import ApiException

HEARTBEAT_SECONDS = 10
SHUTDOWN_ANNOTATION = "gpuprov.test/shutdown-seconds"
CONFIG_LABEL = "nvidia.com/device-plugin.config"


def now():
    return datetime.datetime.now(datetime.timezone.utc)


def rfc3339(moment=None):
    return (moment or now()).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_quantity_count(value):
    """An extended resource quantity (a plain integer, as device plugins advertise)."""
    return int(str(value))


class NodeSpec:
    def __init__(self, data):
        self.data = data
        self.name = data["name"]

    def __eq__(self, other):
        return isinstance(other, NodeSpec) and self.data == other.data


class Agent:
    def __init__(self, kubeconfig, folder):
        self.folder = folder
        self.api_client = config.new_client_from_config(config_file=kubeconfig)
        self.core = client.CoreV1Api(self.api_client)
        self.coordination = client.CoordinationV1Api(self.api_client)
        self.specs = {}              # node name -> NodeSpec
        self.extended = {}           # node name -> {resource: count} advertised now
        self.unhealthy = {}          # node name -> set of resources whose plugin stopped
        self.last_heartbeat = {}     # node name -> monotonic time of the last status update
        self.started = {}            # pod uid -> node name (pods this agent started)
        self.plugin_pods = {}        # pod uid -> (node name, resources it advertised)
        self.terminating = {}        # pod uid -> (due monotonic time, namespace, name)
        self.holders = {}            # pod uid -> (process, nvml state path, holder name)
        self.plugin_labels = {}      # plugin pod uid -> (pod, the node's config label it started with)
        self.events = queue.Queue()
        self.version = self._server_version()
        self.cordoned = None
        self.stopping = threading.Event()

    # -- bookkeeping ------------------------------------------------------------------------
    def _server_version(self):
        try:
            return client.VersionApi(self.api_client).get_code().git_version
        except Exception:  # the version is information only
            return "unknown"

    def log(self, **entry):
        entry.setdefault("time", time.time())
        with open(os.path.join(self.folder, "events.jsonl"), "a") as handle:
            handle.write(json.dumps(entry, sort_keys=True) + "\n")

    # -- nodes --------------------------------------------------------------------------------
    def read_specs(self):
        specs = {}
        nodes_dir = os.path.join(self.folder, "nodes")
        for entry in sorted(os.listdir(nodes_dir)):
            if not entry.endswith(".json"):
                continue
            try:
                with open(os.path.join(nodes_dir, entry)) as handle:
                    spec = NodeSpec(json.load(handle))
            except (OSError, ValueError):
                continue  # being replaced; read again on the next pass
            specs[spec.name] = spec
        return specs

    def sync_nodes(self):
        specs = self.read_specs()
        for name in sorted(set(self.specs) - set(specs)):
            try:
                self.core.delete_node(name)
            except ApiException as error:
                if error.status != 404:
                    raise
            for store in (self.extended, self.unhealthy, self.last_heartbeat):
                store.pop(name, None)
        new = sorted(set(specs) - set(self.specs))
        changed = set(specs) != set(self.specs)
        self.specs = specs
        if changed:
            # What the agent plays now: NodeAgent.remove_all waits for it to drop every node, so
            # that a node declared again under the same name is created again.
            path = os.path.join(self.folder, "known.json")
            with open(path + ".tmp", "w") as handle:
                json.dump(sorted(specs), handle)
            os.replace(path + ".tmp", path)
        for name in new:
            self.create_node(specs[name])
        for name in sorted(self.specs):
            if time.monotonic() - self.last_heartbeat.get(name, 0) >= HEARTBEAT_SECONDS:
                self.heartbeat(name)

    def create_node(self, spec):
        data = spec.data
        body = {"apiVersion": "v1", "kind": "Node",
                "metadata": {"name": spec.name, "labels": dict({"kubernetes.io/hostname": spec.name,
                                                                "kubernetes.io/os": "linux",
                                                                "kubernetes.io/arch": "amd64"},
                                                               **(data.get("labels") or {}))},
                "spec": {"taints": data.get("taints") or None, "unschedulable": bool(data.get("unschedulable"))}}
        try:
            self.core.create_node(body)
        except ApiException as error:
            if error.status != 409:  # a node the test made itself first
                raise
        self.extended[spec.name] = dict((k, int(v)) for k, v in (data.get("extended") or {}).items())
        self.unhealthy[spec.name] = set()
        self.heartbeat(spec.name)

    def node_status(self, name):
        data = self.specs[name].data
        resources = {"cpu": str(data.get("cpu", "16")), "memory": str(data.get("memory", "64Gi")),
                     "pods": str(data.get("pods", "110")), "ephemeral-storage": "100Gi"}
        capacity = dict(resources)
        allocatable = dict(resources)
        for resource, count in sorted(self.extended.get(name, {}).items()):
            capacity[resource] = str(count)
            allocatable[resource] = "0" if resource in self.unhealthy.get(name, ()) else str(count)
        stamp = rfc3339()
        conditions = [{"type": kind, "status": "False", "reason": reason, "message": message,
                       "lastHeartbeatTime": stamp, "lastTransitionTime": stamp}
                      for kind, reason, message in (
                          ("MemoryPressure", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
                          ("DiskPressure", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
                          ("PIDPressure", "KubeletHasSufficientPID", "kubelet has sufficient PID available"))]
        conditions.append({"type": "Ready", "status": "True", "reason": "KubeletReady",
                           "message": "kubelet is posting ready status (gpuprov test node agent)",
                           "lastHeartbeatTime": stamp, "lastTransitionTime": stamp})
        status = {
            "capacity": capacity, "allocatable": allocatable, "conditions": conditions,
            "addresses": [{"type": "InternalIP", "address": data.get("address", "127.0.0.1")},
                          {"type": "Hostname", "address": name}],
            "nodeInfo": {"kubeletVersion": self.version, "kubeProxyVersion": "", "operatingSystem": "linux",
                         "architecture": "amd64", "containerRuntimeVersion": "gpuprov-node-agent://1",
                         "kernelVersion": os.uname().release, "osImage": "gpuprov test node",
                         "machineID": "", "systemUUID": "", "bootID": ""}}
        port = self.kubelet_port(data)
        if port:
            # Where the API server's node proxy reaches the kubelet's HTTPS API.
            status["daemonEndpoints"] = {"kubeletEndpoint": {"Port": port}}
        return {"status": status}

    @staticmethod
    def kubelet_port(data):
        """The port of a real kubelet API the node has (the fake kubelet's, molecule's
        kubelet_topology scenario), from "kubelet_port_file"; None without one."""
        path = data.get("kubelet_port_file")
        if not path:
            return None
        try:
            with open(path) as handle:
                return int(handle.read().split()[0])
        except (OSError, ValueError, IndexError):
            return None

    def heartbeat(self, name):
        """Node status and Lease, as the kubelet's node status and lease loops post them."""
        body = self.node_status(name)
        # Replace, not merge: capacity keys that went away must go from the status too.
        try:
            node = self.core.read_node_status(name)
        except ApiException as error:
            if error.status == 404:
                return
            raise
        node.status = self.api_client._ApiClient__deserialize(body["status"], "V1NodeStatus")
        try:
            self.core.replace_node_status(name, node)
        except ApiException as error:
            if error.status not in (404, 409):
                raise
            return  # changed meanwhile: the next pass posts it again
        self.renew_lease(name)
        self.last_heartbeat[name] = time.monotonic()

    def renew_lease(self, name):
        namespace = "kube-node-lease"
        spec = {"holderIdentity": name, "leaseDurationSeconds": 40,
                "renewTime": now().strftime("%Y-%m-%dT%H:%M:%S.%fZ")}
        try:
            self.coordination.patch_namespaced_lease(name, namespace, {"spec": spec})
        except ApiException as error:
            if error.status != 404:
                raise
            body = {"metadata": {"name": name, "namespace": namespace,
                                 "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": name,
                                                      "uid": self.core.read_node(name).metadata.uid}]},
                    "spec": spec}
            try:
                self.coordination.create_namespaced_lease(namespace, body)
            except ApiException as error:
                if error.status != 409:
                    raise

    def watch_nodes(self):
        """Cordons (logged), and config-manager's part: it follows the node's config label
        and restarts the plugin with the config the label names (or lets a crash-looping init
        container through once the label names a config that exists)."""
        nodes = dict((node.metadata.name, node) for node in self.core.list_node().items)
        cordoned = sorted(name for name, node in nodes.items() if node.spec.unschedulable and name in self.specs)
        if cordoned != self.cordoned:
            self.cordoned = cordoned
            self.log(event="cordoned", nodes=cordoned)
        for uid, (pod, label) in sorted(self.plugin_labels.items()):
            node = nodes.get(pod.spec.node_name)
            if node is not None and (node.metadata.labels or {}).get(CONFIG_LABEL) != label:
                self.start_pod(pod, restart=True)

    # -- the device plugin ------------------------------------------------------------------
    def is_plugin_pod(self, pod):
        """The NVIDIA device plugin's pod: a container runs `nvidia-device-plugin` (the chart's
        nvidia-device-plugin-ctr; GFD's runs gpu-feature-discovery)."""
        return any((container.command or [None])[0] == "nvidia-device-plugin" for container in pod.spec.containers)

    def plugin_config(self, pod, node):
        """(config name, config text or None, error): what config-manager would load."""
        env = {}
        for container in (pod.spec.init_containers or []) + (pod.spec.containers or []):
            for item in container.env or []:
                if item.value is not None:
                    env.setdefault(item.name, item.value)
        config_map = None
        for volume in pod.spec.volumes or []:
            if volume.name == "available-configs" and volume.config_map is not None:
                config_map = volume.config_map.name
        if config_map is None:
            return None, None, None  # a plugin without a ConfigMap runs its built-in defaults
        label = (node.metadata.labels or {}).get(CONFIG_LABEL)
        name = label or env.get("DEFAULT_CONFIG") or None
        try:
            data = self.core.read_namespaced_config_map(config_map, pod.metadata.namespace).data or {}
        except ApiException as error:
            return name, None, "configmap %s: %s" % (config_map, error.reason)
        if name is None:
            if len(data) == 1:  # fallback strategy "single"
                name = next(iter(data))
            else:
                return None, None, "no config specified for the node and no default config specified"
        if name not in data:
            return name, None, "specified config %s does not exist" % name
        return name, data[name], None

    def plugin_devices(self, node_name, config_text):
        plugin = self.specs[node_name].data.get("plugin") or {}
        if "devices" in plugin:
            return dict((k, int(v)) for k, v in plugin["devices"].items())
        if plugin.get("nvml_state"):
            import fake_device_plugin
            return fake_device_plugin.advertised(plugin["nvml_state"], config_text)
        return {}

    # -- GPU holders on fleet nodes ---------------------------------------------------------
    def uses_gpus(self, pod):
        if self.is_plugin_pod(pod) or (pod.metadata.annotations or {}).get("gpuprov.test/holds-gpus") == "true":
            return True
        for container in pod.spec.containers:
            limits = (container.resources.limits if container.resources else None) or {}
            if any(name.startswith("nvidia.com/") for name in limits):
                return True
        return False

    def start_holder(self, pod):
        holder = self.specs[pod.spec.node_name].data.get("holder")
        if not holder or not self.uses_gpus(pod):
            return
        import subprocess
        import fake_device_plugin
        argv = ["sleep", "86400"]
        if holder.get("mount_pid_file"):
            with open(holder["mount_pid_file"]) as handle:
                node_pid = int(handle.read().split()[0])
            # nsenter execs sleep in the same process: its pid is the pod's process on the node.
            argv = ["nsenter", "--mount=/proc/%d/ns/mnt" % node_pid, "--"] + argv
        process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                   start_new_session=True)
        name = "pod %s/%s" % (pod.metadata.namespace, pod.metadata.name)
        with fake_device_plugin.nvml_state(holder["nvml_state"]) as state:
            state["holders"] = [h for h in state.get("holders", []) if h.get("name") != name] + [
                {"name": name, "pid": process.pid}]
        self.holders[pod.metadata.uid] = (process, holder["nvml_state"], name)

    def stop_holder(self, uid):
        entry = self.holders.pop(uid, None)
        if entry is None:
            return
        process, path, name = entry
        import fake_device_plugin
        process.terminate()
        process.wait()
        with fake_device_plugin.nvml_state(path) as state:
            state["holders"] = [h for h in state.get("holders", []) if h.get("name") != name]

    # -- pods ---------------------------------------------------------------------------------
    def watch_pods(self):
        resource_version = None
        while not self.stopping.is_set():
            try:
                if resource_version is None:
                    listing = self.core.list_pod_for_all_namespaces()
                    resource_version = listing.metadata.resource_version
                    for pod in listing.items:
                        self.events.put(("SYNC", pod))
                stream = watch.Watch().stream(self.core.list_pod_for_all_namespaces,
                                              resource_version=resource_version, timeout_seconds=30,
                                              allow_watch_bookmarks=True)
                for event in stream:
                    pod = event["object"]
                    resource_version = pod.metadata.resource_version
                    if event["type"] != "BOOKMARK":
                        self.events.put((event["type"], pod))
            except ApiException as error:
                if error.status == 410:
                    resource_version = None
                else:
                    time.sleep(0.5)
            except Exception:  # a dropped connection: watch again from where it was
                if self.stopping.is_set():
                    return
                time.sleep(0.5)

    def handle(self, kind, pod):
        uid = pod.metadata.uid
        node_name = pod.spec.node_name
        if kind == "DELETED":
            self.terminating.pop(uid, None)
            self.pod_gone(pod)
            return
        if node_name not in self.specs:
            return
        if pod.metadata.deletion_timestamp is not None:
            if uid not in self.terminating:
                grace = pod.metadata.deletion_grace_period_seconds or 0
                shutdown = float((pod.metadata.annotations or {}).get(SHUTDOWN_ANNOTATION, 0))
                self.terminating[uid] = (time.monotonic() + min(grace, shutdown), pod.metadata.namespace,
                                         pod.metadata.name)
            return
        if pod.status.phase in ("Succeeded", "Failed"):
            return
        if uid not in self.started:
            self.start_pod(pod)

    def start_pod(self, pod, restart=False):
        node_name = pod.spec.node_name
        uid = pod.metadata.uid
        ready, waiting = True, None
        if self.is_plugin_pod(pod):
            node = self.core.read_node(node_name)
            self.plugin_labels[uid] = (pod, (node.metadata.labels or {}).get(CONFIG_LABEL))
            config_name, config_text, error = self.plugin_config(pod, node)
            if error:
                ready, waiting = False, error
            else:
                devices = self.plugin_devices(node_name, config_text)
                old = self.plugin_pods.get(uid, (node_name, set()))[1]
                self.plugin_pods[uid] = (node_name, set(devices))
                self.extended[node_name].update(devices)
                self.unhealthy[node_name] -= set(devices)
                self.unhealthy[node_name] |= old - set(devices)
                self.heartbeat(node_name)
        stamp = rfc3339()
        containers = [{"name": c.name, "image": c.image or "", "imageID": "", "restartCount": 0 if ready else 3,
                       "ready": ready, "started": ready,
                       "state": {"running": {"startedAt": stamp}} if ready else
                       {"waiting": {"reason": "CrashLoopBackOff", "message": waiting}}}
                      for c in pod.spec.containers]
        status = {"phase": "Running" if ready else "Pending", "hostIP": self.specs[node_name].data.get("address", "127.0.0.1"),
                  "podIP": "10.%d.%d.%d" % (len(self.started) // 65536 % 256, len(self.started) // 256 % 256,
                                            len(self.started) % 256 + 1) if ready else None,
                  "startTime": stamp, "containerStatuses": containers,
                  "conditions": [
                      {"type": "PodScheduled", "status": "True", "lastTransitionTime": stamp},
                      {"type": "Initialized", "status": "True" if ready else "False", "lastTransitionTime": stamp},
                      {"type": "ContainersReady", "status": "True" if ready else "False", "lastTransitionTime": stamp},
                      {"type": "Ready", "status": "True" if ready else "False", "lastTransitionTime": stamp}]}
        if not ready:
            status["initContainerStatuses"] = [
                {"name": c.name, "image": c.image or "", "imageID": "", "restartCount": 3, "ready": False,
                 "state": {"waiting": {"reason": "CrashLoopBackOff", "message": waiting}}}
                for c in pod.spec.init_containers or []]
        try:
            self.core.patch_namespaced_pod_status(pod.metadata.name, pod.metadata.namespace, {"status": status})
        except ApiException as error:
            if error.status != 404:
                raise
            return
        self.started[uid] = node_name
        if ready and uid not in self.holders:
            self.start_holder(pod)
        self.log(event="restart" if restart else "start", pod="%s/%s" % (pod.metadata.namespace, pod.metadata.name), uid=uid, node=node_name,
                 ready=ready)

    def pod_gone(self, pod):
        uid = pod.metadata.uid
        node_name = self.started.pop(uid, None)
        if node_name is None:
            return
        self.stop_holder(uid)
        self.plugin_labels.pop(uid, None)
        plugin = self.plugin_pods.pop(uid, None)
        if plugin is not None and plugin[0] in self.specs:
            self.unhealthy[plugin[0]] |= plugin[1]
            self.heartbeat(plugin[0])
        self.log(event="stop", pod="%s/%s" % (pod.metadata.namespace, pod.metadata.name), uid=uid, node=node_name)

    def finish_terminations(self):
        for uid, (due, namespace, name) in sorted(self.terminating.items()):
            if time.monotonic() < due:
                continue
            del self.terminating[uid]
            try:
                self.core.delete_namespaced_pod(name, namespace, body=client.V1DeleteOptions(
                    grace_period_seconds=0, preconditions=client.V1Preconditions(uid=uid)))
            except ApiException as error:
                if error.status not in (404, 409):
                    raise

    # -- the loop -----------------------------------------------------------------------------
    def run(self):
        os.makedirs(os.path.join(self.folder, "nodes"), exist_ok=True)
        watcher = threading.Thread(target=self.watch_pods, daemon=True)
        watcher.start()
        next_sync = 0
        while not self.stopping.is_set():
            try:
                if time.monotonic() >= next_sync:
                    self.sync_nodes()
                    self.watch_nodes()
                    next_sync = time.monotonic() + 0.25
                self.finish_terminations()
            except ApiException as error:
                # An API error is the server's answer to one call: said, and tried again.
                print("node agent: %s" % error, file=sys.stderr)
            try:
                kind, pod = self.events.get(timeout=0.1)
            except queue.Empty:
                continue
            try:
                self.handle(kind, pod)
            except ApiException as error:
                print("node agent: %s %s/%s: %s" % (kind, pod.metadata.namespace, pod.metadata.name, error),
                      file=sys.stderr)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--dir", required=True)
    parser.add_argument("--stdin-lifeline", action="store_true",
                        help="stop when standard input reaches EOF (the process that started the agent went away)")
    args = parser.parse_args(argv)
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    agent = Agent(args.kubeconfig, args.dir)
    signal.signal(signal.SIGTERM, lambda *_: agent.stopping.set())
    if args.stdin_lifeline:
        def lifeline():
            sys.stdin.read()
            agent.stopping.set()
        threading.Thread(target=lifeline, daemon=True).start()
    with open(os.path.join(args.dir, "ready"), "w") as handle:
        handle.write(str(os.getpid()))
    try:
        agent.run()
    except KeyboardInterrupt:
        pass
    finally:
        # A stopped kubelet's pods die with the node here: no holder process outlives the agent.
        for uid in list(agent.holders):
            try:
                agent.stop_holder(uid)
            except (OSError, ValueError) as error:
                print("node agent: holder of pod %s: %s" % (uid, error), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
