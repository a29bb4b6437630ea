#!/usr/bin/env python3
"""SSH test fleet: simulated GPU nodes that Ansible reaches over real SSH.

Each node is an sshd listening on its own loopback address (127.0.0.N:2222) inside its own
mount namespace. In that namespace the directories in PRIVATE_DIRS are bind mounts of the
node's folder under DIR/nodes/<name>/rootfs, so every node has its own /var/lib/kubelet,
/etc/systemd/system, MPS pipe directories, fake GPU state and fake sysfs tree, while the
rest of the file system (the repository, the virtualenv) is shared. The shell start-up files
in root's home are a plain Debian host's on every node (see _bind_plain_home), not this
machine's.

sshd passes the fake-tool variables of roles/fake_gpu_node/README.md to every session with SetEnv,
so a module that Ansible runs on a node imports the fake pynvml and finds the node's state.

Command line (run as root, from anywhere):

    python tests/fleet/fleet.py up --dir DIR --nodes 3        # or --nodes nodes.yml
    python tests/fleet/fleet.py status --dir DIR
    python tests/fleet/fleet.py inventory --dir DIR           # prints the inventory path
    python tests/fleet/fleet.py kill-node --dir DIR gpu02     # simulate a crashed node
    python tests/fleet/fleet.py start-node --dir DIR gpu02    # bring it back, same state
    python tests/fleet/fleet.py down --dir DIR [--clean]

The same operations are importable: Fleet.create(...), Fleet.load(dir), fleet.up(),
fleet.down(), fleet.kill_node(name), fleet.start_node(name), fleet.status().

Fleet.create(..., cluster=FleetCluster()) adds a fake Kubernetes cluster (the stub
kubernetes.core of tests/stubs; see FleetCluster): every GPU node then runs a device-plugin
pod whose process holds its GPUs, and the inventories give gpuprov a kubeconfig instead of
gpuprov_allow_undrained. Run Ansible with fleet.controller_env() so it finds the stubs.

`up` is not idempotent on purpose: on a fleet that is running it fails and says so (a test
must not silently reuse another test's nodes). On a fleet that was stopped with `down` it
starts the same nodes again with their saved state.
"""

from __future__ import annotations

import argparse
import dataclasses
import errno
import hashlib
import importlib.util
import json
import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
FAKES_BIN = REPO_ROOT / "roles" / "fake_gpu_node" / "files" / "bin"
FAKES_PYTHON = REPO_ROOT / "roles" / "fake_gpu_node" / "files" / "python"
FAKE_PYNVML = FAKES_PYTHON / "pynvml.py"
DEFAULT_FLEET_DIR = REPO_ROOT / ".fleet"

SSHD = "/usr/sbin/sshd"
SSH_PORT = 2222
FIRST_HOST_OCTET = 11
LAST_HOST_OCTET = 254
START_TIMEOUT_S = 20.0
STOP_TIMEOUT_S = 10.0

# The root user's PATH on Debian (/etc/profile); the fake tools go in front of it.
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

# Where a node keeps its fake hardware and daemon state (inside its namespace).
FAKE_ROOT = "/var/lib/gpuprov-fake"
FAKE_SYSFS = FAKE_ROOT + "/sys"

# Directories every node gets a private copy of. Each one is a bind mount of
# NODE_DIR/rootfs/<path> over <path>; add a path here to isolate it as well.
PRIVATE_DIRS = (
    "/var/lib/kubelet",
    "/etc/systemd/system",
    "/etc/gpuprov",
    "/run/gpuprov",
    # MPS pipe/log roots: the device plugin's and GPU Operator's mps.root default, a flat
    # variant, and CUDA_MPS_PIPE_DIRECTORY's own default. A control daemon on one node
    # must never see another node's pipes.
    "/run/nvidia/mps",
    "/run/nvidia-mps",
    "/tmp/nvidia-mps",
    FAKE_ROOT,
    # Login shells reset PATH in /etc/profile; the node's copy of profile.d puts the fake
    # tools back in front (see _write_profile_d).
    "/etc/profile.d",
    # Where the roles install per-node programs, environment files and logs: the MIG boot
    # restore's code and program, the MPS unit's environment file and log directory.
    "/usr/local/lib/gpuprov",
    "/usr/local/libexec/gpuprov",
    "/etc/default",
    "/var/log/nvidia-mps",
    # gpuprov baseline's samples (each node records its own GPUs).
    "/var/lib/gpuprov",
)
# Private directories that start as a copy of the host's (their files are read by tools
# that also run on the node).
SEEDED_FROM_HOST = ("/etc/default",)

# Default GPU mixes for `--nodes N` (GPU catalog keys; A100-80GB is the A100-SXM4-80GB).
# Nodes past the end of this list combine two of these models (see default_node_specs),
# so no two nodes of a fleet look alike.
DEFAULT_MIXES = (
    ("A100-80GB", 2),
    ("H100-80GB", 4),
    ("T4", 1),
    ("L40S", 2),
    ("A100-SXM4-40GB", 8),
)

DRIVER_VERSION = "580.95.05"
CUDA_DRIVER_VERSION = 13000
MAX_GPUS_PER_NODE = 16
MAX_NUMA_NODES = 8
MEMORY_GIB_PER_CPU = 4
NODE_NAME_RE = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")
# Paths end up unquoted in sshd_config and ssh options, where spaces, quotes and
# %-tokens (AuthorizedKeysFile expands %h, %u, ...) would change their meaning.
UNSAFE_PATH_RE = re.compile(r"[\s\"'\\%#]")
# ssh appends ".<16 random chars>" to a ControlPath while it creates the master socket;
# a Unix socket path must stay under 108 bytes.
MAX_CONTROL_PATH_DIR = 70

STATE_FILE = "fleet.json"
CLIENT_KEY = "client_key"
KNOWN_HOSTS = "known_hosts"
INVENTORY = "inventory.yml"
CONNECTION_INVENTORY = "connection.yml"  # how to reach the nodes, nothing else
SSH_CONFIG = "ssh_config"
CONTROL_PATH_DIR = "cp"
NODES_DIR = "nodes"
CLUSTER_STATE = "cluster.json"  # the fake cluster's state (stub kubernetes.core modules)
CLUSTER_KUBECONFIG = "kubeconfig"
CLUSTER_CALL_LOG = "cluster-calls.jsonl"

# The stub kubernetes.core collection and its shared fake cluster (see its README).
K8S_STUBS = REPO_ROOT / "tests" / "stubs"
FAKE_CLUSTER = K8S_STUBS / "ansible_collections" / "kubernetes" / "core" / "plugins" / "module_utils" / "fake_cluster.py"
# NFD's label for a node with an NVIDIA PCI device (class 03xx, vendor 10de), which the
# device-plugin chart's affinity selects (see fake_cluster.node_labels).
NFD_NVIDIA_LABEL = "feature.node.kubernetes.io/pci-10de.present"
# A pod's process lives until the kubelet stops it (SIGTERM from the fake cluster) or the node
# goes down; a day is longer than any test.
POD_HOLDER_SECONDS = "86400"


class FleetError(Exception):
    """A problem the user can fix; the message says what happened and what to do."""


# --------------------------------------------------------------------------- node specs


@dataclasses.dataclass(frozen=True)
class GpuGroup:
    model: str
    count: int

    def to_dict(self):
        return {"model": self.model, "count": self.count}


@dataclasses.dataclass(frozen=True)
class NodeSpec:
    name: str
    gpus: tuple[GpuGroup, ...]
    numa_nodes: int
    cpus_per_numa: int
    threads_per_core: int = 2
    memory_gib_per_numa: int = 0  # 0: MEMORY_GIB_PER_CPU per CPU

    @property
    def numa_memory_gib(self):
        return self.memory_gib_per_numa or self.cpus_per_numa * MEMORY_GIB_PER_CPU

    @property
    def gpu_count(self):
        return sum(group.count for group in self.gpus)

    def describe_gpus(self):
        if not self.gpus:
            return "no GPUs"
        return ", ".join(f"{group.count}x {group.model}" for group in self.gpus)

    def to_dict(self):
        return {
            "name": self.name,
            "gpus": [group.to_dict() for group in self.gpus],
            "numa_nodes": self.numa_nodes,
            "cpus_per_numa": self.cpus_per_numa,
            "threads_per_core": self.threads_per_core,
            "memory_gib_per_numa": self.numa_memory_gib,
        }


