"""The `gpuprov` command line.

Subcommands live in their own modules and are imported only when run, so `gpuprov plan`
does not pay for what `gpuprov diagnose` imports.
"""
import importlib
import io
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


# Commands that run no playbook: they take no code from the working folder's ansible.cfg
# unless told to (gpuprov/ansible_config.py). apply, status and baseline run ansible-playbook
# in this folder, which reads that file as it is.
OFFLINE_COMMANDS = frozenset(("catalog", "diagnose", "export", "fit", "plan", "pool", "top"))


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


def refuse_untrusted_config(name, args):
    """Exit 2 when the working folder's ansible.cfg would bring code into offline command
    ``name``. Checked before the command's module, and so the collection, is imported: the
    file decides where that import comes from. The opt-in flag is therefore looked for in the
    command's arguments before click parses them (it is also a declared option of the command)."""
    from gpuprov import ansible_config, options
    from gpuprov.errors import fail_bad_input

    if name not in OFFLINE_COMMANDS:
        return
    words = list(args)
    if "--" in words:
        words = words[:words.index("--")]
    if options.TRUST_ANSIBLE_CFG in words:
        return
    vault = any(word == option or word.startswith(option + "=") for word in words
                for option in ansible_config.VAULT_OPTIONS)
    problems = ansible_config.code_settings(vault=vault)
    if problems:
        ansible_config.set_aside()
        use_collection()
        fail_bad_input(problems + [
            "gpuprov %s runs no code from the working folder's ansible.cfg, which may come with a repository you do "
            "not trust; nothing was read or run. Pass %s if the repository is yours, or run from another folder."
            % (name, options.TRUST_ANSIBLE_CFG)],
            header="gpuprov: ansible.cfg here brings code:")


class LazyGroup(click.Group):
    def list_commands(self, ctx):
        return sorted(COMMANDS)

    def resolve_command(self, ctx, args):
        if args:
            refuse_untrusted_config(args[0], args[1:])
        return super().resolve_command(ctx, args)

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        """click's main, with click's own messages (usage errors, which quote what was typed)
        printed through render.echo like every other line."""
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        from gpuprov.render import echo

        try:
            result = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except click.ClickException as exc:
            shown = io.StringIO()
            exc.show(file=shown)
            echo(shown.getvalue(), err=True, nl=False)
            sys.exit(exc.exit_code)
        except click.exceptions.Abort:
            echo("Aborted!", err=True)
            sys.exit(1)
        # Commands exit themselves on failure; click returns the code of --help or --version.
        sys.exit(result if isinstance(result, int) and not isinstance(result, bool) else 0)

    def get_command(self, ctx, cmd_name):
        target = COMMANDS.get(cmd_name)
        if target is None:
            return None
        module_name, attr = target.split(":")
        use_collection()
        from gpuprov.render import escape_ansible_output

        escape_ansible_output()
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
        from gpuprov.render import echo

        echo("interrupted", err=True)
        sys.exit(130)
