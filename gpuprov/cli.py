"""The `gpuprov` command line.

Subcommands live in their own modules and are imported only when run, so `gpuprov plan`
does not pay for what `gpuprov diagnose` imports.
"""
import importlib
import sys

import click

from gpuprov import __version__

# name -> "module:attribute" of a click.Command. Keep sorted.
COMMANDS = {
    "apply": "gpuprov.cmd_apply:apply",
    "baseline": "gpuprov.cmd_baseline:baseline",
    "catalog": "gpuprov.cmd_catalog:catalog",
    "diagnose": "gpuprov.cmd_diagnose:diagnose",
    "export": "gpuprov.cmd_export:export",
    "fit": "gpuprov.cmd_fit:fit",
    "plan": "gpuprov.cmd_plan:plan",
    "pool": "gpuprov.cmd_pool:pool",
    "status": "gpuprov.cmd_status:status",
    "top": "gpuprov.cmd_top:top",
    "trial": "gpuprov.cmd_trial:trial",
}


def use_collection():
    """Let `ansible_collections.gpuprov.gpu` imports resolve as Ansible resolves them.

    Ansible's collection loader reads ansible.cfg (collections_path) and scans sys.path, so
    the CLI uses the same copy of the collection that ansible-playbook would: the one in
    this repository when run from it, the pip-installed one elsewhere.
    """
    from ansible.plugins.loader import init_plugin_loader
    from ansible.utils.collection_loader import AnsibleCollectionConfig

    if AnsibleCollectionConfig.collection_finder is None:
        init_plugin_loader()


class LazyGroup(click.Group):
    def list_commands(self, ctx):
        return sorted(COMMANDS)

    def get_command(self, ctx, cmd_name):
        target = COMMANDS.get(cmd_name)
        if target is None:
            return None
        module_name, attr = target.split(":")
        use_collection()
        return getattr(importlib.import_module(module_name), attr)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="gpuprov")
def cli():
    """Plan and converge GPU sharing across a Kubernetes fleet.

    gpuprov reads an Ansible inventory that says which GPUs each node has and how they
    should be shared (exclusive, time-slicing, MPS, MIG, MIG + time-slicing), and turns it
    into a per-node plan: MIG geometry with placements, device-plugin config, node labels,
    advertised resources, kubelet CPU/topology settings, and the disruptive steps needed.

    \b
    Typical use:
      gpuprov catalog                      GPU models and their MIG profiles
      gpuprov plan -i inventory.yml        validate and show every node's plan
      gpuprov apply -i inventory.yml --check --diff   dry run on the nodes
    """


def main(argv=None):
    try:
        cli.main(args=argv, prog_name="gpuprov", standalone_mode=True)
    except KeyboardInterrupt:
        click.echo("interrupted", err=True)
        sys.exit(130)
