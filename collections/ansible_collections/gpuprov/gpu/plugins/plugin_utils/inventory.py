# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Read gpuprov's variables from an Ansible inventory with Ansible's own machinery.

InventoryManager + VariableManager resolve group_vars, host_vars, inventory plugins and
limit patterns exactly as ansible-playbook does, so a plan never disagrees with a run.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

VAR_PREFIX = "gpuprov_"


class InventoryError(Exception):
    pass


def plain(value):
    """Ansible 2.19 wraps inventory values in tagged subclasses; plans want plain data."""
    if isinstance(value, dict):
        return dict((str(k), plain(v)) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, str):
        return str(value)
    return value


def _needs_templating(value):
    if isinstance(value, str):
        return "{{" in value or "{%" in value
    if isinstance(value, dict):
        return any(_needs_templating(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return any(_needs_templating(v) for v in value)
    return False


def load_host_vars(sources, limit=None):
    """Return ([(host, {gpuprov_* vars})], [skipped hosts], base_dir) for hosts matching ``limit``.

    Hosts without any gpuprov_ variable are not GPU nodes and come back as skipped.

    ``sources``: inventory paths (files, folders or comma lists) as ansible -i takes them.
    Variables that hold Jinja templates are rendered with the host's variables.
    """
    from ansible.errors import AnsibleError
    from ansible.parsing.dataloader import DataLoader
    from ansible.inventory.manager import InventoryManager
    from ansible.plugins.loader import init_plugin_loader
    from ansible.vars.manager import VariableManager

    for source in sources:
        if "," not in source and not os.path.exists(source):
            raise InventoryError("inventory %s: no such file or directory" % source)
    from ansible.utils.collection_loader import AnsibleCollectionConfig

    if AnsibleCollectionConfig.collection_finder is None:
        init_plugin_loader()
    loader = DataLoader()
    try:
        inventory = InventoryManager(loader=loader, sources=list(sources), parse=True)
    except AnsibleError as exc:
        raise InventoryError("inventory %s: %s" % (", ".join(sources), exc))
    if not inventory.list_hosts("all"):
        raise InventoryError("inventory %s: no hosts found (check the file parses: ansible-inventory -i %s --list)"
                             % (", ".join(sources), sources[0]))
    variables = VariableManager(loader=loader, inventory=inventory)
    try:
        hosts = inventory.get_hosts(limit or "all")
    except AnsibleError as exc:
        raise InventoryError("limit %r: %s" % (limit, exc))
    if limit and not hosts:
        raise InventoryError("limit %r matches no host of the inventory" % limit)

    result, skipped = [], []
    for host in hosts:
        all_vars = variables.get_vars(host=host, include_hostvars=False, stage="all")
        mine = dict((k, v) for k, v in all_vars.items() if k.startswith(VAR_PREFIX))
        if not mine:
            # Not a GPU node (a control-plane host, say): nothing to plan.
            skipped.append(str(host.name))
            continue
        if _needs_templating(mine):
            from ansible.template import Templar
            templar = Templar(loader=loader, variables=all_vars)
            try:
                mine = dict((k, templar.template(v)) for k, v in mine.items())
            except AnsibleError as exc:
                raise InventoryError("host %s: cannot render gpuprov variables: %s" % (host.name, exc))
        result.append((str(host.name), plain(mine)))
    first = os.path.abspath(sources[0]) if sources and os.path.exists(sources[0]) else os.getcwd()
    base_dir = first if os.path.isdir(first) else os.path.dirname(first)
    return result, skipped, base_dir
