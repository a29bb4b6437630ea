"""The working folder's ansible.cfg brings no code into the commands that run no playbook.

Ansible reads one configuration file, the first of: ``ANSIBLE_CONFIG``, ``./ansible.cfg``
(skipped when the folder is world-writable), ``~/.ansible.cfg``, ``/etc/ansible/ansible.cfg``
(ansible-core ``config/manager.py`` ``find_ini_config_file``, the same in 2.19 and 2.21);
environment variables override what the file sets. The runner chooses ``ANSIBLE_CONFIG``,
the environment and the files in its home and /etc; ``./ansible.cfg`` comes with the folder
it runs in, which for ``gpuprov plan`` in CI is a repository from someone else.

So when ``./ansible.cfg`` is the file in effect, the commands that run no playbook (plan,
export, fit, catalog, diagnose, pool, top) refuse, before any code of the collection is
imported, the settings of that file that would make them load or run code, or write a file:

* folders of the plugins an inventory read loads: inventory, vars, lookup, filter, test,
  cache and doc fragment plugins (a lookup plugin named ``file`` there shadows the builtin);
* ``collections_path`` and ``home`` (the default plugin folders are under it): any folder
  beyond Ansible's defaults, except the collections folder of the gpuprov checkout that
  runs (the one it is imported from or was pip-installed from), so that this repository's
  own ansible.cfg plans as before;
* plugins it enables beyond Ansible's builtins: ``vars_plugins_enabled``, ``fact_caching``;
* ``jinja2_extensions`` (Python modules Jinja imports) other than Jinja's own;
* ``vault_password_file`` when the command is given vault options (ansible-core's
  ``CLI.setup_vault_secrets`` then adds it, and runs it when it is executable);
* ``log_path`` (a file Ansible appends to).

Settings that load code only when a playbook runs (modules, module_utils, callbacks,
connection, become and strategy plugins, roles) are left as Ansible reads them: apply and
status run ansible-playbook in this folder, and ansible-playbook trusts its ansible.cfg.
``--trust-ansible-cfg`` accepts everything, for a repository that is yours.
"""
import json
import os

# base.yml setting -> what it would make an offline read load, run or write.
PLUGIN_FOLDERS = {
    "DEFAULT_INVENTORY_PLUGIN_PATH": "inventory", "DEFAULT_VARS_PLUGIN_PATH": "vars",
    "DEFAULT_LOOKUP_PLUGIN_PATH": "lookup", "DEFAULT_FILTER_PLUGIN_PATH": "filter",
    "DEFAULT_TEST_PLUGIN_PATH": "test", "DEFAULT_CACHE_PLUGIN_PATH": "cache",
    "DOC_FRAGMENT_PLUGIN_PATH": "doc_fragments",
}
ENABLED_PLUGINS = {"VARIABLE_PLUGINS_ENABLED": ("vars", ("host_group_vars",)), "CACHE_PLUGIN": ("cache", ("memory",))}
RUNS_OR_WRITES = {"DEFAULT_LOG_PATH": "a log file Ansible writes to"}
# Used only when the command line has vault options.
VAULT_PASSWORD_FILE = "DEFAULT_VAULT_PASSWORD_FILE"
VAULT_OPTIONS = ("--vault-id", "--vault-password-file", "--ask-vault-pass")
COLLECTIONS = "COLLECTIONS_PATHS"
HOME = "ANSIBLE_HOME"
JINJA2_EXTENSIONS = "DEFAULT_JINJA2_EXTENSIONS"
# Settings of code an offline read never loads: only ansible-playbook does (a test holds
# this list and the ones above against every setting of base.yml that names code).
PLAYBOOK_ONLY = frozenset((
    "DEFAULT_ACTION_PLUGIN_PATH", "BECOME_PLUGIN_PATH", "DEFAULT_CALLBACK_PLUGIN_PATH", "DEFAULT_CLICONF_PLUGIN_PATH",
    "DEFAULT_CONNECTION_PLUGIN_PATH", "DEFAULT_HTTPAPI_PLUGIN_PATH", "DEFAULT_MODULE_PATH", "DEFAULT_MODULE_UTILS_PATH",
    "DEFAULT_NETCONF_PLUGIN_PATH", "DEFAULT_STRATEGY_PLUGIN_PATH", "DEFAULT_TERMINAL_PLUGIN_PATH",
    "CALLBACKS_ENABLED", "DEFAULT_STDOUT_CALLBACK", "DEFAULT_STRATEGY", "DEFAULT_TRANSPORT", "DEFAULT_ROLES_PATH",
    "DEFAULT_LOAD_CALLBACK_PLUGINS", "BECOME_PASSWORD_FILE", "CONNECTION_PASSWORD_FILE",
    # the default of ansible-playbook's --vault-id; gpuprov's own --vault-id has none.
    "DEFAULT_VAULT_IDENTITY_LIST",
    # gpuprov sets the inventory plugins itself (inventory.OFFLINE_INVENTORY_PLUGINS).
    "INVENTORY_ENABLED",
))

