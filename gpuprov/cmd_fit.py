"""`gpuprov fit`: pack workloads onto the fewest GPUs and write the inventory for them."""
import click

from gpuprov import fit as fit_mod
from gpuprov import options, render
from gpuprov.errors import fail_bad_input
from gpuprov.output_files import write_atomically


def fit_table(result, data):
    rows = []
    for number, gpu in enumerate(result.gpus):
        used = sum(i.memory_mib for i in gpu.items)
        rows.append([number, gpu.node, gpu.index, gpu.view.model.key, gpu.sharing, ", ".join(fit_mod.gpu_lines(gpu)),
                     fit_mod.gib_text(used), fit_mod.gib_text(gpu.view.memory_mib - used)])
    lines = [render.table(["GPU", "NODE", "IDX", "MODEL", "SHARING", "WORKLOADS", "USED GiB", "IDLE GiB"], rows)]
    by_model = {}
    for gpu in result.gpus:
        by_model[gpu.view.model.key] = by_model.get(gpu.view.model.key, 0) + 1
    lines.append("")
    lines.append("GPUs used: %d (%s) on %d node(s); idle memory %s GiB; %s" % (
        len(result.gpus), ", ".join("%d %s" % (n, m) for m, n in by_model.items()), len(result.nodes),
        fit_mod.gib_text(sum(g.view.memory_mib - sum(i.memory_mib for i in g.items) for g in result.gpus)),
        "optimal (%s)" % result.proof if result.optimal else "heuristic, lower bound %d" % result.lower_bound))
    lines.append("")
    lines.append("Why %d GPU%s:" % (len(result.gpus), "" if len(result.gpus) == 1 else "s"))
    lines.extend("  " + line for line in data["explanation"])
    if data["profile_choices"]:
        lines.append("")
        lines.append("MIG profile per workload (memory in GiB, as nvidia-smi shows it):")
        lines.extend("  " + line for line in data["profile_choices"])
    nodes = [n for n in result.nodes if n.spares]
    if nodes:
        lines.append("")
        lines.append("Idle GPUs on the pool's nodes: %s" % ", ".join("%s: %d" % (n.host, n.spares) for n in nodes))
    return "\n".join(lines)


@click.command()
@click.argument("workloads_file", metavar="WORKLOADS_FILE")
@options.output_option(["table", "json", "yaml", "inventory", "pods"],
                       help_text="table for people; json/yaml for tools; inventory: an Ansible inventory "
                                 "`gpuprov plan -i` reads; pods: one Deployment per workload with the resources "
                                 "and node fit chose.")
@click.option("-n", "--namespace", metavar="NAMESPACE", help="Namespace of the Deployments (-o pods).")
@options.catalog_option
@click.option("-w", "--write", "write_path", metavar="FILE",
              help="Write the output to FILE (atomically) instead of stdout.")
@click.option("--method", type=click.Choice(fit_mod.METHODS), default="auto", show_default=True,
              help="auto: exact search up to %d workload copies, heuristic above; exact: up to %d."
                   % (fit_mod.EXACT_LIMIT, fit_mod.EXACT_HARD_LIMIT))
@click.option("--soft-sharing", type=click.Choice(fit_mod.SOFT_SHARING), default="time-slicing", show_default=True,
              help="How soft workloads share a GPU without MIG. mps: equal shares, each workload must fit "
                   "memory/N and compute 1/N. hami: HAMi caps each workload's memory and cores "
                   "(up to 10 per GPU); pods ask for nvidia.com/gpumem and gpucores.")
def fit(workloads_file, output, write_path, method, soft_sharing, namespace, catalog_file):
    """Pack workloads onto the fewest GPUs and write the inventory for them.

    WORKLOADS_FILE (YAML or JSON) lists workloads and the GPU pool:

    \b
      workloads:
        - {name: Chat, memory: 10, isolation: hard}      # 10 GiB, own MIG instance
        - {name: Batch, memory: "16GB", compute: 0.5, replicas: 2}
      pool: {model: A100-SXM4-40GB, count: unlimited}    # or a list of {model, count, gpus_per_node}

    \b
    memory: a bare number is GiB, as nvidia-smi reports; "10GiB" is GiB, "10GB" is
      10^9 bytes (9.31 GiB). MIG profile names say "gb" but hold less: 1g.10gb on an
      A100-40GB is 9.62 GiB, so `memory: 10` needs a bigger profile and "10GB" fits.
    compute: a fraction of a GPU (0.5, "50%") or MIG compute slices ("3g", 3).
    isolation: hard = a MIG instance of its own; soft (default) = may share a GPU by
      time-slicing (or MPS) or take a MIG instance of its own.
    replicas: copies, each needing the memory.
    gpus: whole GPUs of one node per copy (tensor parallel); memory is the total, split
      evenly. With the pool's numa_nodes the GPUs share a NUMA node where there is room.
    image, cpu, host_memory: the container of `-o pods` (pool cpu_manager_policy: static
      gives Guaranteed pods with whole CPUs).

    Each GPU gets one sharing method: a MIG layout with placements, time-slicing or MPS, or
    the whole GPU. A MIG instance is never time-sliced: the device plugin would time-slice
    the hard-isolated instances of the node too. Hosts group up to gpus_per_node GPUs of a
    model (8 when not given) with one sharing method each, named fit-<model>-NN.

    The output says which constraint bound the GPU count (memory, MIG profile granularity,
    compute, per-GPU instance limits) and whether the count is proven optimal.

    Exit status: 0 when everything fits; 2 on bad input (every problem listed as
    `workload NAME: FIELD: reason`) or when the pool is too small.
    """
    from gpuprov.planning import PlanningFailed, load_user_catalog

    try:
        models_catalog = load_user_catalog(catalog_file)
    except PlanningFailed as exc:
        fail_bad_input(exc.problems)
    try:
        workloads, pool = fit_mod.load_input(workloads_file, models_catalog)
        result = fit_mod.fit(workloads, pool, method=method, soft_sharing=soft_sharing)
    except fit_mod.FitInputError as exc:
        fail_bad_input(exc.problems, header="gpuprov fit: %d problem(s) in %s; nothing was fitted:"
                       % (len(exc.problems), workloads_file))
    except fit_mod.NoFit as exc:
        fail_bad_input(["pool: %s" % exc.reason], header="gpuprov fit: the workloads of %s do not fit the pool:"
                       % workloads_file)
    data = fit_mod.as_dict(result, source=workloads_file)
    if output == "inventory":
        text = fit_mod.inventory_text(result, source=workloads_file)
    elif output == "pods":
        from gpuprov.fit.pods import pods_text

        text = pods_text(result, source=workloads_file, namespace=namespace)
    elif output == "json":
        text = render.to_json(data) + "\n"
    elif output == "yaml":
        text = render.to_yaml(data)
    else:
        text = fit_table(result, data) + "\n"
    if write_path:
        try:
            write_atomically(write_path, text)
        except OSError as exc:
            fail_bad_input(["%s: cannot write: %s" % (write_path, exc.strerror or exc)])
        click.echo("gpuprov fit: wrote %s (%d GPU(s) on %d node(s))" % (write_path, len(result.gpus),
                                                                       len(result.nodes)), err=True)
    else:
        click.echo(text, nl=False)
