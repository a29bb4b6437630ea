# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Read gpuprov's variables from an Ansible inventory with Ansible's own machinery.

InventoryManager + VariableManager resolve group_vars, host_vars, inventory plugins and
limit patterns exactly as ansible-playbook does, so a plan never disagrees with a run.

Planning is offline, runs nothing and reads nothing of the machine it runs on, so an
inventory from a repository its reader does not trust can be planned:

* only inventory plugins that read files are enabled (OFFLINE_INVENTORY_PLUGINS): no
  inventory script runs and no cloud inventory is asked;
* a source, or a file in a source folder, that no plugin parses is an error naming it
  (Ansible's ``inventory_unparsed_failed`` and ``inventory_any_unparsed_is_failed``);
* an inventory of more than MAX_HOSTS hosts is refused as its hosts are added, and a host
  range (``node[0:99999999]``) or a ``generator`` layer set that would expand beyond it is
  refused before it is expanded;
* only gpuprov_* variables are rendered; other variables are rendered only when a gpuprov_*
  variable uses them (Ansible's templating is lazy); a value without template syntax is
  taken as it is, without Ansible's templating (which copies every value it walks);
* lookups are held to inventory_lookups: file, env and vars only, files from the
  inventory's folders, environment variables the user allows;
* the whole read has one time budget and each template its own time and memory limits
  (inventory_limits). Ansible's sandboxed Jinja already refuses ``__class__``-style escapes.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import contextlib
import os
import re
import string

from ansible_collections.gpuprov.gpu.plugins.plugin_utils import inventory_limits
from ansible_collections.gpuprov.gpu.plugins.plugin_utils.inventory_limits import (
    BudgetExhausted, MEMORY_PROBLEM, ReadingBudget, TEMPLATE_TIME_PROBLEM, TemplateTimeout)
from ansible_collections.gpuprov.gpu.plugins.plugin_utils.inventory_lookups import (
    LookupPolicy, LookupRecord, RefusedLookup, offline_lookups)

VAR_PREFIX = "gpuprov_"
# Inventory plugins that only read the source file (ansible-doc -t inventory NAME).
OFFLINE_INVENTORY_PLUGINS = ("host_list", "advanced_host_list", "yaml", "ini", "toml", "constructed", "generator")
# The most hosts one inventory may have: ten times the 10,000-node fleet the benchmarks plan.
MAX_HOSTS = 100000
# Variables every inventory host has (ansible/vars/manager.py, inventory/data.py).
_SOURCE_VARS = ("inventory_dir", "inventory_file")


class InventoryError(Exception):
    """Bad inventory input; the message names the source, host or variable."""


class ReadOptions:
    """How an inventory is read: ``time_budget`` seconds for the whole read, and the
    environment variables ``allow_env`` that lookup('env') may read besides ENV_PREFIX*."""

    def __init__(self, time_budget=None, allow_env=()):
        self.time_budget = inventory_limits.DEFAULT_BUDGET_SECONDS if time_budget is None else time_budget
        self.allow_env = tuple(allow_env or ())


class _TooManyHosts(BaseException):
    """Raised from inside an inventory plugin; a BaseException, so the plugin manager does
    not take it for one plugin's failure and try the next."""

    def __init__(self, message):
        super(_TooManyHosts, self).__init__(message)
        self.message = message


_RANGE_RE = re.compile(r"\[([^\]]*)\]")


def _range_size(pattern):
    """How many host names an Ansible host range (``db[01:10:2]-[a:c]``) expands to, counted
    without expanding it; None where Ansible would not read it as a range (it then says why).
    The rules are those of ansible-core's expand_hostname_range (plugins/inventory/__init__.py)."""
    size = 1
    for group in _RANGE_RE.findall(str(pattern)):
        bounds = group.split(":")
        if len(bounds) not in (2, 3):
            return None
        begin, end = bounds[0] or "0", bounds[1]
        step = bounds[2] if len(bounds) == 3 else "1"
        letters = string.ascii_letters
        try:
            if begin in letters and end in letters:
                count = len(letters[letters.index(begin):letters.index(end) + 1:int(step)])
            else:
                first, last, stride = int(begin), int(end), int(step)
                if stride < 1:
                    return None
                # len(range(...)) without building it, and without its C size limit.
                count = max(0, (last - first) // stride + 1)
        except ValueError:
            return None
        size *= count
    return size


@contextlib.contextmanager
def _host_limit(inventory, limit):
    """Refuse more than ``limit`` hosts: counted as they are added, and before a host range or
    a generator inventory expands."""
    import ansible.plugins.inventory as inventory_plugins
    from ansible.plugins.inventory import generator

    data = inventory._inventory
    add_host = data.add_host
    expand = inventory_plugins.expand_hostname_range
    generator_parse = generator.InventoryModule.parse

    def too_many(what):
        return _TooManyHosts("%s; an inventory may have at most %d hosts" % (what, limit))

    def counted_add_host(host, *args, **kwargs):
        if host not in data.hosts and len(data.hosts) >= limit:
            raise too_many("more than %d hosts" % limit)
        return add_host(host, *args, **kwargs)

    def bounded_expand(line=None):
        size = _range_size(line) if line else None
        if size is not None and len(data.hosts) + size > limit:
            raise too_many("host range %r expands to %s hosts" % (str(line)[:100], size))
        return expand(line)

    def bounded_generator_parse(plugin, inventory_data, loader, path, cache=False):
        # The file the plugin is about to read (its _read_config_data), read first to count.
        config = loader.load_from_file(path, cache="none") or {}
        size = 1
        layers = config.get("layers") if isinstance(config, dict) else None
        for values in (layers if isinstance(layers, dict) else {}).values():
            size *= len(values) if hasattr(values, "__len__") else 1
        if len(data.hosts) + size > limit:
            raise too_many("generator %s: its layers make %d hosts" % (path, size))
        return generator_parse(plugin, inventory_data, loader, path, cache=cache)

    data.add_host = counted_add_host
    inventory_plugins.expand_hostname_range = bounded_expand
    generator.InventoryModule.parse = bounded_generator_parse
    try:
        yield
    finally:
        generator.InventoryModule.parse = generator_parse
        inventory_plugins.expand_hostname_range = expand
        del data.add_host


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


@contextlib.contextmanager
def _offline_inventory():
    """Ansible's constants, as ansible-playbook would have them with these settings."""
    from ansible import constants

    saved = dict((name, getattr(constants, name)) for name in
                 ("INVENTORY_ENABLED", "INVENTORY_UNPARSED_IS_FAILED", "INVENTORY_ANY_UNPARSED_IS_FAILED"))
    constants.INVENTORY_ENABLED = list(OFFLINE_INVENTORY_PLUGINS)
    constants.INVENTORY_UNPARSED_IS_FAILED = True
    constants.INVENTORY_ANY_UNPARSED_IS_FAILED = True
    try:
        yield
    finally:
        for name, value in saved.items():
            setattr(constants, name, value)


@contextlib.contextmanager
def _partial_parses(inventory):
    """Collect the yaml/toml plugins' "Skipping ..." warnings with the source being parsed:
    each is a part of a file left out, which must fail the parse, not plan the rest."""
    from ansible.utils.display import Display

    display = Display()
    own = vars(display).get("warning")  # a wrapper the caller set on the instance, if any
    original = display.warning
    found = []

    def watch(msg, *args, **kwargs):
        if str(msg).startswith("Skipping"):
            found.append((getattr(inventory._inventory, "current_source", None) or "?", str(msg)))
        return original(msg, *args, **kwargs)

    display.warning = watch
    try:
        yield found
    finally:
        if own is not None:
            display.warning = own
        else:
            del display.warning


def _behind(exc, kinds):
    """The exception of ``kinds`` behind an Ansible templating error (which wraps what the
    template raised), if there is one."""
    seen = 0
    while exc is not None and seen < 50:
        if isinstance(exc, kinds):
            return exc
        exc = exc.__cause__ or exc.__context__
        seen += 1
    return None


def _refused(exc):
    """The RefusedLookup behind an Ansible templating error, if that is what it is."""
    return _behind(exc, RefusedLookup)


def _one_line(text, limit=400):
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[:limit] + "..."


def _origin_of(exc):
    """'FILE' or 'FILE:LINE' of the first error in the chain that knows where it comes from."""
    try:
        from ansible._internal._datatag._tags import Origin
    except ImportError:  # pragma: no cover - layout of ansible-core 2.19 to 2.21
        return None
    seen = 0
    while exc is not None and seen < 50:
        obj = getattr(exc, "obj", None)
        origin = obj if isinstance(obj, Origin) else (Origin.get_tag(obj) if obj is not None else None)
        if origin is not None and getattr(origin, "path", None):
            line = getattr(origin, "line_num", None)
            return "%s:%d" % (origin.path, line) if line else str(origin.path)
        exc = exc.__cause__ or exc.__context__
        seen += 1
    return None


def _error_text(exc):
    """An Ansible error as one line: its message and the file it points at, nothing more."""
    message = getattr(exc, "message", None) or str(exc)
    source = _origin_of(exc)
    text = _one_line(message)
    return "%s: %s" % (source, text) if source and source not in text else text


class VaultOptions:
    """``--vault-id``, ``--vault-password-file`` and ``--ask-vault-pass``, as ansible-playbook takes them."""

    def __init__(self, vault_ids=(), password_files=(), ask=False):
        self.vault_ids = list(vault_ids or ())
        self.password_files = list(password_files or ())
        self.ask = bool(ask)


def _set_vault(loader, vault):
    """Give the loader, and Ansible's process-wide vault context, exactly these secrets.

    The context is set on every load (empty without vault options), so one process that
    plans twice never decrypts with the secrets of an earlier inventory.
    """
    from ansible.cli import CLI
    from ansible.errors import AnsibleError
    from ansible.parsing.vault import VaultSecretsContext

    secrets = []
    if vault is not None and (vault.vault_ids or vault.password_files or vault.ask):
        for path in vault.password_files:
            if not os.path.exists(path):
                raise InventoryError("--vault-password-file %s: no such file" % path)
        try:
            secrets = CLI.setup_vault_secrets(loader, vault_ids=list(vault.vault_ids),
                                              vault_password_files=list(vault.password_files),
                                              ask_vault_pass=vault.ask, auto_prompt=False, initialize_context=False)
        except AnsibleError as exc:
            raise InventoryError("vault: %s" % _error_text(exc))
        loader.set_vault_secrets(secrets)
    current = VaultSecretsContext.current(optional=True)
    if current is not None:
        current.secrets = secrets
    elif secrets:
        VaultSecretsContext.initialize(VaultSecretsContext(secrets))


class HostVars:
    """One host's gpuprov_* variables, rendered, and the folder its relative paths start from.

    ``roots``: the inventory's folders, the only ones a file the host names may be read from.
    ``looked_up``: {variable: [(lookup, term, value)]} of the file/env lookups its rendering
    used, so that no message about the variable shows what they returned.
    """

    __slots__ = ("host", "variables", "base_dir", "secrets", "problems", "roots", "looked_up")

    def __init__(self, host, variables, base_dir, secrets, problems=(), roots=None, looked_up=None):
        self.host = host
        self.variables = variables
        self.base_dir = base_dir
        self.secrets = secrets
        # [(variable, reason)] for variables that could not be rendered (refused lookups, ...)
        self.problems = list(problems)
        self.roots = roots
        self.looked_up = looked_up or {}


def _encrypted_string_class():
    try:
        from ansible.parsing.vault import EncryptedString
    except ImportError:  # pragma: no cover - every supported ansible-core has it
        return ()
    return EncryptedString


_PLAIN_SCALARS = (bool, int, float, type(None))


def _needs_templating(value, is_template):
    """False when ``value`` is plain data without template syntax (what Ansible's templating
    would give back unchanged); True for a template anywhere in it, or any value that is not
    plain data (a vaulted value, an object Ansible transforms when templating)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if is_template(item):
                return True
        elif isinstance(item, dict):
            for key, inner in item.items():
                if isinstance(key, str) and is_template(key):
                    return True
                stack.append(inner)
        elif isinstance(item, list):
            stack.extend(item)
        elif not isinstance(item, _PLAIN_SCALARS):
            return True
    return False


class _Renderer:
    """Renders hosts' variables inside one read: one template checker, one lookup record."""

    def __init__(self, loader, budget, names=()):
        from ansible.template import Templar

        self.loader = loader
        self.budget = budget
        self.names = frozenset(names)
        self.record = None
        self.is_template = Templar(loader=loader).is_possibly_template
        self.encrypted = _encrypted_string_class()
        # id(value) -> (value, plain(value)): hosts of one group share their group's values
        # (the same objects from Ansible), so each is copied once, and the hosts share the copy.
        self._plain = {}

    def current_record(self):
        return self.record

    def render_host(self, host, all_vars):
        """(rendered, secrets, problems, looked_up) of one host's gpuprov_* variables and
        ``names``; problems are (variable, reason) for what could not be rendered (a refused
        lookup, an undefined variable, a vault secret missing), left out of ``rendered``."""
        from ansible.errors import AnsibleError
        from ansible.template import Templar

        rendered, problems, looked_up = {}, [], {}
        templar = None
        for name in sorted(k for k in all_vars if isinstance(k, str) and (k.startswith(VAR_PREFIX) or k in self.names)):
            value = all_vars[name]
            known = self._plain.get(id(value))
            if known is not None and known[0] is value:
                rendered[name] = known[1]
                continue
            if not _needs_templating(value, self.is_template):
                rendered[name] = plain(value)
                self._plain[id(value)] = (value, rendered[name])
                continue
            if templar is None:
                templar = Templar(loader=self.loader, variables=all_vars)
            record = self.record = LookupRecord()
            self.budget.step("rendering %s: %s" % (host, name))
            try:
                with self.budget.template("%s: %s" % (host, name)):
                    result = plain(templar.template(value))
                if record.refused is not None:
                    problems.append((name, str(record.refused)))
                else:
                    rendered[name] = result
            except TemplateTimeout:
                problems.append((name, TEMPLATE_TIME_PROBLEM))
            except RefusedLookup as exc:
                problems.append((name, str(exc)))
            except AnsibleError as exc:
                problems.append((name, self._render_problem(exc, record)))
            except MemoryError:
                problems.append((name, MEMORY_PROBLEM))
            except (RecursionError, OverflowError):
                problems.append((name, "cannot render: the template expands without bound"))
            finally:
                self.budget.end_template()
                self.record = None
            if record.values:
                looked_up[name] = list(record.values)
        # Every vaulted value the host can see, decrypted only to be kept out of messages.
        secrets = []
        if self.encrypted:
            for value in all_vars.values():
                if isinstance(value, self.encrypted):
                    try:
                        secrets.append(str(value))
                    except Exception:  # no secret for it: then it cannot have been rendered either
                        pass
        return rendered, secrets, problems, looked_up

    @staticmethod
    def _render_problem(exc, record):
        refused = record.refused or _refused(exc)
        if refused is not None:
            return str(refused)
        if _behind(exc, MemoryError) is not None:
            return MEMORY_PROBLEM
        text = _error_text(exc)
        if "vault" in text.lower() and "secret" in text.lower():
            return ("the value is vault-encrypted and no vault secret was given "
                    "(use --vault-password-file, --vault-id or --ask-vault-pass)")
        return "cannot render: %s" % text


def load_inventory(sources, limit=None, vault=None, extra_vars=None, names=(), every_host=False, reading=None):
    """Return ([HostVars], [skipped host names]) for the hosts matching ``limit``.

    Hosts without any gpuprov_ variable are not GPU nodes and come back as skipped, unless
    ``every_host`` is set. ``names``: other variables to render the same offline way (the
    connection variables `gpuprov top` needs, say); no other variable is ever rendered.
    ``sources``: inventory paths (files, folders or comma lists) as ansible -i takes them.
    ``extra_vars``: a dict that overrides every inventory variable, as ansible-playbook -e.
    ``reading``: ReadOptions (the time budget of the whole read, environment variables
    lookups may read).
    Relative paths in a host's variables start from the host's ``inventory_dir`` (the folder
    of the source that defines the host), as the node_plan action resolves them.
    """
    from ansible.parsing.dataloader import DataLoader
    from ansible.inventory.manager import InventoryManager
    from ansible.plugins.loader import init_plugin_loader
    from ansible.utils.collection_loader import AnsibleCollectionConfig

    reading = reading or ReadOptions()
    for source in sources:
        if "," not in source and not os.path.exists(source):
            raise InventoryError("inventory %s: no such file or directory" % source)
    if AnsibleCollectionConfig.collection_finder is None:
        init_plugin_loader()
    loader = DataLoader()
    _set_vault(loader, vault)
    inventory = InventoryManager(loader=loader, sources=list(sources), parse=False)
    policy = LookupPolicy.for_sources(sources, reading.allow_env)
    budget = ReadingBudget(reading.time_budget)
    renderer = _Renderer(loader, budget, names)
    where = ", ".join(sources)
    try:
        # The lookups, plugins and host bound are set up once, outside the budget: the budget
        # is the innermost block, so its alarm is off before anything else is put back.
        with _offline_inventory(), offline_lookups(policy, renderer.current_record), \
                _partial_parses(inventory) as partial, _host_limit(inventory, MAX_HOSTS), budget:
            return _read(inventory, loader, sources, limit, extra_vars, every_host, renderer, partial, policy)
    except BudgetExhausted:
        raise InventoryError("inventory %s: %s" % (where, budget.exhausted_message()))
    except TemplateTimeout:  # a template's alarm that fired on its way out of the template
        raise InventoryError("inventory %s: %s (while %s)" % (where, TEMPLATE_TIME_PROBLEM, budget.where))
    except _TooManyHosts as exc:
        raise InventoryError("inventory %s: %s" % (where, exc.message))


def _read(inventory, loader, sources, limit, extra_vars, every_host, renderer, partial, policy):
    from ansible.errors import AnsibleError
    from ansible.vars.manager import VariableManager

    where = ", ".join(sources)
    try:
        inventory.parse_sources(cache=False)
    except AnsibleError as exc:
        raise InventoryError("inventory %s: %s" % (where, _refused(exc) or _error_text(exc)))
    if partial:
        source, message = partial[0]
        raise InventoryError("inventory %s: %s (the file parsed only in part; fix it or remove what it skips)"
                             % (source, _one_line(message)))
    if not inventory.list_hosts("all"):
        raise InventoryError("inventory %s: no hosts found (check the file parses: ansible-inventory -i %s --list)"
                             % (where, sources[0]))
    variables = VariableManager(loader=loader, inventory=inventory)
    if extra_vars:
        # What ansible-playbook -e sets: the highest precedence, above every inventory value.
        variables._extra_vars = dict(extra_vars)
    try:
        hosts = inventory.get_hosts(limit or "all")
    except AnsibleError as exc:
        raise InventoryError("limit %r: %s" % (limit, _error_text(exc)))
    if limit and not hosts:
        raise InventoryError("limit %r matches no host of the inventory" % limit)

    result, skipped = [], []
    budget = renderer.budget
    for host in hosts:
        budget.step("resolving the variables of %s" % host.name)
        try:
            all_vars = variables.get_vars(host=host, include_hostvars=False, stage="all")
        except AnsibleError as exc:
            # A broken group_vars/host_vars file, or one vault-encrypted without a secret.
            refused = _refused(exc)
            text = str(refused) if refused else _error_text(exc)
            if "vault" in text.lower():
                text += " (use --vault-password-file, --vault-id or --ask-vault-pass)"
            raise InventoryError("%s: variables: %s" % (host.name, text))
        if not every_host and not any(isinstance(k, str) and k.startswith(VAR_PREFIX) for k in all_vars):
            # Not a GPU node (a control-plane host, say): nothing to plan.
            skipped.append(str(host.name))
            continue
        rendered, secrets, problems, looked_up = renderer.render_host(str(host.name), all_vars)
        base_dir = all_vars.get("inventory_dir")
        base_dir = os.path.abspath(str(base_dir)) if base_dir else os.getcwd()
        result.append(HostVars(str(host.name), rendered, base_dir, secrets, problems, policy.roots, looked_up))
    return result, skipped
