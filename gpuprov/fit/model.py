"""The fit input as data (workloads, pool entries), its vocabulary, and the two errors."""


DEFAULT_GPUS_PER_NODE = 8
WORKLOAD_KEYS = ("name", "memory", "compute", "isolation", "replicas")
POOL_KEYS = ("model", "count", "gpus_per_node")
SOFT_SHARING = ("time-slicing", "mps")
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
    __slots__ = ("name", "memory_mib", "compute", "hard", "replicas")

    def __init__(self, name, memory_mib, compute=None, hard=False, replicas=1):
        self.name = name
        self.memory_mib = memory_mib
        self.compute = compute
        self.hard = hard
        self.replicas = replicas

    @property
    def isolation(self):
        return "hard" if self.hard else "soft"


class PoolEntry:
    __slots__ = ("model", "count", "gpus_per_node", "field")

    def __init__(self, model, count=None, gpus_per_node=None, field="pool"):
        self.model = model
        self.count = count                  # None: unlimited
        self.gpus_per_node = gpus_per_node  # None: not given (hosts group up to 8 used GPUs)
        self.field = field
