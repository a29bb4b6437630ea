"""The fit input as data (workloads, pool entries), its vocabulary, and the two errors."""


DEFAULT_GPUS_PER_NODE = 8
WORKLOAD_KEYS = ("name", "memory", "compute", "isolation", "replicas", "gpus", "image", "cpu", "host_memory",
                 "autoscale")
AUTOSCALE_KEYS = ("metric", "target", "min")
POOL_KEYS = ("model", "count", "gpus_per_node", "numa_nodes", "cpu_manager_policy")
SOFT_SHARING = ("time-slicing", "mps", "hami")
# HAMi's default deviceSplitCount (chart values.yaml v2.10.0): at most this many workloads per GPU.
HAMI_SPLIT_COUNT = 10
METHODS = ("auto", "exact", "heuristic")


class FitInputError(Exception):
    """Bad input: ``problems`` holds one `WHERE: FIELD: reason` line each."""

    def __init__(self, problems):
        self.problems = list(problems)
        super().__init__("%d problem(s) in the fit input" % len(self.problems))


class NoFit(Exception):
    """The workloads are valid but do not fit the pool; ``reason`` says why."""

    def __init__(self, reason):
        self.reason = reason
        super().__init__(reason)


class Workload:
    """``memory_mib`` is the total; with ``gpus`` > 1 each of its whole GPUs holds an even share."""

    __slots__ = ("name", "memory_mib", "compute", "hard", "replicas", "gpus", "image", "cpu", "host_memory",
                 "autoscale")

    def __init__(self, name, memory_mib, compute=None, hard=False, replicas=1, gpus=1, image=None, cpu=None,
                 host_memory=None, autoscale=None):
        self.name = name
        self.memory_mib = memory_mib
        self.compute = compute
        self.hard = hard
        self.replicas = replicas
        self.gpus = gpus
        self.image = image
        self.cpu = cpu                  # CPU cores for `fit -o pods` (None: 1)
        self.host_memory = host_memory  # host memory quantity for `fit -o pods` (None: the default)
        # `fit -o pods` adds a HorizontalPodAutoscaler: {"metric", "target" (a quantity), "min"};
        # it scales between min and the replicas fit packed (None: no autoscaling).
        self.autoscale = autoscale

    @property
    def isolation(self):
        return "hard" if self.hard else "soft"


class PoolEntry:
    __slots__ = ("model", "count", "gpus_per_node", "field", "numa_nodes", "cpu_manager_policy")

    def __init__(self, model, count=None, gpus_per_node=None, field="pool", numa_nodes=None,
                 cpu_manager_policy="none"):
        self.model = model
        self.count = count                  # None: unlimited
        self.gpus_per_node = gpus_per_node  # None: not given (hosts group up to 8 used GPUs)
        self.field = field
        # NUMA nodes per host; GPUs split evenly and in index order among them (None: unknown).
        self.numa_nodes = numa_nodes
        # The nodes' kubelet CPU manager: static gives `fit -o pods` Guaranteed pods with whole CPUs.
        self.cpu_manager_policy = cpu_manager_policy
