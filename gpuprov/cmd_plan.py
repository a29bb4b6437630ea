"""`gpuprov plan`: render and validate every node's plan, offline."""
import click

from gpuprov import options, render
from gpuprov.plan_table import plan_table
from gpuprov.planning import load_plans


@click.command()
@options.inventory_options
@options.reading_options
@options.catalog_option
@options.output_option(["table", "yaml", "json"],
                       help_text="table for people; json/yaml for tools (see the JSON contract in the README).")
@options.trust_ansible_cfg_option
def plan(inventory, limit, vault, reading, catalog_file, output):
    """Render and validate every node's plan from the inventory, offline.

    Reads the inventory with Ansible's own InventoryManager (group_vars, host_vars and
    patterns work as in ansible-playbook), checks every node's gpuprov_* variables, and
    plans each node: MIG layout with placements, device-plugin config and label,
    advertised resources, MPS and kubelet settings, and the ordered disruptive steps a
    converge may take. Nothing is contacted and nothing changes.

    Exit status: 0 when every node plans; 2 on bad input, with every problem listed as
    `HOST: FIELD: reason`.
    """
    fleet = load_plans(inventory, limit, vault, catalog_file=catalog_file, reading=reading)
    render.emit(fleet.result, output, plan_table)