@dataclasses.dataclass(frozen=True)
class FleetCluster:
    """The fake Kubernetes cluster of a fleet, and the GPU DaemonSet pod each GPU node runs.

    The pod's process (a `sleep` in the node's mount namespace) is a holder of every GPU of
    its node in the fake NVML state, so a GPU reset or an Ampere MIG mode change fails "In use
    by another client" while it runs. By default it is the device plugin's pod as gpuprov's
    chart deploys it: with the pause affinity (plugin_utils/gpu_operands.gpu_operand_affinity), so
    the DaemonSet controller of the fake cluster removes it, and the kubelet stops its process,
    once gpuprov labels the node gpuprov.io/gpu-operands=paused. pause_affinity=False, with
    another namespace and DaemonSet, is a GPU DaemonSet gpuprov did not deploy: it stays.

    `devices`: {node name: {resource: count}}, what the device plugin advertises when it
    (re)starts on that node (fake_cluster "devices"); the fake plugin does not read the node's
    GPUs, so a test that runs the cluster side gives the resources its plan expects.
    `physical_devices`: {node name: {resource: count}}, the devices the plugin finds instead:
    it advertises them through the node's device-plugin config (time-slicing replicas), so
    what the node advertises follows its config label.
    """

    pod_namespace: str = "nvidia-device-plugin"
    pod_daemonset: str = "nvidia-device-plugin"
    # app.kubernetes.io/instance: the chart's release name, which gpuprov waits on.
    pod_instance: str = "nvidia-device-plugin"
    pause_affinity: bool = True
    devices: dict = dataclasses.field(default_factory=dict)
    physical_devices: dict = dataclasses.field(default_factory=dict)

    def to_dict(self):
        return dataclasses.asdict(self)

    def pod_key(self, node_name):
        """"NS/NAME" of the node's pod; the suffix is stable per node, as in one run of a
        real DaemonSet."""
        suffix = hashlib.sha256(node_name.encode()).hexdigest()[:5]
        return f"{self.pod_namespace}/{self.pod_daemonset}-{suffix}"


def default_topology(gpu_count):
    """NUMA layout of a generated node: two sockets once it has more than one GPU."""
    numa_nodes = 2 if gpu_count >= 2 else 1
    cpus_per_numa = 32 if gpu_count > 4 else 16
    return numa_nodes, cpus_per_numa


