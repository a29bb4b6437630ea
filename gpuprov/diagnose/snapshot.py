"""The snapshot model: what `diagnose` knows of a cluster, whatever it was read from."""

from dataclasses import dataclass, field


class SnapshotError(Exception):
    """Bad or missing input. Each problem reads `FILE: FIELD: what is wrong; what to do`."""

    def __init__(self, problems):
        self.problems = [problems] if isinstance(problems, str) else list(problems)
        super().__init__("\n".join(self.problems))


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
    # HAMi's per-GPU asks (nvidia.com/gpumem MiB, gpumem-percentage, gpucores %), largest per
    # container; not node resources, so they are not in `requests`.
    hami: dict = field(default_factory=dict)
    # DRA: spec.resourceClaims as [{name, claim, template}]; ``claim`` is the ResourceClaim's name
    # (for a template, the one status.resourceClaimStatuses names; "" until it is created).
    claims: list = field(default_factory=list)

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
    # Read from dcgm-exporter through Prometheus only (nvidia-smi's CSV has none of these):
    gpu_instance_id: str = ""     # MIG GPU instance id; "" for a whole GPU
    profile: str = ""             # MIG profile as the exporter names it (shown, never joined on)
    uuid: str = ""                # the parent GPU's UUID
    dram_active: float = None     # percent of cycles the memory interface was busy (DRAM_ACTIVE)
    pods: tuple = ()              # "namespace/pod" the exporter mapped the device to
    # Read live by `gpuprov top` only:
    processes: tuple = ()         # (pid, process name, used MiB) per compute process


@dataclass
class DraDevice:
    """A device of a ResourceSlice (the newest generation of its pool)."""
    node: str                 # spec.nodeName of its slice; "" for slices not bound to one node
    driver: str
    pool: str
    name: str
    attributes: dict = field(default_factory=dict)   # name (driver domain dropped) -> plain value
    capacity: dict = field(default_factory=dict)     # name -> MiB for memory, else the quantity text

    @property
    def key(self):
        return (self.driver, self.pool, self.name)

    @property
    def kind(self):
        """'gpu', 'mig 1g.10gb' (the driver's type and profile attributes), or the driver name."""
        kind = str(self.attributes.get("type") or self.driver)
        if self.attributes.get("profile"):
            kind += " %s" % self.attributes["profile"]
        return kind


@dataclass
class DraRequest:
    name: str
    device_class: str
    count: int                # devices for ExactCount; 0 for All
    selectors: list = field(default_factory=list)    # CEL expressions
    mode: str = "ExactCount"


@dataclass
class DraClaim:
    namespace: str
    name: str
    requests: list = field(default_factory=list)     # [DraRequest]
    allocated: list = field(default_factory=list)    # [(driver, pool, device)]
    node: str = ""            # the node its allocation is bound to
    reserved_for: list = field(default_factory=list)  # names of the pods that use it
    sharing: list = field(default_factory=list)      # sharing strategies of its opaque configs
    deleting: bool = False

    @property
    def key(self):
        return "%s/%s" % (self.namespace, self.name)


@dataclass
class Snapshot:
    nodes: list
    pods: list
    events: list
    facts: dict = field(default_factory=dict)          # node -> [GpuFact]
    utilization: dict = field(default_factory=dict)    # node -> [UtilizationSample]
    notes: list = field(default_factory=list)          # what could not be read, and why
    source: str = ""
    # DRA (resource.k8s.io/v1); None when they were not read (no file, or the API is not served).
    dra_devices: list = None                           # [DraDevice]
    dra_claims: list = None                            # [DraClaim]