_CHECKED = {}


def working_folder_config():
    """The working folder's ansible.cfg when it is the file Ansible reads, else None."""
    from ansible.config.manager import find_ini_config_file

    if os.environ.get("ANSIBLE_CONFIG") is not None:
        return None
    found = find_ini_config_file()
    try:
        here = os.path.join(os.getcwd(), "ansible.cfg")
    except OSError:
        return None
    return found if found and os.path.abspath(found) == here else None


def code_settings(trusted_checkouts=None, vault=False):
    """``[FILE: KEY: reason]`` for every setting of the working folder's ansible.cfg that
    would bring code into an offline command; [] when there is none (or the file is not
    in effect). ``vault``: the command has vault options. The answer is kept per file and its
    modification time."""
    path = working_folder_config()
    if path is None:
        return []
    try:
        stamp = (path, os.stat(path).st_mtime_ns, bool(vault),
                 tuple(sorted((k, v) for k, v in os.environ.items() if k.startswith("ANSIBLE_"))))
    except OSError:
        return []
    if stamp not in _CHECKED:
        _CHECKED.clear()
        _CHECKED[stamp] = _problems(path, trusted_checkouts if trusted_checkouts is not None else gpuprov_checkouts(),
                                    vault)
    return list(_CHECKED[stamp])


def use_collection_safely():
    """Set up Ansible's collection loader if nothing has yet, setting the working folder's
    code settings aside first (nothing has opted in to them at this point)."""
    from ansible.utils.collection_loader import AnsibleCollectionConfig

    if AnsibleCollectionConfig.collection_finder is not None:
        return
    from ansible.plugins.loader import init_plugin_loader

    if code_settings():
        set_aside()
    init_plugin_loader()


def set_aside():
    """After a refusal, before anything is printed: point this process's Ansible at the
    runner's collections and no log file (the environment beats the file), so that printing
    the refusal imports gpuprov's own code and writes nothing."""
    from ansible.config.manager import ConfigManager

    manager = ConfigManager(conf_file=working_folder_config() or None)
    home = os.path.expanduser(os.environ.get("ANSIBLE_HOME") or "~/.ansible")
    trusted = _default_paths(manager, COLLECTIONS, home) + [os.path.join(c, "collections") for c in gpuprov_checkouts()]
    if "ANSIBLE_COLLECTIONS_PATH" not in os.environ:
        os.environ["ANSIBLE_COLLECTIONS_PATH"] = os.pathsep.join(trusted)
    if "ANSIBLE_LOG_PATH" not in os.environ:
        os.environ["ANSIBLE_LOG_PATH"] = os.devnull
    os.environ["ANSIBLE_HOME"] = home