def default_node_specs(count):
    """`count` nodes named gpu01, gpu02, ... with GPU mixes that differ from node to node.

    The first len(DEFAULT_MIXES) nodes get one mix each. After that, round r gives node j
    the mix j plus one GPU of model j+r, which keeps every node unique up to
    len(DEFAULT_MIXES)**2 nodes; beyond that the combinations repeat.
    """
    mixes = len(DEFAULT_MIXES)
    specs = []
    for i in range(count):
        base_model, base_count = DEFAULT_MIXES[i % mixes]
        gpus = [GpuGroup(base_model, base_count)]
        shift = (i // mixes) % mixes
        if shift:
            gpus.append(GpuGroup(DEFAULT_MIXES[(i + shift) % mixes][0], 1))
        total = sum(group.count for group in gpus)
        numa_nodes, cpus_per_numa = default_topology(total)
        specs.append(NodeSpec(f"gpu{i + 1:02d}", tuple(gpus), numa_nodes, cpus_per_numa,
                              memory_gib_per_numa=cpus_per_numa * MEMORY_GIB_PER_CPU))
    return specs


def _positive_int(value, where, minimum=1, maximum=None):
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise FleetError(f"{where} must be an integer >= {minimum}, got {value!r}")
    if maximum is not None and value > maximum:
        raise FleetError(f"{where} must be at most {maximum}, got {value}")
    return value


NODE_FIELDS = ("name", "gpus", "numa_nodes", "cpus_per_numa", "threads_per_core",
               "memory_gib_per_numa")


def _catalog():
    """The project's GPU catalog (plugin_utils), importable with or without the root conftest."""
    try:
        from ansible_collections.gpuprov.gpu.plugins.plugin_utils import catalog
    except ImportError:
        sys.path.insert(0, str(REPO_ROOT / "collections"))
        from ansible_collections.gpuprov.gpu.plugins.plugin_utils import catalog
    return catalog


def _gpu_operand_affinity():
    """The node affinity gpuprov's charts give every GPU DaemonSet (plugin_utils/gpu_operands.py)."""
    _catalog()  # puts the collection on sys.path when the root conftest did not
    from ansible_collections.gpuprov.gpu.plugins.plugin_utils import gpu_operands

    return gpu_operands.gpu_operand_affinity()


def resolve_model(name, where):
    """The catalog key of a GPU model name (key, alias, nvidia-smi name or PCI id)."""
    catalog = _catalog()
    try:
        return catalog.lookup(name).key
    except catalog.UnknownModelError as exc:
        raise FleetError(f"{where}: {exc}") from None


def node_spec_from_dict(raw, where):
    """Validate one node entry of a spec file; every error names the entry and field."""
    if not isinstance(raw, dict):
        raise FleetError(f"{where} must be a mapping with name and gpus, got {raw!r}")
    unknown = sorted(set(raw) - set(NODE_FIELDS))
    if unknown:
        raise FleetError(f"{where}: unknown field(s) {', '.join(unknown)}; "
                         f"allowed: {', '.join(NODE_FIELDS)}")
    name = raw.get("name")
    if not isinstance(name, str) or not NODE_NAME_RE.match(name):
        raise FleetError(f"{where}.name must be a lower-case host name "
                         f"(letters, digits, '-'), got {name!r}")
    where = f"{where} ({name})"
    raw_gpus = raw.get("gpus", [])
    if not isinstance(raw_gpus, list):
        raise FleetError(f"{where}.gpus must be a list of {{model, count}}, got {raw_gpus!r}")
    gpus = []
    for j, group in enumerate(raw_gpus):
        gwhere = f"{where}.gpus[{j}]"
        if not isinstance(group, dict) or set(group) - {"model", "count"}:
            raise FleetError(f"{gwhere} must be a mapping with model and count, got {group!r}")
        model = group.get("model")
        if not isinstance(model, str) or not model:
            raise FleetError(f"{gwhere}.model must be a GPU model name, got {model!r}")
        model = resolve_model(model, f"{gwhere}.model")
        gpus.append(GpuGroup(model, _positive_int(group.get("count", 1), f"{gwhere}.count")))
    total = sum(group.count for group in gpus)
    if total > MAX_GPUS_PER_NODE:
        raise FleetError(f"{where} has {total} GPUs; a fleet node holds at most {MAX_GPUS_PER_NODE}")
    numa_default, cpus_default = default_topology(total)
    numa_nodes = _positive_int(raw.get("numa_nodes", numa_default), f"{where}.numa_nodes",
                               maximum=MAX_NUMA_NODES)
    threads = _positive_int(raw.get("threads_per_core", 2), f"{where}.threads_per_core", maximum=8)
    cpus = _positive_int(raw.get("cpus_per_numa", cpus_default), f"{where}.cpus_per_numa")
    if cpus % threads:
        raise FleetError(f"{where}.cpus_per_numa ({cpus}) must be a multiple of "
                         f"threads_per_core ({threads})")
    memory = _positive_int(raw.get("memory_gib_per_numa", cpus * MEMORY_GIB_PER_CPU),
                           f"{where}.memory_gib_per_numa")
    return NodeSpec(name, tuple(gpus), numa_nodes, cpus, threads, memory)


def parse_nodes_arg(value):
    """`--nodes`: a node count, or a YAML/JSON file with a list of nodes (or {nodes: [...]})."""
    if value.isdigit():
        count = int(value)
        limit = LAST_HOST_OCTET - FIRST_HOST_OCTET + 1
        if not 1 <= count <= limit:
            raise FleetError(f"--nodes {value}: a fleet has between 1 and {limit} nodes")
        return default_node_specs(count)
    path = Path(value)
    if not path.is_file():
        raise FleetError(f"--nodes {value}: neither a node count nor an existing YAML/JSON file")
    import yaml  # PyYAML reads JSON as well

    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise FleetError(f"{path}: not valid YAML/JSON: {exc}") from None
    if isinstance(data, dict) and "nodes" in data:
        data = data["nodes"]
    if not isinstance(data, list) or not data:
        raise FleetError(f"{path}: expected a non-empty list of nodes "
                         "(each {name, gpus: [{model, count}], numa_nodes, cpus_per_numa})")
    specs = [node_spec_from_dict(raw, f"{path}: nodes[{i}]") for i, raw in enumerate(data)]
    seen = set()
    for spec in specs:
        if spec.name in seen:
            raise FleetError(f"{path}: node name {spec.name!r} appears more than once")
        seen.add(spec.name)
    return specs


# --------------------------------------------------------------------- fake node content


def _load_fake_pynvml():
    """The fake pynvml of roles/fake_gpu_node/files/python, under a private name so that the harness
    process keeps whatever `pynvml` it imports itself."""
    name = "_gpuprov_fleet_fake_pynvml"
    if name in sys.modules:
        return sys.modules[name]
    if not FAKE_PYNVML.is_file():
        raise FleetError(f"{FAKE_PYNVML} is missing; the fleet writes each node's GPU state "
                         "with its new_state()")
    spec = importlib.util.spec_from_file_location(name, FAKE_PYNVML)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # the fake looks itself up in sys.modules while it loads
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        del sys.modules[name]
        raise FleetError(f"{FAKE_PYNVML} failed to import: {exc!r}") from exc
    return module


def _load_fake_cluster():
    """The stub kubernetes.core's fake cluster module, under a private name (the real
    kubernetes.core may be importable in this process)."""
    name = "_gpuprov_fleet_fake_cluster"
    if name in sys.modules:
        return sys.modules[name]
    if not FAKE_CLUSTER.is_file():
        raise FleetError(f"{FAKE_CLUSTER} is missing; a fleet with a cluster needs the stub kubernetes.core")
    spec = importlib.util.spec_from_file_location(name, FAKE_CLUSTER)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def gpu_uuid(node_name, index):
    """A stable GPU UUID, unique across the fleet: the same node and index give the same
    UUID in every run, and two nodes with the same GPUs still differ."""
    return "GPU-" + str(uuid.uuid5(uuid.NAMESPACE_URL, f"gpuprov-fleet/{node_name}/{index}"))


def sysfs_pci_name(bus_id):
    """The sysfs name of an NVML bus id: "00000000:07:00.0" -> "0000:07:00.0"."""
    domain, rest = bus_id.split(":", 1)
    return f"{int(domain, 16):04x}:{rest.lower()}"


def initial_nvml_state(node_name, gpus, numa_nodes=1):
    """The fake NVML state of a node fresh from the factory: driver loaded, MIG off,
    compute mode DEFAULT, no GPU instances, no processes.

    The fake pynvml's own new_state() builds it (the model table comes from the GPU
    catalog); only the UUIDs are replaced by per-node ones, since new_state derives them
    from index and model alone and every node with the same GPUs would share them.
    GPUs are spread over the NUMA nodes in index order (first half on node 0, ...).
    """
    fake = _load_fake_pynvml()
    state = fake.new_state([(group.model, group.count) for group in gpus], numa_nodes=numa_nodes,
                           driver_version=DRIVER_VERSION, cuda_driver_version=CUDA_DRIVER_VERSION)
    for gpu in state["gpus"]:
        gpu["uuid"] = gpu_uuid(node_name, gpu["index"])
    if state["gpus"]:
        # As on a real GPU node, nvidia-persistenced runs and holds every GPU open (with
        # persistence mode on; INITIAL_SYSTEMD_STATE has the unit): the driver's own reset in
        # an Ampere MIG mode change stays pending, and nvidia-smi -r, which reaches the daemon
        # through its socket, has it let go of the GPUs it resets.
        state["holders"] = [dict(PERSISTENCED_HOLDER)]
    return state


def cpu_topology(spec):
    """Logical CPU ids per NUMA node and the thread siblings of every CPU.

    Numbering follows Linux on multi-socket x86 servers: first thread of every core on
    every node, then the second threads, so node 0 of 2x16 CPUs is "0-7,16-23" and CPU 0's
    sibling is CPU 16.
    """
    cores_per_node = spec.cpus_per_numa // spec.threads_per_core
    total_cores = cores_per_node * spec.numa_nodes
    node_cpus = {}
    siblings = {}
    for node in range(spec.numa_nodes):
        cpus = []
        for core in range(node * cores_per_node, (node + 1) * cores_per_node):
            threads = [t * total_cores + core for t in range(spec.threads_per_core)]
            for cpu in threads:
                siblings[cpu] = threads
            cpus.extend(threads)
        node_cpus[node] = sorted(cpus)
    return node_cpus, siblings


def format_cpulist(cpus):
    """[0, 1, 2, 5] -> "0-2,5", the format of sysfs cpulist files."""
    cpus = sorted(set(cpus))
    parts = []
    start = prev = None
    for cpu in cpus + [None]:
        if start is not None and cpu == prev + 1:
            prev = cpu
            continue
        if start is not None:
            parts.append(str(start) if start == prev else f"{start}-{prev}")
        start = prev = cpu
    return ",".join(parts)


def format_cpumask(cpus, total):
    """sysfs cpumap format: hex mask in comma-separated 32-bit words, highest word first."""
    mask = sum(1 << cpu for cpu in cpus)
    words = max(1, (total + 31) // 32)
    return ",".join(f"{(mask >> (32 * w)) & 0xFFFFFFFF:08x}" for w in reversed(range(words)))


def _write_file(path, content, mode=0o644):
    """Write atomically: a temp file in the same folder, then rename over the target."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(content)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def write_fake_sysfs(sys_root, spec, gpus):
    """NUMA nodes, CPU topology and GPU PCI devices under sys_root, laid out like /sys.

    `gpus` are the GPU entries of the node's NVML state (pci_bus_id, numa_node).
    """
    sys_root = Path(sys_root)
    node_cpus, siblings = cpu_topology(spec)
    total = sum(len(cpus) for cpus in node_cpus.values())
    all_cpus = format_cpulist(range(total))
    all_nodes = format_cpulist(range(spec.numa_nodes))
    node_root = sys_root / "devices" / "system" / "node"
    cpu_root = sys_root / "devices" / "system" / "cpu"
    for name in ("online", "possible", "has_cpu", "has_memory", "has_normal_memory"):
        _write_file(node_root / name, all_nodes + "\n")
    for name in ("online", "possible", "present"):
        _write_file(cpu_root / name, all_cpus + "\n")
    for node, cpus in node_cpus.items():
        node_dir = node_root / f"node{node}"
        _write_file(node_dir / "cpulist", format_cpulist(cpus) + "\n")
        _write_file(node_dir / "cpumap", format_cpumask(cpus, total) + "\n")
        distances = ["10" if other == node else "21" for other in range(spec.numa_nodes)]
        _write_file(node_dir / "distance", " ".join(distances) + "\n")
        # The kernel's format (drivers/base/node.c); readers look for MemTotal.
        total_kb = spec.numa_memory_gib * 1024 * 1024
        _write_file(node_dir / "meminfo",
                    f"Node {node} MemTotal:       {total_kb:8d} kB\n"
                    f"Node {node} MemFree:        {total_kb * 9 // 10:8d} kB\n"
                    f"Node {node} MemUsed:        {total_kb - total_kb * 9 // 10:8d} kB\n")
        for cpu in cpus:
            topo = cpu_root / f"cpu{cpu}" / "topology"
            sibling_list = format_cpulist(siblings[cpu]) + "\n"
            package_list = format_cpulist(cpus) + "\n"
            _write_file(topo / "thread_siblings_list", sibling_list)
            _write_file(topo / "core_cpus_list", sibling_list)
            _write_file(topo / "core_siblings_list", package_list)
            _write_file(topo / "package_cpus_list", package_list)
            _write_file(topo / "core_id", f"{min(siblings[cpu]) % (total // spec.threads_per_core)}\n")
            _write_file(topo / "physical_package_id", f"{node}\n")
            for link, target in ((cpu_root / f"cpu{cpu}" / f"node{node}", f"../node/node{node}"),
                                 (node_dir / f"cpu{cpu}", f"../../cpu/cpu{cpu}")):
                if not link.is_symlink():
                    link.symlink_to(target)
    for gpu in gpus:
        device = sys_root / "bus" / "pci" / "devices" / sysfs_pci_name(gpu["pci_bus_id"])
        _write_file(device / "vendor", "0x10de\n")
        _write_file(device / "class", "0x030200\n")
        _write_file(device / "numa_node", f"{gpu['numa_node']}\n")
        _write_file(device / "local_cpulist", format_cpulist(node_cpus[gpu["numa_node"]]) + "\n")


# What `kubeadm join` leaves in /var/lib/kubelet/config.yaml (v1.31, defaults made
# explicit the way kubeadm writes them). UNVERIFIED: reproduced from kubeadm output seen on
# nodes, not checked field by field against kubeadm's source.
KUBEADM_KUBELET_CONFIG = """\
apiVersion: kubelet.config.k8s.io/v1beta1
authentication:
  anonymous:
    enabled: false
  webhook:
    cacheTTL: 0s
    enabled: true
  x509:
    clientCAFile: /etc/kubernetes/pki/ca.crt
authorization:
  mode: Webhook
  webhook:
    cacheAuthorizedTTL: 0s
    cacheUnauthorizedTTL: 0s
cgroupDriver: systemd
clusterDNS:
- 10.96.0.10
clusterDomain: cluster.local
containerRuntimeEndpoint: ""
cpuManagerReconcilePeriod: 0s
evictionPressureTransitionPeriod: 0s
fileCheckFrequency: 0s
healthzBindAddress: 127.0.0.1
healthzPort: 10248
httpCheckFrequency: 0s
imageMaximumGCAge: 0s
imageMinimumGCAge: 0s
kind: KubeletConfiguration
logging:
  flushFrequency: 0
  options:
    json:
      infoBufferSize: "0"
    text:
      infoBufferSize: "0"
  verbosity: 0
memorySwap: {}
nodeStatusReportFrequency: 0s
nodeStatusUpdateFrequency: 0s
rotateCertificates: true
runtimeRequestTimeout: 0s
shutdownGracePeriod: 0s
shutdownGracePeriodCriticalPods: 0s
staticPodPath: /etc/kubernetes/manifests
streamingConnectionIdleTimeout: 0s
syncFrequency: 0s
volumeStatsAggPeriod: 0s
"""

KUBEADM_FLAGS_ENV = (
    'KUBELET_KUBEADM_ARGS="--container-runtime-endpoint=unix:///var/run/containerd/containerd.sock '
    '--pod-infra-container-image=registry.k8s.io/pause:3.10"\n'
)

# The checkpoint a kubelet with cpuManagerPolicy none writes (checksum as seen on real nodes).
CPU_MANAGER_STATE_NONE = '{"policyName":"none","defaultCpuSet":"","checksum":1353318690}'

# The fake systemd of a node that `kubeadm join` set up: the kubelet runs and is enabled.
# Format: roles/fake_gpu_node/files/bin/systemctl (units seeded by writing its state file).
KUBELET_STATUS = f"{FAKE_ROOT}/kubelet-status.json"
KUBELET_HEALTHZ_PORT = 10248
KUBELET_BOOT = ["fake-kubelet", "boot", "--config", "/var/lib/kubelet/config.yaml",
                "--root-dir", "/var/lib/kubelet", "--status", KUBELET_STATUS]
# The daemon's socket lies in the node's private FAKE_ROOT (the real one: /run/nvidia-persistenced/socket).
PERSISTENCED_SOCKET = FAKE_ROOT + "/nvidia-persistenced/socket"
PERSISTENCED_HOLDER = {"name": "nvidia-persistenced", "unit": "nvidia-persistenced.service", "persistence": True,
                       "socket": PERSISTENCED_SOCKET}
INITIAL_SYSTEMD_STATE = {
    "units": {
        "nvidia-persistenced.service": {
            "active": True,
            "enabled": True,
            "description": "NVIDIA Persistence Daemon",
        },
        "kubelet.service": {
            "active": True,
            "enabled": True,
            "description": "kubelet: The Kubernetes Node Agent",
            # Every start runs the fake kubelet's start-up checks (checkpoints, reservation);
            # the node's /healthz server (started with sshd) reports the outcome.
            "exec_start_pre": [KUBELET_BOOT],
        },
    },
    "daemon_reload_count": 0,
}

PROFILE_SNIPPET = "gpuprov-fleet.sh"


def _write_profile_d(target):
    """The node's /etc/profile.d: the host's scripts plus one that restores the fake tools.

    sshd's SetEnv PATH reaches every non-login command (what Ansible runs), but a login
    shell starts from /etc/profile, which sets PATH from scratch before it reads profile.d.
    """
    target = Path(target)
    target.mkdir(parents=True, exist_ok=True)
    host = Path("/etc/profile.d")
    if host.is_dir():
        for entry in host.iterdir():
            if entry.is_file() and entry.name != PROFILE_SNIPPET:
                shutil.copy2(entry, target / entry.name)
    _write_file(target / PROFILE_SNIPPET, (
        "# gpuprov test fleet: /etc/profile reset PATH; put the fake GPU tools first again.\n"
        f'case ":$PATH:" in *":{FAKES_BIN}:"*) ;; *) PATH="{FAKES_BIN}:$PATH"; export PATH ;; esac\n'
    ))


def kubelet_peer():
    """The Go peer (tests/peers/build.py) whose kubelet code the nodes' fake kubelets run, or
    None when it is not built (they keep their own model then). GPUPROV_REQUIRE_PEERS=1, as in
    CI, makes a missing peer an error."""
    spec = importlib.util.spec_from_file_location(
        "gpuprov_peers_build", REPO_ROOT / "tests" / "peers" / "build.py")
    build = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(build)
    path = os.path.join(build.build_dir(), "peers")
    if os.access(path, os.X_OK):
        return path
    if os.environ.get("GPUPROV_REQUIRE_PEERS") == "1":
        raise FleetError(f"the Go peers are not built for these sources ({path}): run "
                         "python tests/peers/build.py")
    return None


def node_environment(name):
    """Variables sshd sets in every session of node `name` (see roles/fake_gpu_node/README.md)."""
    peer = kubelet_peer()
    return {
        "PATH": f"{FAKES_BIN}:{SYSTEM_PATH}",
        "PYTHONPATH": str(FAKES_PYTHON),
        "GPUPROV_FAKE_NVML_STATE": f"{FAKE_ROOT}/nvml.json",
        "GPUPROV_FAKE_MPS_STATE": f"{FAKE_ROOT}/mps.json",
        "GPUPROV_FAKE_SYSTEMD_STATE": f"{FAKE_ROOT}/systemd.json",
        "GPUPROV_FAKE_CALL_LOG": f"{FAKE_ROOT}/calls.jsonl",
        "GPUPROV_SYSFS_ROOT": FAKE_SYSFS,
        "GPUPROV_FLEET_NODE": name,
        **({"GPUPROV_KUBELET_PEER": peer} if peer else {}),
    }


# ------------------------------------------------------------------------------ processes


def _proc_state(pid):
    """The one-letter state of a process, or None if it does not exist."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as handle:
            stat = handle.read()
    except (FileNotFoundError, ProcessLookupError):
        return None
    return stat.rsplit(")", 1)[1].split()[0]


def pid_alive(pid):
    """True while `pid` runs. A zombie counts as dead: PID 1 here may never reap it."""
    return _proc_state(pid) not in (None, "Z", "X")


# sshd processes this Python process started (through the API); kept so that their exit
# status is collected once they stop, instead of leaving zombies behind.
_CHILDREN = {}


def _reap(pid):
    process = _CHILDREN.get(pid)
    if process is not None and process.poll() is not None:
        del _CHILDREN[pid]


def _cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            return [arg.decode(errors="replace") for arg in handle.read().split(b"\0") if arg]
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return []


def mount_namespace(pid):
    """The mount namespace of a process, e.g. "mnt:[4026532281]", or None."""
    try:
        return os.readlink(f"/proc/{pid}/ns/mnt")
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None


def processes_in_namespace(namespace):
    """Live pids whose mount namespace is `namespace`."""
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and mount_namespace(entry) == namespace and pid_alive(int(entry)):
            pids.append(int(entry))
    return sorted(pids)


def address_in_use(address, port):
    """True when something already listens on address:port."""
    probe = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    # sshd sets SO_REUSEADDR too, so connections in TIME_WAIT do not block it.
    probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        probe.bind((address, port))
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            return True
        raise FleetError(f"cannot bind {address}:{port}: {exc.strerror}") from None
    finally:
        probe.close()
    return False


def _accepts_connections(address, port):
    try:
        with socket.create_connection((address, port), timeout=1.0):
            return True
    except OSError:
        return False


def _tail(path, lines=8):
    try:
        text = Path(path).read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return ""
    return "\n".join("    " + line for line in text.strip().splitlines()[-lines:])


def check_prerequisites():
    """Root, sshd, ssh-keygen, unshare and mount: fail with what to install or do."""
    if os.geteuid() != 0:
        raise FleetError("the fleet must run as root: each node needs its own mount namespace "
                         "(unshare -m) and bind mounts; run it again as root (e.g. with sudo)")
    if not os.access(SSHD, os.X_OK):
        raise FleetError(f"{SSHD} not found: install the OpenSSH server with "
                         "`apt-get install openssh-server`")
    for tool, package in (("ssh-keygen", "openssh-client"), ("ssh", "openssh-client"),
                          ("unshare", "util-linux"), ("mount", "mount")):
        if shutil.which(tool) is None:
            raise FleetError(f"`{tool}` not found on PATH: install it with "
                             f"`apt-get install {package}`")


def _check_safe_path(path, what):
    if UNSAFE_PATH_RE.search(str(path)):
        raise FleetError(f"{what} {path} contains a space, quote, '#', '%' or backslash; "
                         "sshd_config and ssh options cannot carry it: use a plainer path")


# ----------------------------------------------------------------------------------- fleet


@dataclasses.dataclass
class Node:
    spec: NodeSpec
    address: str
    directory: Path

    @property
    def name(self):
        return self.spec.name

    @property
    def sshd_config(self):
        return self.directory / "sshd_config"

    @property
    def pid_file(self):
        return self.directory / "sshd.pid"

    @property
    def log_file(self):
        return self.directory / "sshd.log"

    @property
    def start_log(self):
        return self.directory / "start.log"

    @property
    def host_key(self):
        return self.directory / "ssh_host_ed25519_key"

    @property
    def rootfs(self):
        """Host-side view of the node's private directories."""
        return self.directory / "rootfs"

    def private_path(self, node_path):
        """Where a path inside the node's private directories lives on the host."""
        return self.rootfs / str(node_path).lstrip("/")

    def pid(self):
        """The pid of this node's sshd when it runs, else None."""
        try:
            pid = int(self.pid_file.read_text().strip())
        except (FileNotFoundError, ValueError):
            return None
        # sshd rewrites its process title into one string; look for our config in it.
        if pid_alive(pid) and str(self.sshd_config) in " ".join(_cmdline(pid)).split():
            return pid
        return None


class Fleet:
    """A set of simulated nodes kept in one directory (see the module docstring)."""

    def __init__(self, directory, nodes, python, port=SSH_PORT, cluster=None, control_plane=None, node_names=None):
        self.directory = Path(directory).resolve()
        self.nodes = nodes
        self.python = python
        self.port = port
        self.cluster = cluster  # a FleetCluster, or None: no cluster (nodes change undrained)
        # The folder of a running test control plane (tests/controlplane.py) the nodes register
        # with, as Node objects under node_names[name] (their gpuprov_node_name), or None.
        self.control_plane = str(control_plane) if control_plane is not None else None
        self.node_names = dict(node_names or {})
        if self.cluster is not None and self.control_plane is not None:
            raise FleetError("a fleet has either the stub cluster (cluster=) or a control plane (control_plane=), not both")

    # -- files of the fleet
    @property
    def state_file(self):
        return self.directory / STATE_FILE

    @property
    def client_key(self):
        return self.directory / CLIENT_KEY

    @property
    def known_hosts(self):
        return self.directory / KNOWN_HOSTS

    @property
    def inventory(self):
        return self.directory / INVENTORY

    @property
    def connection_inventory(self):
        return self.directory / CONNECTION_INVENTORY

    @property
    def ssh_config(self):
        return self.directory / SSH_CONFIG

    @property
    def control_path_dir(self):
        return self.directory / CONTROL_PATH_DIR

    @property
    def cluster_state_file(self):
        return self.directory / CLUSTER_STATE

    @property
    def kubeconfig(self):
        return self.directory / CLUSTER_KUBECONFIG

    @property
    def cluster_call_log(self):
        return self.directory / CLUSTER_CALL_LOG

    # -- construction
    @classmethod
    def create(cls, directory, specs, first_host=FIRST_HOST_OCTET, python=None, cluster=None, control_plane=None,
               node_names=None):
        """A new fleet description; nothing is written until up(). `cluster`: a FleetCluster
        to give the fleet the stub cluster with GPU-holding pods. `control_plane`: the folder of a
        running test control plane (tests/controlplane.py, ControlPlane.folder): up() registers
        every node there as a Node, under node_names.get(name, name), which the inventory sets
        as gpuprov_node_name; the node agent runs its pods (GPU pods hold its fake GPUs) and
        its device plugin advertises what the node's fake NVML has."""
        directory = Path(directory).resolve()
        if first_host < 1 or first_host + len(specs) - 1 > LAST_HOST_OCTET:
            raise FleetError(f"{len(specs)} nodes from 127.0.0.{first_host} do not fit in "
                             f"127.0.0.1-127.0.0.{LAST_HOST_OCTET}; lower --first-host or the count")
        nodes = [Node(spec, f"127.0.0.{first_host + i}", directory / NODES_DIR / spec.name)
                 for i, spec in enumerate(specs)]
        return cls(directory, nodes, python or sys.executable, cluster=cluster, control_plane=control_plane,
                   node_names=node_names)

    @classmethod
    def load(cls, directory):
        """The fleet saved in `directory` by an earlier up()."""
        directory = Path(directory).resolve()
        state_file = directory / STATE_FILE
        try:
            state = json.loads(state_file.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise FleetError(f"no fleet in {directory} ({STATE_FILE} is missing); start one with "
                             f"`fleet.py up --dir {directory} --nodes 3`") from None
        except ValueError as exc:
            raise FleetError(f"{state_file} is not valid JSON ({exc}); stop its sshd processes "
                             "by hand and remove the directory") from None
        try:
            nodes = []
            for raw in state["nodes"]:
                spec = NodeSpec(raw["name"], tuple(GpuGroup(**g) for g in raw["gpus"]),
                                raw["numa_nodes"], raw["cpus_per_numa"], raw["threads_per_core"],
                                raw["memory_gib_per_numa"])
                nodes.append(Node(spec, raw["address"], directory / NODES_DIR / spec.name))
            cluster = FleetCluster(**state["cluster"]) if state.get("cluster") is not None else None
            return cls(directory, nodes, state["python"], state["port"], cluster=cluster,
                       control_plane=state.get("control_plane"), node_names=state.get("node_names"))
        except (KeyError, TypeError) as exc:
            raise FleetError(f"{state_file} lacks {exc} (written by another version of fleet.py?); "
                             "stop its sshd processes by hand and remove the directory") from None

    @classmethod
    def exists(cls, directory):
        return (Path(directory) / STATE_FILE).is_file()

    def node(self, name):
        for node in self.nodes:
            if node.name == name:
                return node
        raise FleetError(f"no node {name!r} in the fleet in {self.directory}; "
                         f"its nodes are {', '.join(n.name for n in self.nodes)}")

    def _save_state(self):
        state = {
            "version": 1,
            "repo": str(REPO_ROOT),
            "python": self.python,
            "port": self.port,
            "nodes": [dict(node.spec.to_dict(), address=node.address) for node in self.nodes],
            "cluster": self.cluster.to_dict() if self.cluster is not None else None,
            "control_plane": self.control_plane,
            "node_names": self.node_names,
        }
        _write_file(self.state_file, json.dumps(state, indent=2) + "\n")

    # -- generated files
    def _ssh_keygen(self, key_path, comment):
        if key_path.exists():
            return
        result = subprocess.run(
            ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(key_path)],
            capture_output=True, text=True, check=False)
        if result.returncode != 0:
            raise FleetError(f"ssh-keygen could not create {key_path}: {result.stderr.strip()}")

    def _write_sshd_config(self, node):
        env = " ".join(f"{key}={value}" for key, value in node_environment(node.name).items())
        _write_file(node.sshd_config, "\n".join([
            f"# sshd of fleet node {node.name}; generated by tests/fleet/fleet.py",
            f"ListenAddress {node.address}:{self.port}",
            f"PidFile {node.pid_file}",
            f"HostKey {node.host_key}",
            f"AuthorizedKeysFile {self.client_key}.pub",
            # The fleet directory may live under /tmp (world-writable), which StrictModes
            # rejects for the authorized keys file; the key itself is ours.
            "StrictModes no",
            "UsePAM no",
            "PermitRootLogin prohibit-password",
            "PubkeyAuthentication yes",
            "PasswordAuthentication no",
            "KbdInteractiveAuthentication no",
            "PermitUserEnvironment no",
            "X11Forwarding no",
            "PrintMotd no",
            "PrintLastLog no",
            "Subsystem sftp internal-sftp",
            # sshd uses only the first SetEnv line, so every variable goes on this one.
            f"SetEnv {env}",
            "",
        ]))

    def _node_public_key(self, node):
        return " ".join(Path(f"{node.host_key}.pub").read_text().split()[:2])

    def _write_client_files(self):
        _write_file(self.known_hosts, "".join(
            f"[{node.address}]:{self.port} {self._node_public_key(node)}\n" for node in self.nodes))
        _write_file(self.ssh_config, "".join(
            f"Host {node.name}\n"
            f"    HostName {node.address}\n"
            f"    Port {self.port}\n"
            "    User root\n"
            f"    IdentityFile {self.client_key}\n"
            "    IdentitiesOnly yes\n"
            f"    UserKnownHostsFile {self.known_hosts}\n"
            "    StrictHostKeyChecking yes\n"
            for node in self.nodes))
        import yaml

        common_args = (f"-o UserKnownHostsFile={self.known_hosts} -o StrictHostKeyChecking=yes "
                       "-o IdentitiesOnly=yes")
        hosts = {}
        for node in self.nodes:
            host = {
                "ansible_host": node.address,
                "ansible_port": self.port,
                "ansible_user": "root",
                "ansible_ssh_private_key_file": str(self.client_key),
                "ansible_ssh_common_args": common_args,
                "ansible_python_interpreter": self.python,
            }
            # A fleet-local ControlPath keeps a stale master of another fleet on the same
            # address from ever being reused; long directories fall back to ~/.ansible/cp.
            if len(str(self.control_path_dir)) <= MAX_CONTROL_PATH_DIR:
                host["ansible_control_path_dir"] = str(self.control_path_dir)
            # Modules that read sysfs look at the node's fake tree.
            host["gpuprov_sysfs_root"] = FAKE_SYSFS
            # Nodes share the host's network: each kubelet answers /healthz on its own address.
            host["gpuprov_kubelet_healthz_host"] = node.address
            if self.node_names.get(node.name, node.name) != node.name:
                host["gpuprov_node_name"] = self.node_names[node.name]
            if self.cluster is None and self.control_plane is None:
                # Without a cluster no node can be drained: MIG and host-MPS changes run with
                # the nodes' pods in place, by explicit opt-in.
                host["gpuprov_allow_undrained"] = True
            # systemd runs unit commands by absolute path: the MPS unit must name the fake.
            host["gpu_mps_control_binary"] = str(FAKES_BIN / "nvidia-cuda-mps-control")
            hosts[node.name] = host
        header = (f"# Inventory of the test fleet in {self.directory}.\n"
                  "# Generated by tests/fleet/fleet.py on every `up`; edits are overwritten.\n")
        # With a cluster, the kubeconfig goes to the group all: the nodes drain through it, and
        # the cluster play runs on the controller's implicit localhost, which takes the
        # variables of all but of no host.
        group_vars = {"gpuprov_kubeconfig": str(self.kubeconfig)} if self.cluster is not None else {}
        if self.control_plane is not None:
            group_vars = {"gpuprov_kubeconfig": self._plane().kubeconfig}
        # connection.yml: how to reach the nodes only, to combine with an inventory that says
        # what the nodes should be (ansible-playbook -i examples/inventory.yml -i connection.yml).
        connection = {"all": {"hosts": hosts}}
        if group_vars:
            connection["all"]["vars"] = group_vars
        _write_file(self.connection_inventory, header + yaml.safe_dump(connection, sort_keys=False))
        for node in self.nodes:
            hosts[node.name] = dict(hosts[node.name],
                                    gpuprov_gpus=[group.to_dict() for group in node.spec.gpus])
        inventory = {"all": {"children": {"gpu_nodes": {"hosts": hosts}}}}
        if group_vars:
            inventory["all"]["vars"] = group_vars
        _write_file(self.inventory, header + yaml.safe_dump(inventory, sort_keys=False))

    def _prepare_node(self, node):
        """Keys, sshd_config and the node's private directories with their initial content."""
        node.directory.mkdir(parents=True, exist_ok=True)
        self._ssh_keygen(node.host_key, f"gpuprov-fleet-{node.name}")
        self._write_sshd_config(node)
        for path in PRIVATE_DIRS:
            node.private_path(path).mkdir(parents=True, exist_ok=True)
        _write_profile_d(node.private_path("/etc/profile.d"))
        for path in SEEDED_FROM_HOST:
            if os.path.isdir(path):
                shutil.copytree(path, node.private_path(path), symlinks=True, dirs_exist_ok=True)
        spec = node.spec
        nvml = initial_nvml_state(node.name, spec.gpus, spec.numa_nodes)
        # The fake pynvml's own format: an NVML session that changes nothing leaves the same bytes.
        _write_file(node.private_path(f"{FAKE_ROOT}/nvml.json"), json.dumps(nvml, indent=1, sort_keys=True) + "\n")
        _write_file(node.private_path(PERSISTENCED_SOCKET), "")
        write_fake_sysfs(node.private_path(FAKE_SYSFS), spec, nvml["gpus"])
        _write_file(node.private_path(f"{FAKE_ROOT}/systemd.json"),
                    json.dumps(INITIAL_SYSTEMD_STATE, indent=2) + "\n")
        kubelet = node.private_path("/var/lib/kubelet")
        _write_file(kubelet / "config.yaml", KUBEADM_KUBELET_CONFIG)
        _write_file(kubelet / "kubeadm-flags.env", KUBEADM_FLAGS_ENV)
        _write_file(kubelet / "cpu_manager_state", CPU_MANAGER_STATE_NONE, mode=0o600)

    # -- lifecycle
    def up(self, progress=None):
        """Write every node's files and start all nodes. Fails if any node already runs."""
        progress = progress or (lambda line: None)
        check_prerequisites()
        _check_safe_path(self.directory, "fleet directory")
        _check_safe_path(REPO_ROOT, "repository path")
        running = [f"{node.name} (pid {node.pid()})" for node in self.nodes if node.pid()]
        if running:
            raise FleetError(f"the fleet in {self.directory} is already up: {', '.join(running)} "
                             f"running. Use `fleet.py status --dir {self.directory}`, or "
                             f"`fleet.py down --dir {self.directory}` first")
        fresh = not self.state_file.exists()
        self.directory.mkdir(parents=True, exist_ok=True)
        self.control_path_dir.mkdir(mode=0o700, exist_ok=True)
        self._ssh_keygen(self.client_key, "gpuprov-fleet-client")
        for node in self.nodes:
            if fresh or not node.sshd_config.exists():
                self._prepare_node(node)
        self._write_client_files()
        self._save_state()
        started = []
        try:
            for i, node in enumerate(self.nodes, 1):
                pid = self._start(node)
                started.append(node)
                progress(f"[{i}/{len(self.nodes)}] {node.name:<8} {node.address}:{self.port}  "
                         f"{node.spec.describe_gpus()}  up (pid {pid})")
            if self.control_plane is not None:
                for node in self.nodes:
                    self._register(node)
                    progress(f"      {node.name:<8} registered as Node {self.node_names.get(node.name, node.name)}")
            if self.cluster is not None:
                self._write_cluster()
                for node in self.nodes:
                    holder = self._start_pod_holder(node)
                    if holder:
                        progress(f"      {node.name:<8} pod {self.cluster.pod_key(node.name)} holds its GPUs "
                                 f"(pid {holder})")
        except BaseException as exc:
            # Leave nothing half up: a fleet either starts whole or not at all.
            for node in started:
                self._stop(node, signal.SIGTERM)
            if not isinstance(exc, FleetError):
                raise
            stopped = f"; stopped the {len(started)} node(s) already started" if started else ""
            raise FleetError(f"{exc}{stopped}") from None

    def start_node(self, name):
        """Start one node again (after kill_node or down) with the state it had."""
        check_prerequisites()
        node = self.node(name)
        if node.pid():
            raise FleetError(f"node {name} is already running (pid {node.pid()})")
        pid = self._start(node)
        if self.cluster is not None:
            # The node's kubelet starts its DaemonSet pods again.
            self._start_pod_holder(node)
        if self.control_plane is not None:
            self._register(node)
        return pid

    def kill_node(self, name):
        """Simulate a crashed node: SIGKILL its sshd and everything in its namespace."""
        return self._stop(self.node(name), signal.SIGKILL)

    def down(self, clean=False, progress=None):
        """Stop every node; with clean=True also remove what up() wrote into the directory."""
        progress = progress or (lambda line: None)
        for node in self.nodes:
            if self.control_plane is not None:
                self._plane().remove_node(self.node_names.get(node.name, node.name))
            count = self._stop(node, signal.SIGTERM)
            progress(f"{node.name:<8} {node.address}:{self.port}  "
                     + (f"stopped ({count} process(es))" if count else "was not running"))
        if clean:
            self.remove_files()

    def remove_files(self):
        """Remove the fleet's own files; anything else in the directory stays."""
        shutil.rmtree(self.directory / NODES_DIR, ignore_errors=True)
        shutil.rmtree(self.control_path_dir, ignore_errors=True)
        for name in (STATE_FILE, CLIENT_KEY, CLIENT_KEY + ".pub", KNOWN_HOSTS, INVENTORY,
                     CONNECTION_INVENTORY, SSH_CONFIG, CLUSTER_STATE, CLUSTER_KUBECONFIG, CLUSTER_CALL_LOG):
            (self.directory / name).unlink(missing_ok=True)
        try:
            self.directory.rmdir()
        except OSError:
            pass  # the directory holds files of the user's: keep it

    def status(self):
        """One dict per node: name, address, state (running/stopped), pid, reachable, gpus."""
        rows = []
        for node in self.nodes:
            pid = node.pid()
            rows.append({
                "name": node.name,
                "address": f"{node.address}:{self.port}",
                "state": "running" if pid else "stopped",
                "pid": pid,
                "reachable": bool(pid) and _accepts_connections(node.address, self.port),
                "gpus": node.spec.describe_gpus(),
                "namespace": mount_namespace(pid) if pid else None,
            })
        return rows

    def node_namespace(self, name):
        """The mount namespace of a running node (None when it is down)."""
        pid = self.node(name).pid()
        return mount_namespace(pid) if pid else None

    # -- a test control plane (tests/controlplane.py)
    def _plane(self):
        sys.path.insert(0, str(REPO_ROOT / "tests"))
        try:
            from controlplane import ControlPlane
        finally:
            sys.path.pop(0)
        return ControlPlane.attach(self.control_plane)

    def _register(self, node):
        """The node joins the control plane: a Node under its Kubernetes name, with NFD's NVIDIA
        label when it has GPUs, its CPUs and memory, and its fake GPUs for the node agent."""
        spec = node.spec
        nvml = str(node.private_path(f"{FAKE_ROOT}/nvml.json"))
        labels = {NFD_NVIDIA_LABEL: "true"} if spec.gpu_count else {}
        self._plane().add_node(
            self.node_names.get(node.name, node.name), labels=labels, address=node.address,
            cpu=str(spec.numa_nodes * spec.cpus_per_numa), memory=f"{spec.numa_nodes * spec.memory_gib_per_numa}Gi",
            plugin={"nvml_state": nvml} if spec.gpu_count else None,
            holder={"nvml_state": nvml, "mount_pid_file": str(node.pid_file)} if spec.gpu_count else None)

    # -- the fake cluster (FleetCluster)
    def controller_env(self, base=None):
        """The environment Ansible (or `gpuprov apply`) needs on the controller to reach the
        cluster: with a control plane the real kubernetes.core and its kubeconfig; with the
        fake cluster the stub kubernetes.core first on the collections path, its state file
        and call log. `base`: the environment to extend (default os.environ)."""
        if self.control_plane is not None:
            return self._plane().ansible_env(base)
        if self.cluster is None:
            raise FleetError(f"the fleet in {self.directory} has no cluster; create it with "
                             "Fleet.create(..., cluster=FleetCluster()) or `up --cluster`")
        env = dict(os.environ if base is None else base)
        env.update({
            "ANSIBLE_COLLECTIONS_PATH": os.pathsep.join([str(K8S_STUBS), str(REPO_ROOT / "collections")]),
            "GPUPROV_FAKE_K8S_STATE": str(self.cluster_state_file),
            "GPUPROV_FAKE_CALL_LOG": str(self.cluster_call_log),
        })
        return env

    def cluster_state(self):
        """The fake cluster's state (tests/stubs/.../fake_cluster.py describes it)."""
        return json.loads(self.cluster_state_file.read_text(encoding="utf-8"))

    def node_device_plugin_config(self, name):
        """(config name, parsed config) the device plugin of node `name` loads now: its
        nvidia.com/device-plugin.config label (else the release's config.default), looked up in
        the release's config.map; (None, None) before the plugin is deployed or when the map
        lacks the config (config-manager then exits and the node has no plugin)."""
        import yaml

        fake = _load_fake_cluster()
        state = self.cluster_state()
        for release in state.get("releases", {}).values():
            if release.get("chart") != "nvidia-device-plugin":
                continue
            config_name = fake.node_config(state, release, name)
            text = (((release.get("values") or {}).get("config") or {}).get("map") or {}).get(config_name)
            if text is not None:
                return config_name, yaml.safe_load(text)
        return None, None

    def _save_cluster_state(self, state):
        _write_file(self.cluster_state_file, json.dumps(state, indent=1, sort_keys=True) + "\n")

    def _write_cluster(self):
        """The cluster as the nodes joined it: every node registered under its name, GPU
        nodes with NFD's NVIDIA label. A stopped fleet started again keeps its cluster."""
        if not self.kubeconfig.exists():
            # The stub modules never connect; the file is there because gpuprov passes it on.
            _write_file(self.kubeconfig, (
                "# Kubeconfig of the fake cluster of the test fleet (tests/fleet/fleet.py); the stub\n"
                "# kubernetes.core modules read GPUPROV_FAKE_K8S_STATE instead of connecting.\n"
                "apiVersion: v1\nkind: Config\ncurrent-context: fleet\n"
                "clusters:\n- name: fleet\n  cluster:\n    server: https://127.0.0.1:6443\n"
                "users:\n- name: fleet-admin\n  user: {}\n"
                "contexts:\n- name: fleet\n  context:\n    cluster: fleet\n    user: fleet-admin\n"), mode=0o600)
        if self.cluster_state_file.exists():
            return
        state = _load_fake_cluster().empty_state()
        for node in self.nodes:
            entry = {"labels": {"kubernetes.io/hostname": node.name}, "allocatable": {}}
            if node.spec.gpu_count:
                entry["labels"][NFD_NVIDIA_LABEL] = "true"
                entry["gpu"] = True
                if node.name in self.cluster.devices:
                    entry["devices"] = dict(self.cluster.devices[node.name])
                if node.name in self.cluster.physical_devices:
                    entry["physical_devices"] = dict(self.cluster.physical_devices[node.name])
            state["nodes"][node.name] = entry
        state["pods"] = {}
        self._save_cluster_state(state)

    def _start_pod_holder(self, node):
        """Run the node's GPU DaemonSet pod: a process in the node's mount namespace, listed
        as a holder of every GPU in the node's NVML state and as the pod's process
        (holder_pid) in the cluster state. Returns its pid, or None when the node has no GPUs
        or, like the DaemonSet controller, when the node does not match the pod's affinity."""
        sshd_pid = node.pid()
        if not node.spec.gpu_count or sshd_pid is None:
            return None
        fake = _load_fake_cluster()
        state = self.cluster_state()
        affinity = _gpu_operand_affinity() if self.cluster.pause_affinity else {}
        entry = state["nodes"].get(node.name)
        if entry is None or not fake.node_affinity_matches(affinity, fake.node_labels(entry)):
            return None
        # nsenter enters the namespace and execs sleep in the same process (no fork without
        # --pid), so the Popen pid is the pod's process; _stop's namespace sweep ends it.
        process = subprocess.Popen(["nsenter", f"--mount=/proc/{sshd_pid}/ns/mnt", "--", "sleep", POD_HOLDER_SECONDS],
                                   stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL, start_new_session=True)
        _CHILDREN[process.pid] = process
        deadline = time.monotonic() + START_TIMEOUT_S
        while not (_cmdline(process.pid)[:1] == ["sleep"]
                   and mount_namespace(process.pid) == mount_namespace(sshd_pid)):
            if process.poll() is not None or time.monotonic() >= deadline:
                process.kill()
                raise FleetError(f"{node.name}: the pod process (nsenter ... sleep) did not start in "
                                 f"the node's mount namespace (status {process.poll()})")
            time.sleep(0.01)
        pod_key = self.cluster.pod_key(node.name)
        holder = {"name": f"pod {pod_key}", "pid": process.pid}
        with _load_fake_pynvml().mutate_state(str(node.private_path(f"{FAKE_ROOT}/nvml.json"))) as nvml:
            nvml["holders"] = [h for h in nvml.get("holders", []) if h.get("name") != holder["name"]] + [holder]
        state.setdefault("pods", {})[pod_key] = {
            "nodeName": node.name, "phase": "Running", "holder_pid": process.pid,
            "owner": {"kind": "DaemonSet", "name": self.cluster.pod_daemonset},
            # The DaemonSet controller's label on every pod it makes; gpuprov's drain leaves such pods.
            "labels": {"app.kubernetes.io/instance": self.cluster.pod_instance, fake.TEMPLATE_GENERATION_LABEL: "1"},
            "affinity": affinity}
        self._save_cluster_state(state)
        return process.pid

    def _start(self, node):
        if address_in_use(node.address, self.port):
            raise FleetError(f"{node.name}: {node.address}:{self.port} is already in use (a node "
                             "of another fleet, or another sshd); stop it, or choose other "
                             "addresses with --first-host")
        if not Path("/run/sshd").is_dir():
            # sshd's privilege separation directory, normally made by its service unit.
            os.makedirs("/run/sshd", mode=0o755, exist_ok=True)
        for path in PRIVATE_DIRS:
            # A bind mount needs its mount point; on the host these stay empty directories.
            os.makedirs(path, exist_ok=True)
        node.pid_file.unlink(missing_ok=True)
        argv = ["unshare", "--mount", "--propagation", "private", "--",
                sys.executable, str(Path(__file__).resolve()), "_exec-node",
                "--node-dir", str(node.directory), "--address", node.address]
        with open(node.start_log, "ab") as log:
            process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log,
                                       stderr=subprocess.STDOUT, start_new_session=True)
        _CHILDREN[process.pid] = process
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise FleetError(
                    f"{node.name}: sshd exited during start (status {process.returncode}).\n"
                    f"  {node.start_log}:\n{_tail(node.start_log)}\n"
                    f"  {node.log_file}:\n{_tail(node.log_file)}")
            if node.pid() == process.pid and _accepts_connections(node.address, self.port):
                return process.pid
            time.sleep(0.05)
        self._stop(node, signal.SIGKILL, pid=process.pid)
        raise FleetError(f"{node.name}: sshd did not accept connections on {node.address}:"
                         f"{self.port} within {START_TIMEOUT_S:.0f} s; see {node.log_file}:\n"
                         f"{_tail(node.log_file)}")

    def _stop(self, node, sig, pid=None):
        """Signal every process in the node's mount namespace until none is left.

        Killing the listening sshd alone is not enough: open sessions (an SSH ControlPersist
        master keeps one) and daemons started on the node would survive it. What outlives
        STOP_TIMEOUT_S gets SIGKILL. Returns how many processes there were.
        """
        pid = pid or node.pid()
        if pid is None:
            node.pid_file.unlink(missing_ok=True)
            return 0
        namespace = mount_namespace(pid)
        # Never sweep our own namespace: that would kill the host's processes.
        sweep = namespace is not None and namespace != mount_namespace(os.getpid())
        signalled = {}
        deadline = time.monotonic() + STOP_TIMEOUT_S
        while True:
            alive = processes_in_namespace(namespace) if sweep else [p for p in [pid] if pid_alive(p)]
            if not alive:
                break
            if time.monotonic() >= deadline:
                if sig == signal.SIGKILL:
                    raise FleetError(f"{node.name}: process(es) {alive} survived SIGKILL (stuck "
                                     "in the kernel?); see `ps -o pid,stat,args -p "
                                     f"{','.join(map(str, alive))}`")
                sig = signal.SIGKILL
                deadline = time.monotonic() + STOP_TIMEOUT_S
            for target in alive:
                if signalled.get(target) != sig:
                    signalled[target] = sig
                    try:
                        os.kill(target, sig)
                    except ProcessLookupError:
                        pass
            time.sleep(0.05)
        for target in list(_CHILDREN):
            _reap(target)
        node.pid_file.unlink(missing_ok=True)
        return len(signalled)


# The shell start-up files of the SSH user's home that bash reads: ~/.bashrc for every command
# sshd runs (Debian builds bash so), the others for login shells.
HOME_SHELL_FILES = (".bashrc", ".profile", ".bash_profile", ".bash_login")
# What Debian's base-files package puts in root's home; a file it lacks stays empty on a node.
PLAIN_HOME_FILES = {".bashrc": "/usr/share/base-files/dot.bashrc", ".profile": "/usr/share/base-files/dot.profile"}


def _bind_plain_home(node_dir, home):
    """Give the node a plain host's shell start-up files in place of this machine's.

    Every command Ansible sends a node runs through bash, which reads the SSH user's ~/.bashrc;
    a developer's there (pyenv's init, for one: about 130 ms and a PATH whose shims run before
    the fake tools, about 150 ms more per fake call) would be paid by every task on every node,
    which no real node pays. Only files that exist are covered (a bind mount needs its target).
    """
    target_dir = Path(node_dir) / "home"
    target_dir.mkdir(parents=True, exist_ok=True)
    for name in HOME_SHELL_FILES:
        path = os.path.join(home, name)
        if not os.path.isfile(path) or os.path.islink(path):
            continue
        plain = PLAIN_HOME_FILES.get(name)
        content = Path(plain).read_text() if plain and os.path.isfile(plain) else ""
        _write_file(target_dir / name, content)
        subprocess.run(["mount", "--bind", str(target_dir / name), path], check=True)


def exec_node(node_dir, address=None):
    """Runs as `unshare --mount ... fleet.py _exec-node`: bind the private directories,
    then become the node's sshd (same pid, so the pid file and Popen agree)."""
    node_dir = Path(node_dir)
    parent_namespace = mount_namespace(os.getppid())
    if parent_namespace is None or mount_namespace(os.getpid()) == parent_namespace:
        raise FleetError("_exec-node must run in a new mount namespace (unshare --mount); "
                         "it would otherwise bind mounts over the host's directories")
    for path in PRIVATE_DIRS:
        source = node_dir / "rootfs" / path.lstrip("/")
        subprocess.run(["mount", "--bind", str(source), path], check=True)
    # The inventories of this fleet log in as root.
    _bind_plain_home(node_dir, pwd.getpwuid(0).pw_dir)
    if address:
        # The node's kubelet /healthz on its own address, seeing the node's private files.
        env = dict(os.environ, **node_environment(node_dir.name))
        subprocess.run(KUBELET_BOOT, env=env, check=True, stdout=subprocess.DEVNULL)
        subprocess.run(["fake-kubelet", "serve", "--daemonize", "--host", address,
                        "--port", str(KUBELET_HEALTHZ_PORT), "--status", KUBELET_STATUS,
                        "--unit", "kubelet.service", "--pid-file", f"{FAKE_ROOT}/healthz.pid",
                        "--port-file", f"{FAKE_ROOT}/healthz.port"],
                       env=env, check=True)
    os.execv(SSHD, [SSHD, "-D", "-f", str(node_dir / "sshd_config"), "-E", str(node_dir / "sshd.log")])


# ------------------------------------------------------------------------------------- CLI


def _print_status(fleet):
    rows = fleet.status()
    width = max(len("NODE"), *(len(row["name"]) for row in rows))
    print(f"{'NODE':<{width}}  {'ADDRESS':<16}  {'STATE':<8}  {'PID':>7}  GPUS")
    for row in rows:
        state = row["state"] if row["reachable"] or row["state"] == "stopped" else "no-answer"
        print(f"{row['name']:<{width}}  {row['address']:<16}  {state:<8}  "
              f"{row['pid'] or '-':>7}  {row['gpus']}")
    print(f"inventory: {fleet.inventory}")


def build_parser():
    parser = argparse.ArgumentParser(
        prog="fleet.py", description="Simulated GPU nodes reachable over real SSH (run as root).")
    sub = parser.add_subparsers(dest="command", required=True)

    def with_dir(command_parser):
        command_parser.add_argument("--dir", default=str(DEFAULT_FLEET_DIR),
                                    help="fleet directory (default: %(default)s)")
        return command_parser

    up = with_dir(sub.add_parser("up", help="create and start the nodes"))
    up.add_argument("--nodes", help="node count (default GPU mixes) or a YAML/JSON file of nodes; "
                                    "may be left out to restart a stopped fleet")
    up.add_argument("--first-host", type=int, default=None,
                    help=f"last octet of the first node's 127.0.0.N address (default {FIRST_HOST_OCTET})")
    up.add_argument("--python", default=None,
                    help="ansible_python_interpreter for the nodes (default: this Python, %(default)s)")
    up.add_argument("--cluster", action="store_true",
                    help="add a fake Kubernetes cluster: each GPU node runs a device-plugin pod that holds "
                         "its GPUs, and the inventory gets a kubeconfig (see FleetCluster)")
    up.add_argument("--control-plane", metavar="DIR",
                    help="register the nodes as Node objects with the test control plane started in DIR "
                         "(python tests/controlplane.py start --dir DIR); the inventory gets its kubeconfig")
    down = with_dir(sub.add_parser("down", help="stop every node"))
    down.add_argument("--clean", action="store_true",
                      help="also remove the fleet's files (keys, node state, inventory)")
    with_dir(sub.add_parser("status", help="show the nodes and whether they run"))
    with_dir(sub.add_parser("inventory", help="print the path of the Ansible inventory"))
    kill = with_dir(sub.add_parser("kill-node", help="kill a node's sshd (it becomes unreachable)"))
    kill.add_argument("name")
    start = with_dir(sub.add_parser("start-node", help="start a killed node again, same state"))
    start.add_argument("name")
    return parser


def _exec_node_command(argv):
    """The internal `_exec-node --node-dir DIR` step of starting a node (see _start)."""
    parser = argparse.ArgumentParser(prog="fleet.py _exec-node")
    parser.add_argument("--node-dir", required=True)
    parser.add_argument("--address")
    args = parser.parse_args(argv)
    exec_node(args.node_dir, args.address)


def _up_command(args):
    directory = Path(args.dir).resolve()
    specs = parse_nodes_arg(args.nodes) if args.nodes else None
    if Fleet.exists(directory):
        fleet = Fleet.load(directory)
        if specs is not None and [node.spec for node in fleet.nodes] != specs:
            raise FleetError(f"{directory} holds another fleet ({len(fleet.nodes)} nodes: "
                             f"{', '.join(n.name for n in fleet.nodes)}); leave out --nodes to "
                             f"restart it, or remove it first with `fleet.py down --dir "
                             f"{directory} --clean`")
        first = int(fleet.nodes[0].address.rsplit(".", 1)[1])
        if args.first_host is not None and args.first_host != first:
            raise FleetError(f"{directory} holds a fleet from 127.0.0.{first}; remove it with "
                             "`down --clean` to use other addresses")
        if args.python is not None and args.python != fleet.python:
            raise FleetError(f"{directory} holds a fleet for {fleet.python}; remove it with "
                             "`down --clean` to use another interpreter")
        if args.cluster and fleet.cluster is None:
            raise FleetError(f"{directory} holds a fleet without a cluster; remove it with "
                             "`down --clean` to start one with --cluster")
    elif specs is None:
        raise FleetError(f"no fleet in {directory} yet: say how many nodes with --nodes N "
                         "(or --nodes FILE)")
    else:
        fleet = Fleet.create(directory, specs, args.first_host or FIRST_HOST_OCTET, args.python,
                             cluster=FleetCluster() if args.cluster else None, control_plane=args.control_plane)
    fleet.up(progress=lambda line: print(line, flush=True))
    print(f"fleet up: {len(fleet.nodes)} node(s); inventory: {fleet.inventory}")
    if fleet.control_plane is not None:
        print("control plane: run Ansible with " + " ".join(
            f"{key}={value}" for key, value in fleet.controller_env(base={}).items()))
    if fleet.cluster is not None:
        env = fleet.controller_env(base={})
        print("fake cluster: run Ansible with " + " ".join(f"{key}={value}" for key, value in env.items()))


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    try:
        if argv[:1] == ["_exec-node"]:
            _exec_node_command(argv[1:])
            return 1  # not reached: exec_node becomes sshd
        args = build_parser().parse_args(argv)
        if args.command == "up":
            _up_command(args)
        elif args.command == "down":
            fleet = Fleet.load(args.dir)
            fleet.down(clean=args.clean, progress=lambda line: print(line, flush=True))
            if args.clean:
                print(f"removed the fleet's files from {fleet.directory}")
        elif args.command == "status":
            _print_status(Fleet.load(args.dir))
        elif args.command == "inventory":
            fleet = Fleet.load(args.dir)
            if not fleet.inventory.is_file():
                raise FleetError(f"{fleet.inventory} is missing; run `fleet.py up --dir {args.dir}`")
            print(fleet.inventory)
        elif args.command == "kill-node":
            count = Fleet.load(args.dir).kill_node(args.name)
            print(f"{args.name}: killed {count} process(es)" if count else f"{args.name}: was not running")
        elif args.command == "start-node":
            pid = Fleet.load(args.dir).start_node(args.name)
            print(f"{args.name}: up (pid {pid})")
    except FleetError as exc:
        print(f"fleet.py: error: {exc}", file=sys.stderr)
        return 1
    except subprocess.CalledProcessError as exc:
        print(f"fleet.py: error: {' '.join(exc.cmd)} failed with status {exc.returncode}",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
