"""Why do pods queue beside idle GPUs?

Pure logic behind `gpuprov diagnose` and `gpuprov baseline`: load and validate a cluster
snapshot, run the checks in a fixed order and stop at the first that explains what is seen,
and build a report (plain dicts and lists, ready for JSON).

The order is the one operators learn the hard way:

1. allocation  every GPU resource on the node is requested by a running pod: sharing
               (time-slicing, MIG) adds slots, sized here from the memory headroom.
2. memory      the node is fully allocated and its GPU memory is (nearly) full, so a
               second copy of the current work would not fit: time-slicing will not help.
3. placement   GPUs are free, but the Pending pods may not go there (node selector, node
               affinity, taints, a cordoned node, a request larger than any node).
4. application running pods hold GPUs but keep them idle: SM activity cycles between 0
               and high (CPU-bound input pipeline) or stays low while memory is in use (I/O-
               or network-bound). More GPUs will not help.

Inputs (see docs/diagnose.md for the full description):

- ``nodes.json``, ``pods.json``, ``events.json``: ``kubectl get nodes|pods -A|events -A -o json``.
- ``facts/<node>.json`` (optional): gpu_facts output, the bare ``{"gpus": [...]}`` object, or
  the module result ``{"gpu_facts": {...}}`` / ``{"ansible_facts": {"gpu_facts": {...}}}``.
  ``ansible --tree`` writes the same result to ``facts/<node>`` (no extension); both work.
- ``utilization/<node>.csv`` (optional): what
  ``nvidia-smi --query-gpu=timestamp,index,name,memory.used,memory.total,utilization.gpu
  --format=csv,noheader,nounits -l 1`` writes on that node. A single ``utilization.csv`` is
  accepted too: with a node name as an extra first column, or without it when the snapshot
  has exactly one GPU node.

Nothing here prints: cmd_diagnose.py, cmd_pool.py and cmd_baseline.py do that. Only
`live_cluster` (the Kubernetes API) and `prometheus` (dcgm-exporter's series) talk to a cluster.

One concept per file: `snapshot` (the model) and its readers `kubernetes_objects`,
`gpu_facts`, `utilization`, `dra_objects` (ResourceSlices, ResourceClaims) and
`snapshot_loader`; `live_cluster` and `prometheus` (the same objects read live);
`scheduler_messages` and `placement` (what the scheduler says and does); `thresholds` and
`sizing`; the checks in `node_checks`, `pod_checks` and `dra_checks`; `remedies`; `report`
(the whole run); `html_report` (the report as one HTML page). The names the commands use
are re-exported here.
"""

from gpuprov.diagnose.kubernetes_objects import (  # noqa: F401
    parse_events,
    parse_nodes,
    parse_pods,
    pod_gpu_requests,
)
from gpuprov.diagnose.placement import node_affinity_matches, tolerates  # noqa: F401
from gpuprov.diagnose.report import CHECKS, SCHEMA, diagnose  # noqa: F401
from gpuprov.diagnose.scheduler_messages import parse_scheduler_message  # noqa: F401
from gpuprov.diagnose.sizing import format_gib, gpu_model, mig_cap_option, mig_option  # noqa: F401
from gpuprov.diagnose.snapshot import Node, Snapshot, SnapshotError  # noqa: F401
from gpuprov.diagnose.snapshot_loader import load_gpu_data, load_snapshot  # noqa: F401
from gpuprov.diagnose.thresholds import DEFAULT_MAX_REPLICAS, MEMORY_USABLE_FRACTION  # noqa: F401
from gpuprov.diagnose.utilization import (  # noqa: F401
    NVIDIA_SMI_QUERY,
    classify_sm,
    parse_utilization_csv,
    percentile,
    summarise_utilization,
)