def _problems(path, checkouts, vault=False):
    from ansible.config.manager import ConfigManager
    from ansible.errors import AnsibleError

    try:
        manager = ConfigManager(conf_file=path)
    except AnsibleError as exc:
        return ["%s: %s" % (path, exc)]
    problems = []

    def from_file(name):
        try:
            value, origin = manager.get_config_value_and_origin(name)
        except (AnsibleError, ValueError, TypeError):
            return None, False
        return value, origin == path

    def report(name, reason):
        problems.append("%s: %s: %s" % (path, _ini_key(manager, name), reason))

    home, home_from_file = from_file(HOME)
    if home_from_file:
        report(HOME, "moves Ansible's home, under which its default plugin folders are, to %s" % home)
    runner_home = os.path.expanduser(os.environ.get("ANSIBLE_HOME") or "~/.ansible")

    for name, kind in sorted(PLUGIN_FOLDERS.items()):
        value, set_here = from_file(name)
        if set_here:
            extra = _beyond(value, _default_paths(manager, name, runner_home))
            if extra:
                report(name, "adds %s plugin folders (%s) whose code this command would run" % (kind, ", ".join(extra)))

    value, set_here = from_file(COLLECTIONS)
    if set_here:
        allowed = _default_paths(manager, COLLECTIONS, runner_home)
        allowed += [os.path.join(checkout, "collections") for checkout in checkouts]
        extra = _beyond([_collections_root(p) for p in value or []], [_collections_root(p) for p in allowed])
        if extra:
            report(COLLECTIONS, "adds collection folders (%s) whose code this command would import (only the "
                                "collection of the gpuprov that runs, and Ansible's defaults, are used unasked)"
                   % ", ".join(extra))

    for name, (kind, builtins) in sorted(ENABLED_PLUGINS.items()):
        value, set_here = from_file(name)
        names = value if isinstance(value, list) else [value] if value else []
        extra = [str(n).strip() for n in names if str(n).strip() and _short_name(n) not in builtins]
        if set_here and extra:
            report(name, "enables %s plugins other than Ansible's builtin %s (%s)"
                   % (kind, ", ".join(builtins), ", ".join(extra)))

    value, set_here = from_file(JINJA2_EXTENSIONS)
    extra = [str(n) for n in (value or []) if not str(n).strip().startswith("jinja2.ext.")]
    if set_here and extra:
        report(JINJA2_EXTENSIONS, "Python modules Jinja would import (%s)" % ", ".join(extra))

    for name, what in sorted(RUNS_OR_WRITES.items()):
        value, set_here = from_file(name)
        if set_here and value:
            report(name, "%s (%s)" % (what, ", ".join(value) if isinstance(value, list) else value))

    value, set_here = from_file(VAULT_PASSWORD_FILE)
    if vault and set_here and value:
        report(VAULT_PASSWORD_FILE, "a vault password file, which Ansible adds to the vault options given and "
                                    "runs when it is executable (%s)" % value)
    return problems


def _short_name(name):
    name = str(name).strip()
    for prefix in ("ansible.builtin.", "ansible.legacy."):
        if name.startswith(prefix):
            return name[len(prefix):]
    return name


def _ini_key(manager, name):
    """The key of ``name`` in the file ([section] key, or key in [defaults])."""
    definition = manager.get_configuration_definition(name) or {}
    entries = definition.get("ini") or [{}]
    entry = entries[0]
    section = entry.get("section", "defaults")
    key = entry.get("key", name.lower())
    return key if section == "defaults" else "[%s] %s" % (section, key)


def _default_paths(manager, name, home):
    from ansible.config.manager import ensure_type

    definition = manager.get_configuration_definition(name) or {}
    default = manager.template_default(definition.get("default"), {"ANSIBLE_HOME": home})
    try:
        value = ensure_type(default, definition.get("type") or "pathspec")
    except (ValueError, TypeError):
        return []
    return list(value or [])


def _collections_root(path):
    path = os.path.realpath(os.path.expanduser(str(path)))
    return os.path.dirname(path) if os.path.basename(path) == "ansible_collections" else path


def _beyond(paths, allowed):
    """The entries of ``paths`` that are not ``allowed`` and exist (a missing folder loads nothing)."""
    allowed = set(os.path.realpath(os.path.expanduser(str(p))) for p in allowed)
    return [str(p) for p in paths or [] if os.path.exists(os.path.expanduser(str(p)))
            and os.path.realpath(os.path.expanduser(str(p))) not in allowed]


def gpuprov_checkouts():
    """Folders holding the gpuprov that runs: the checkout its package is imported from, and
    the folder pip installed it from (pip's direct_url.json, PEP 610), when they hold the
    collection's source."""
    found = []
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    candidates = [here]
    try:
        from importlib.metadata import PackageNotFoundError, distribution

        text = distribution("gpuprov").read_text("direct_url.json")
        url = json.loads(text).get("url", "") if text else ""
        if url.startswith("file://"):
            from urllib.parse import unquote, urlparse

            candidates.append(unquote(urlparse(url).path))
    except (ImportError, PackageNotFoundError, ValueError, OSError, AttributeError):
        pass
    for folder in candidates:
        galaxy = os.path.join(folder, "collections", "ansible_collections", "gpuprov", "gpu", "galaxy.yml")
        if os.path.isfile(galaxy) and folder not in found:
            found.append(folder)
    return found
