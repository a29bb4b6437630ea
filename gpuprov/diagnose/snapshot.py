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
