"""`gpuprov apply`: validate the plan, then converge the nodes with the site playbook."""
import sys

import click

from gpuprov import options, render
from gpuprov.plan_table import plan_table
from gpuprov.planning import load_plans
from gpuprov.errors import EXIT_FAILED, EXIT_OK, fail_bad_input
from gpuprov.runner import converge_limit, converge_variables, parse_waves, run_playbook


# Variables apply passes to the playbook from its own options; -e may not change them.
APPLY_VARS = {"gpuprov_waves": "use --waves", "gpuprov_wave_max_nodes": "use --wave-max-nodes",
              "gpuprov_max_fail_percentage": "use --max-fail-percentage",
              "gpuprov_hosts": "the planned GPU nodes; use --limit", "gpuprov_kubeconfig": "use --kubeconfig",
              "gpuprov_kube_context": "use --context"}


@click.command()
@options.inventory_options
@options.reading_options
@options.catalog_option
@click.option("--check", is_flag=True, help="Dry run: report per node what would change; change nothing.")
@click.option("--diff", is_flag=True, help="Show what changes (MIG instances kept/destroyed/created, kubelet keys, MPS limits).")
@click.option("--waves", default="1,10%,100%", show_default=True, metavar="N|P%,...",
              help="Rollout batches: a canary node first, then growing waves. The rollout stops at a failed wave.")
@click.option("--wave-max-nodes", type=click.IntRange(0), default=5, show_default=True, metavar="N",
              help="No wave larger than N nodes (0: no cap), so at most N nodes are drained at once "
              "whatever percentage a wave names; the last wave size repeats until every node ran.")
@click.option("--max-fail-percentage", type=click.IntRange(0, 100), default=0, show_default=True,
              help="Failed nodes a wave may have (in percent) before the rollout stops.")
@click.option("--kubeconfig", type=click.Path(dir_okay=False), help="Drain/uncordon nodes and deploy the cluster side "
              "with this kubeconfig. Without it nodes are not drained (a warning says so) and the cluster side is skipped.")
@click.option("--context", "kube_context", help="kubeconfig context.")
@click.option("--playbook", default="gpuprov.gpu.site", show_default=True,
              help="Playbook to run: gpuprov.gpu.site, .mig, .kubelet, .mps, .device_plugin, or a path.")
@click.option("-f", "--forks", type=click.IntRange(1, 500), help="Nodes worked on at once (ansible-playbook --forks).")
@options.extra_vars_option
@click.option("-q", "--quiet", is_flag=True, help="Do not print the plan before running.")
@options.output_option(["table", "json"], help_text="table: the plan, progress and a summary for people; json: the "
                       "plan and the per-node result as one JSON document on stdout (progress goes to stderr).")
def apply(inventory, limit, vault, reading, catalog_file, check, diff, waves, wave_max_nodes, max_fail_percentage,
          kubeconfig,
          kube_context, playbook, forks, extra_vars, quiet, output):
    """Converge the nodes of the inventory to their plans.

    First renders and validates every node's plan, exactly as `gpuprov plan` does: on bad
    input nothing runs. Then runs the playbook with ansible-playbook, in waves, printing a
    line per node and step as it goes, and ends with a per-node summary: changed,
    unchanged, failed or unreachable, and what changed.

    `--check --diff` is the dry run: every node reports what would change, and nothing
    on any node changes.

    Exit status: 0 all nodes converged (or, with --check, the dry run completed);
    1 a node failed or was unreachable, or the rollout stopped; 2 bad input.
    """
    try:
        batches = parse_waves(waves)
    except ValueError as exc:
        fail_bad_input(["--waves: %s" % exc])
    # -e values are part of the plan that is printed and validated: what runs is what was shown.
    fleet = load_plans(inventory, limit, vault, extra_vars, catalog_file=catalog_file, reading=reading)
    from gpuprov.planning import parse_extra_vars

    owned = sorted(set(parse_extra_vars(extra_vars)) & set(APPLY_VARS))
    if owned:
        fail_bad_input(["-e %s: set by gpuprov apply itself (%s)" % (name, APPLY_VARS[name]) for name in owned])
    if not fleet.nodes:
        fail_bad_input(["no GPU node in the inventory%s" % (" matching %r" % limit if limit else "")])
    if not quiet and output == "table":
        render.echo(plan_table(fleet.result))
        render.echo("")
        render.echo("%s %d node(s) in waves %s (at most %s at once) ..." % (
            "Dry run on" if check else "Converging", len(fleet.nodes), ",".join(str(b) for b in batches),
            wave_max_nodes or "all"))

    variables = converge_variables(fleet.nodes, batches, wave_max_nodes, max_fail_percentage, catalog_file,
                                   kubeconfig, kube_context)
    extra_args = vault.playbook_args()
    for item in extra_vars:
        extra_args += ["-e", item]
    try:
        rc, summary = run_playbook(playbook, list(inventory), limit=converge_limit(limit, fleet.nodes),
                                   check=check, diff=diff,
                                   extra_vars=variables, forks=forks, extra_args=extra_args,
                                   stdout=sys.stderr if output == "json" else None)
    except FileNotFoundError as exc:
        fail_bad_input([str(exc)])

    nodes = (summary or {}).get("nodes", {})
    not_run = sorted(set(fleet.nodes) - set(nodes)) if nodes else []
    if not_run and output == "table":
        render.echo("  not run (the rollout stopped before their wave): %s" % ", ".join(not_run))
    counts = {}
    for node in nodes.values():
        counts[node["status"]] = counts.get(node["status"], 0) + 1
    bad = counts.get("failed", 0) + counts.get("unreachable", 0)
    if output == "json":
        render.echo(render.to_json({"check_mode": check, "plan": fleet.result, "nodes": nodes, "not_run": not_run,
                                   "summary": dict(sorted(counts.items())), "ansible_rc": rc}))
        raise SystemExit(EXIT_FAILED if rc != 0 or bad or not_run else EXIT_OK)
    render.echo("")
    render.echo("gpuprov apply%s: %s" % (" --check" if check else "", ", ".join(
        "%d %s" % (n, s if not (check and s == "changed") else "would change") for s, n in sorted(counts.items()))
        or "no node ran"))
    if rc != 0 or bad or not_run:
        if rc != 0 and not nodes:
            render.echo("ansible-playbook exited with %d before any node ran" % rc, err=True)
        raise SystemExit(EXIT_FAILED)
    raise SystemExit(EXIT_OK)
