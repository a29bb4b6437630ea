"""Pack workloads onto the fewest GPUs: sharing method, MIG layout and placements per GPU.

Users describe models ("Chat needs 10 GiB and hard isolation"), not slices. ``fit`` picks,
for every GPU it uses, one sharing method (a MIG layout, time-slicing, MPS, or the whole
GPU), puts every workload somewhere, and says which constraint bound the GPU count.

Units. MIG profile names say "gb" (``1g.10gb``) but the memory an instance really offers is
what nvidia-smi prints, in GiB: 1g.10gb on an A100-40GB holds 9.62 GiB. Sizes here follow
Kubernetes quantities, so nothing depends on a guess:

* a bare number (``memory: 10``) is GiB, the unit of nvidia-smi and of the GPU catalog;
* ``"10GiB"``/``"10Gi"`` is 10 x 2^30 bytes; ``"10GB"``/``"10G"`` is 10 x 10^9 bytes
  (9.31 GiB); ``Mi``/``MiB``, ``M``/``MB``, ``Ti``/``TiB`` and ``T``/``TB`` likewise.

A workload fits a MIG instance when its memory is at most the instance's GiB from the
catalog, so ``10`` (GiB) needs more than 1g.10gb on an A100-40GB while ``"10GB"`` fits it.

Sharing rules.

* ``isolation: hard`` workloads each get a MIG instance of their own, with memory (and
  compute slices) at least what they need. Only MIG-capable models host them.
* ``isolation: soft`` workloads may share a GPU without MIG: with time-slicing their memory
  adds up to at most the GPU's memory and their compute fractions (when given) to at most 1;
  with MPS (``soft_sharing="mps"``) the device plugin splits the GPU into equal shares, so
  each one must fit memory/N and compute 1/N. A soft workload may also take a MIG instance
  of its own on a MIG GPU, beside hard ones.
* A MIG instance is never time-sliced among several workloads. The device plugin's
  time-slicing on MIG nodes (``time_slicing_replicas``) applies to every MIG device of the
  node, so it would let pods into the hard-isolated instances too; ``fit`` never sets it.
* Media-extension profiles (``+me``) are never chosen: no workload asks for them and they
  hold no more than the plain 1g profile.
* One sharing method per GPU. Among packings with the fewest GPUs, ``fit`` prefers smaller
  GPUs (in mixed pools), then isolation: MIG instances over time-slicing for soft workloads,
  and a whole GPU over a one-instance MIG layout.

Search. Up to ``EXACT_LIMIT`` workload copies the result is a proven optimum: an exhaustive
search over subsets of workloads (the cheapest way to pack a set is one feasible GPU holding
its first workload plus the cheapest packing of the rest, memoised per set; copies of one
workload are interchangeable and searched once), where a GPU's MIG feasibility comes from
the valid layouts enumerated once per model with the placement solver, memoised by the
multiset of the workloads' acceptable profiles. Larger inputs get first-fit decreasing into
MIG layouts (from the same set of valid layouts) and onto shared GPUs, tried in a few
orders, then exact re-packs of the emptiest GPU with one or two others; such a result is
called optimal only when it meets a lower bound.

Lower bounds (every one is valid for every packing, so the largest is reported): memory
(all workloads / the biggest GPU), MIG granularity (hard workloads rounded up to their
smallest MIG profile, in memory slices), compute (slices or fractions), sums that count
compute slices on MIG GPUs and memory on shared ones (each GPU is one or the other),
per-GPU count limits (k workloads that each need more than 1/(c+1) of a GPU need k/c GPUs)
and Martello and Toth's L2 bound of bin packing.

Hosts. Each gets one ``gpuprov_sharing``, so the GPUs of a model are grouped by sharing
method into hosts of up to ``gpus_per_node`` GPUs (8 when the pool does not say); see
``group_nodes``.

Nothing here prints or exits; the CLI (``gpuprov.cmd_fit``) does.

One concept per file: `units`, `model` and `input_file` (the input); `mig_geometry` and
`packing_model` (what the search works on); `exact` and `heuristic` (the two searches);
`bounds`; `search` (the `fit` run); `hosts` and `report` (the output). The names the
command and the benchmark use are re-exported here.
"""

from gpuprov.fit.exact import EXACT_HARD_LIMIT, EXACT_LIMIT  # noqa: F401
from gpuprov.fit.heuristic import item_footprint  # noqa: F401
from gpuprov.fit.input_file import load_input, parse_input  # noqa: F401
from gpuprov.fit.mig_geometry import geometry  # noqa: F401
from gpuprov.fit.model import FitInputError, METHODS, NoFit, PoolEntry, SOFT_SHARING, Workload  # noqa: F401
from gpuprov.fit.packing_model import View, expand, prepare, shared_ok  # noqa: F401
from gpuprov.fit.report import as_dict, explanation, gpu_lines, inventory_text  # noqa: F401
from gpuprov.fit.search import fit  # noqa: F401
from gpuprov.fit.units import gib_text, parse_compute, parse_memory_mib  # noqa: F401
