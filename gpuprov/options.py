"""Options every gpuprov command shares, defined once so they mean the same everywhere.

* ``-i/--inventory`` (repeatable) and ``-l/--limit``: as ansible-playbook takes them.
* ``--vault-id``, ``--vault-password-file``, ``--ask-vault-pass``: as ansible-playbook takes
  them, on every command that reads an inventory; the command receives one ``vault``
  argument (an ``inventory.VaultOptions``) and passes the same options on to ansible-playbook.
* ``-o/--output FORMAT``: the format of what the command prints (table, json, yaml...);
  every command that prints results offers json. Folders are ``--output-dir``.
* ``--catalog FILE``: GPU models added to the built-in catalog, on every command that plans
  or looks models up (plan, export, apply, status, fit, catalog).
* ``--time-budget SECONDS`` and ``--allow-env NAME``: how an inventory is read in-process
  (plan, export, apply, status, top); the command receives one ``reading`` argument.
* ``--trust-ansible-cfg``: on the commands that run no playbook, let the working folder's
  ansible.cfg bring plugins and collections (see gpuprov/ansible_config.py).
"""
import functools

import click

inventory_option = click.option(
    "-i", "--inventory", "inventory", multiple=True, required=True, metavar="INVENTORY",
    help="Ansible inventory (file, folder or comma-separated host list), as for ansible-playbook -i. Repeatable.")

limit_option = click.option(
    "-l", "--limit", metavar="PATTERN",
    help="Only these hosts (an Ansible host pattern, e.g. 'gpu_a100:!gpu-a100-02').")

extra_vars_option = click.option(
    "-e", "--extra-vars", "extra_vars", multiple=True, metavar="KEY=VALUE|@FILE|JSON",
    help="Extra variables, as ansible-playbook -e. gpuprov_* variables given here are part of the plan "
         "that is printed and validated. Repeatable.")

catalog_option = click.option(
    "--catalog", "catalog_file", type=click.Path(dir_okay=False), metavar="FILE",
    help="A YAML file of GPU models to add to the built-in catalog (as gpuprov_catalog_file does per host).")

# For commands that run a playbook without planning (baseline): the items go to ansible-playbook as given.
playbook_extra_vars_option = click.option(
    "-e", "--extra-vars", "extra_vars", multiple=True, metavar="KEY=VALUE|@FILE|JSON",
    help="Passed to ansible-playbook -e (e.g. gpuprov_baseline_dir). Repeatable.")


class Seconds(click.ParamType):
    """A positive number of seconds up to ``maximum``, written in ASCII digits."""

    name = "seconds"

    def __init__(self, maximum):
        self.maximum = maximum

    def convert(self, value, param, ctx):
        from ansible_collections.gpuprov.gpu.plugins.module_utils.decimal_text import parse_decimal

        try:
            seconds = value if isinstance(value, (int, float)) else parse_decimal(str(value), "seconds")
        except ValueError as exc:
            self.fail(str(exc), param, ctx)
        if not 0 < seconds <= self.maximum:
            self.fail("must be above 0 and at most %g seconds, got %r" % (self.maximum, value), param, ctx)
        return seconds


class Reading:
    """How the inventory is read in-process: the time budget of the whole read and the
    environment variables lookup('env') may read besides GPUPROV_*."""

    def __init__(self, time_budget=None, allow_env=()):
        self.time_budget = time_budget
        self.allow_env = tuple(allow_env or ())

    def reader_options(self):
        from ansible_collections.gpuprov.gpu.plugins.plugin_utils.inventory import ReadOptions

        return ReadOptions(self.time_budget, self.allow_env)


