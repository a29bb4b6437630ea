# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Read gpuprov's variables from an Ansible inventory with Ansible's own machinery.

InventoryManager + VariableManager resolve group_vars, host_vars, inventory plugins and
limit patterns exactly as ansible-playbook does, so a plan never disagrees with a run.

Planning is offline and runs nothing:

* only inventory plugins that read files are enabled (OFFLINE_INVENTORY_PLUGINS): no
  inventory script runs and no cloud inventory is asked;
* a source, or a file in a source folder, that no plugin parses is an error naming it
  (Ansible's ``inventory_unparsed_failed`` and ``inventory_any_unparsed_is_failed``);
* only gpuprov_* variables are rendered; other variables are rendered only when a gpuprov_*
  variable uses them (Ansible's templating is lazy);
* while rendering, lookups other than ALLOWED_LOOKUPS are refused before their plugin is
  even loaded (``pipe``, ``lines``, ``url``, ``password`` ... run programs, reach the network
  or write files). Ansible's sandboxed Jinja already refuses ``__class__``-style escapes.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import contextlib
import os
import signal
import threading
import time

VAR_PREFIX = "gpuprov_"
# Read-only lookups a plan may use: a file's content, an environment variable, a variable.
ALLOWED_LOOKUPS = ("file", "env", "vars")
# Inventory plugins that only read the source file (ansible-doc -t inventory NAME).
OFFLINE_INVENTORY_PLUGINS = ("host_list", "advanced_host_list", "yaml", "ini", "toml", "constructed", "generator")
# Rendering one variable, or parsing the inventory, may take this long (a template such as
# `{% for i in range(10**9) %}` would otherwise never end); real ones take milliseconds.
RENDER_SECONDS = 5
PARSE_SECONDS = 60
# ... and may grow the process by this much: `{{ 'x' * 10**10 }}` asks for 10 GB at once, and a
# few concatenations of a 1 GB string would fill the controller's memory well within 5 s.
RENDER_MEMORY_BYTES = 512 * 1024 * 1024
_MEMORY_PROBLEM = "cannot render: the template needs more than %d MiB of memory" % (RENDER_MEMORY_BYTES // (1024 * 1024))
# Variables every inventory host has (ansible/vars/manager.py, inventory/data.py).
_SOURCE_VARS = ("inventory_dir", "inventory_file")


class InventoryError(Exception):
    """Bad inventory input; the message names the source, host or variable."""


class RefusedLookup(Exception):
    def __init__(self, name):
        self.name = name
        super(RefusedLookup, self).__init__(
            "lookup %r is not allowed while planning (it may run a program, reach the network or write a file); "
            "plans may use only the %s lookups" % (name, ", ".join(ALLOWED_LOOKUPS)))


class RenderTimeout(BaseException):
    """Raised by the time budget's alarm. A BaseException, so no `except Exception` in the
    templating code on the way can swallow it."""


@contextlib.contextmanager
def time_budget(seconds):
    """Interrupt the block after ``seconds`` with RenderTimeout (main thread only, where
    Python delivers signals; elsewhere the block runs unbounded). An alarm set by the caller
    is put back, less the time spent here."""
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "setitimer"):
        yield
        return

    def expire(signum, frame):
        raise RenderTimeout()

    started = time.monotonic()
    previous_handler = signal.signal(signal.SIGALRM, expire)
    previous_timer = signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous_handler)
        if previous_timer[0] > 0:
            left = previous_timer[0] - (time.monotonic() - started)
            signal.setitimer(signal.ITIMER_REAL, max(left, 0.001), previous_timer[1])


def _address_space_bytes():
    """This process's virtual memory size (Linux /proc/self/statm, first field, in pages), or
    None where it cannot be read."""
    try:
        with open("/proc/self/statm") as handle:
            return int(handle.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError, AttributeError):
        return None


@contextlib.contextmanager
def memory_budget(extra_bytes):
    """Let the block grow the process's address space by ``extra_bytes`` at most: an allocation
    beyond raises MemoryError (RLIMIT_AS, soft limit only, put back afterwards). Where the limit
    cannot be set (no resource module, no /proc, a hard limit already lower) the block runs with
    the limits it has."""
    try:
        import resource
    except ImportError:
        resource = None
    current = _address_space_bytes()
    if resource is None or current is None:
        yield
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    wanted = current + extra_bytes
    if (hard != resource.RLIM_INFINITY and wanted > hard) or (soft != resource.RLIM_INFINITY and wanted > soft):
        yield
        return
    resource.setrlimit(resource.RLIMIT_AS, (wanted, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


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


def lookup_allowed(name):
    """True for an allowed lookup, by short name or as ansible.builtin.NAME/ansible.legacy.NAME."""
    name = str(name)
    for prefix in ("ansible.builtin.", "ansible.legacy."):
        if name.startswith(prefix):
            name = name[len(prefix):]
    return name in ALLOWED_LOOKUPS


@contextlib.contextmanager
def offline_lookups():
    """Refuse every lookup but ALLOWED_LOOKUPS while the block runs.

    Every lookup()/query() in a template is resolved through ``lookup_loader.get`` (ansible
    _internal/_templating/_jinja_plugins.py ``_invoke_lookup``); the guard answers before a
    refused plugin is loaded, and checks that an allowed short name resolved to the builtin.
    """
    from ansible.plugins.loader import lookup_loader

    original = lookup_loader.get

    def guarded(name, *args, **kwargs):
        if not lookup_allowed(name):
            raise RefusedLookup(name)
        plugin = original(name, *args, **kwargs)
        resolved = getattr(plugin, "ansible_name", None) if plugin is not None else None
        if resolved is not None and not str(resolved).startswith("ansible.builtin."):
            raise RefusedLookup(resolved)
        return plugin

    lookup_loader.get = guarded
    try:
        yield
    finally:
        del lookup_loader.get


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
    """One host's gpuprov_* variables, rendered, and the folder its relative paths start from."""

    __slots__ = ("host", "variables", "base_dir", "secrets", "problems")

    def __init__(self, host, variables, base_dir, secrets, problems=()):
        self.host = host
        self.variables = variables
        self.base_dir = base_dir
        self.secrets = secrets
        # [(variable, reason)] for variables that could not be rendered (refused lookups, ...)
        self.problems = list(problems)


def _is_vaulted(value):
    try:
        from ansible.parsing.vault import EncryptedString
    except ImportError:  # pragma: no cover - every supported ansible-core has it
        return False
    return isinstance(value, EncryptedString)


def render_host(host, all_vars, loader, names=()):
    """Render ``host``'s gpuprov_* variables (and ``names``, when the host sets them) with
    lookups restricted.

    Returns (rendered, secrets, problems): problems are (variable, reason) for variables
    that could not be rendered (a refused lookup, an undefined variable, a vault secret
    missing); those are left out of ``rendered``.
    """
    from ansible.errors import AnsibleError
    from ansible.template import Templar

    mine = dict((k, v) for k, v in all_vars.items()
                if isinstance(k, str) and (k.startswith(VAR_PREFIX) or k in names))
    templar = Templar(loader=loader, variables=all_vars)
    rendered, secrets, problems = {}, [], []
    for name in sorted(mine):
        value = mine[name]
        try:
            with time_budget(RENDER_SECONDS), memory_budget(RENDER_MEMORY_BYTES), offline_lookups():
                result = templar.template(value)
                rendered[name] = plain(result)
        except RenderTimeout:
            problems.append((name, "cannot render: the template ran longer than %d s" % RENDER_SECONDS))
        except RefusedLookup as exc:
            problems.append((name, str(exc)))
        except AnsibleError as exc:
            refused = _refused(exc)
            text = _error_text(exc)
            if refused is not None:
                problems.append((name, str(refused)))
            elif _behind(exc, MemoryError) is not None:
                problems.append((name, _MEMORY_PROBLEM))
            elif "vault" in text.lower() and "secret" in text.lower():
                problems.append((name, "the value is vault-encrypted and no vault secret was given "
                                       "(use --vault-password-file, --vault-id or --ask-vault-pass)"))
            else:
                problems.append((name, "cannot render: %s" % text))
        except MemoryError:
            problems.append((name, _MEMORY_PROBLEM))
        except (RecursionError, OverflowError):
            problems.append((name, "cannot render: the template expands without bound"))
    # Every vaulted value the host can see, decrypted only to be kept out of messages.
    for value in all_vars.values():
        if _is_vaulted(value):
            try:
                secrets.append(str(value))
            except Exception:  # no secret for it: then it cannot have been rendered either
                pass
    return rendered, secrets, problems


def load_inventory(sources, limit=None, vault=None, extra_vars=None, names=(), every_host=False):
    """Return ([HostVars], [skipped host names]) for the hosts matching ``limit``.

    Hosts without any gpuprov_ variable are not GPU nodes and come back as skipped, unless
    ``every_host`` is set. ``names``: other variables to render the same offline way (the
    connection variables `gpuprov top` needs, say); no other variable is ever rendered.
    ``sources``: inventory paths (files, folders or comma lists) as ansible -i takes them.
    ``extra_vars``: a dict that overrides every inventory variable, as ansible-playbook -e.
    Relative paths in a host's variables start from the host's ``inventory_dir`` (the folder
    of the source that defines the host), as the node_plan action resolves them.
    """
    from ansible.errors import AnsibleError
    from ansible.parsing.dataloader import DataLoader
    from ansible.inventory.manager import InventoryManager
    from ansible.plugins.loader import init_plugin_loader
    from ansible.utils.collection_loader import AnsibleCollectionConfig
    from ansible.vars.manager import VariableManager

    for source in sources:
        if "," not in source and not os.path.exists(source):
            raise InventoryError("inventory %s: no such file or directory" % source)
    if AnsibleCollectionConfig.collection_finder is None:
        init_plugin_loader()
    loader = DataLoader()
    _set_vault(loader, vault)
    inventory = InventoryManager(loader=loader, sources=list(sources), parse=False)
    try:
        with time_budget(PARSE_SECONDS), _offline_inventory(), offline_lookups(), _partial_parses(inventory) as partial:
            inventory.parse_sources(cache=False)
        if partial:
            source, message = partial[0]
            raise InventoryError("inventory %s: %s (the file parsed only in part; fix it or remove what it skips)"
                                 % (source, _one_line(message)))
    except RenderTimeout:
        raise InventoryError("inventory %s: parsing ran longer than %d s" % (", ".join(sources), PARSE_SECONDS))
    except AnsibleError as exc:
        refused = _refused(exc)
        raise InventoryError("inventory %s: %s" % (", ".join(sources), refused or _error_text(exc)))
    if not inventory.list_hosts("all"):
        raise InventoryError("inventory %s: no hosts found (check the file parses: ansible-inventory -i %s --list)"
                             % (", ".join(sources), sources[0]))
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
    for host in hosts:
        try:
            with offline_lookups():
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
        rendered, secrets, problems = render_host(str(host.name), all_vars, loader, names)
        base_dir = all_vars.get("inventory_dir")
        base_dir = os.path.abspath(str(base_dir)) if base_dir else os.getcwd()
        result.append(HostVars(str(host.name), rendered, base_dir, secrets, problems))
    return result, skipped


def load_host_vars(sources, limit=None):
    """Compatibility: ([(host, {gpuprov_* vars})], [skipped hosts], base folder of the first source)."""
    hosts, skipped = load_inventory(sources, limit)
    for host in hosts:
        for name, reason in host.problems:
            raise InventoryError("%s: %s: %s" % (host.host, name, reason))
    first = os.path.abspath(sources[0]) if sources and os.path.exists(sources[0]) else os.getcwd()
    base_dir = first if os.path.isdir(first) else os.path.dirname(first)
    return [(h.host, h.variables) for h in hosts], skipped, base_dir
