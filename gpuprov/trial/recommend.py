"""What a trial recommends: the replicas for the inventory, the vLLM memory setting at that
density, and, when no time-slicing step passed, the MIG (or MPS) layout `fit` proposes for
the same pods.
"""
import math

from gpuprov.trial.steps import sharing_yaml


def gpu_memory_utilization(replicas, margin):
    """vLLM's --gpu-memory-utilization for ``replicas`` pods per GPU, leaving ``margin`` free.

    The value is the fraction of the GPU's whole memory one vLLM instance takes, and it is a
    limit per instance: vLLM's regression test test_gpu_memory_utilization starts three
    instances at 0.3 on one GPU ("gpu_memory_utilization is per-instance limit, not a global
    limit"; vllm-project/vllm, the test's file path UNVERIFIED). The default 0.9 leaves no room
    for a second pod. N pods fit when each takes at most (1 - margin) / N; rounded down to two
    decimals.
    """
    return math.floor(100.0 * (1.0 - margin) / replicas) / 100.0


def host_vars_snippet(node, step, source_text):
    """The host_vars file that keeps ``step`` for ``node``."""
    return ("# host_vars/%s.yml: gpuprov trial %s found %d replicas per GPU within its SLOs.\n"
            "# Apply with: gpuprov apply -i INVENTORY -l %s\n" % (node, source_text, step.replicas, node)
            + sharing_yaml(step.sharing))


def fit_proposal(plan, pods):
    """The layout `fit` packs ``pods`` ([{"pod", "used_mib"}], what each used) into on the
    node's own GPUs: MIG instances (isolation hard) where every GPU model has MIG, else MPS
    shares. Returns a dict (``error`` set when fit finds none)."""
    from gpuprov import fit as fit_mod
    from gpuprov.fit.hosts import node_vars

    used = {}
    for entry in pods:
        used[entry["pod"]] = max(used.get(entry["pod"], 0.0), entry["used_mib"] or 0.0)
    if not used:
        return {"error": "dcgm-exporter maps no pod on the node's GPUs (pod labels), so there is nothing to pack"}
    counts = {}
    for gpu in plan["gpus"]:
        counts[gpu["model"]] = counts.get(gpu["model"], 0) + 1
    from ansible_collections.gpuprov.gpu.plugins.plugin_utils import catalog

    mig = all(catalog.lookup(model).mig_capable for model in counts)
    workloads = [{"name": pod, "memory": "%dMiB" % max(1, math.ceil(mib)), "isolation": "hard" if mig else "soft"}
                 for pod, mib in sorted(used.items())]
    data = {"workloads": workloads,
            "pool": [{"model": model, "count": n, "gpus_per_node": n} for model, n in counts.items()]}
    method = "mig" if mig else "mps"
    try:
        wanted, pool = fit_mod.parse_input(data, "the pods on %s" % plan["node_name"] if "node_name" in plan else "pods")
        result = fit_mod.fit(wanted, pool, soft_sharing="time-slicing" if mig else "mps")
    except fit_mod.FitInputError as exc:
        return {"method": method, "workloads": workloads, "error": "; ".join(exc.problems)}
    except fit_mod.NoFit as exc:
        return {"method": method, "workloads": workloads, "error": exc.reason}
    gpus = [{"gpu": gpu.index, "sharing": gpu.sharing, "workloads": fit_mod.gpu_lines(gpu)} for gpu in result.gpus]
    sharing = [node_vars(node)["gpuprov_sharing"] for node in result.nodes]
    return {"method": method, "workloads": workloads, "gpus": gpus,
            "gpuprov_sharing": sharing[0] if len(sharing) == 1 else sharing}