def reading_options(command):
    """Add --time-budget and --allow-env; the command gets ``reading``."""

    @functools.wraps(command)
    def wrapper(*args, **kwargs):
        kwargs["reading"] = Reading(kwargs.pop("time_budget"), kwargs.pop("allow_env"))
        return command(*args, **kwargs)

    from ansible_collections.gpuprov.gpu.plugins.plugin_utils import inventory_limits

    wrapper = click.option(
        "--allow-env", "allow_env", multiple=True, metavar="NAME",
        help="An environment variable the inventory's lookup('env') may read (besides GPUPROV_*). Repeatable.")(wrapper)
    wrapper = click.option(
        "--time-budget", "time_budget", type=Seconds(inventory_limits.MAX_BUDGET_SECONDS), metavar="SECONDS",
        help="Time the whole inventory read may take, templates included (default %d s)."
             % inventory_limits.DEFAULT_BUDGET_SECONDS)(wrapper)
    return wrapper


# Read by the command group before the command's module is imported (gpuprov/cli.py): the
# working folder's ansible.cfg decides which collection code an import loads.
TRUST_ANSIBLE_CFG = "--trust-ansible-cfg"

trust_ansible_cfg_option = click.option(
    TRUST_ANSIBLE_CFG, "trust_ansible_cfg", is_flag=True, expose_value=False,
    help="Use the plugin and collection settings of ./ansible.cfg too (they bring code the command would run); "
         "without it they are refused, as the repository may not be yours.")


class Vault:
    """The vault options as given: for the inventory reader and for ansible-playbook."""

    def __init__(self, vault_ids=(), password_files=(), ask=False):
        self.vault_ids = tuple(vault_ids or ())
        self.password_files = tuple(password_files or ())
        self.ask = bool(ask)

    def reader_options(self):
        from ansible_collections.gpuprov.gpu.plugins.plugin_utils.inventory import VaultOptions

        return VaultOptions(self.vault_ids, self.password_files, self.ask)

    def prompts(self):
        """Whether a vault password is asked for on the terminal (--ask-vault-pass, --vault-id ID@prompt)."""
        # Ansible reads --vault-id as LABEL@SOURCE, or SOURCE alone; the source "prompt" asks.
        return self.ask or any(vault_id.split("@", 1)[-1] in ("prompt", "prompt_ask_vault_pass")
                               for vault_id in self.vault_ids)

    def playbook_args(self):
        """The same options for ansible-playbook (argv items; no secret is on the command line)."""
        args = []
        for vault_id in self.vault_ids:
            args += ["--vault-id", vault_id]
        for path in self.password_files:
            args += ["--vault-password-file", path]
        if self.ask:
            args.append("--ask-vault-pass")
        return args


def vault_options(command):
    """Add --vault-id, --vault-password-file and --ask-vault-pass; the command gets ``vault``."""

    @functools.wraps(command)
    def wrapper(*args, **kwargs):
        kwargs["vault"] = Vault(kwargs.pop("vault_ids"), kwargs.pop("vault_password_files"),
                                kwargs.pop("ask_vault_pass"))
        return command(*args, **kwargs)

    wrapper = click.option("--ask-vault-pass", "ask_vault_pass", is_flag=True,
                           help="Ask for the vault password (as ansible-playbook --ask-vault-pass).")(wrapper)
    wrapper = click.option("--vault-password-file", "vault_password_files", multiple=True, metavar="FILE",
                           type=click.Path(dir_okay=False),
                           help="File (or executable) with the vault password. Repeatable.")(wrapper)
    wrapper = click.option("--vault-id", "vault_ids", multiple=True, metavar="ID@SOURCE",
                           help="Vault identity, as ansible-playbook --vault-id (e.g. prod@prompt). Repeatable.")(wrapper)
    return wrapper


def inventory_options(command):
    """-i, -l and the vault options, in that order in --help."""
    return inventory_option(limit_option(vault_options(command)))


def output_option(formats, default="table", help_text=None):
    """-o/--output FORMAT with ``formats`` (json always among them)."""
    if "json" not in formats:
        raise ValueError("every command that prints results offers json")
    return click.option("-o", "--output", type=click.Choice(list(formats)), default=default, show_default=True,
                        help=help_text or "Output format: table for people, json/yaml for tools.")
