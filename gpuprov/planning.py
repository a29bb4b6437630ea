"""Inventory -> validated plans: the glue every command that needs plans shares."""
import re
import time

from ansible_collections.gpuprov.gpu.plugins.plugin_utils import intent as intent_mod
from ansible_collections.gpuprov.gpu.plugins.plugin_utils import inventory as inventory_mod
from ansible_collections.gpuprov.gpu.plugins.plugin_utils import planner
from ansible_collections.gpuprov.gpu.plugins.plugin_utils import safe_files
from gpuprov.errors import fail_bad_input


class ExtraVarsError(ValueError):
    """An -e item that does not read as variables; the message names the item."""


def parse_extra_vars(items):
    """ansible-playbook -e items (KEY=VALUE ..., @FILE, or a YAML/JSON mapping) -> one dict.

    Later items win, as in ansible-playbook (ansible/utils/vars.py load_extra_vars). Files
    are read with the same bounds as every other input file.
    """
    from ansible.parsing.splitter import parse_kv

    result = {}
    for item in items or ():
        text = str(item)
        if text.startswith("@"):
            try:
                data = safe_files.load(text[1:])
            except safe_files.FileInputError as exc:
                raise ExtraVarsError("-e %s: %s" % (text, exc.reason))
            where = text
        elif text.lstrip().startswith(("{", "[")):
            try:
                data = safe_files.parse_yaml(text, "-e")
            except safe_files.FileInputError as exc:
                raise ExtraVarsError("-e %s" % exc.reason)
            where = "-e"
        else:
            try:
                data = parse_kv(text)
            except Exception as exc:  # ansible raises AnsibleParserError and friends
                raise ExtraVarsError("-e %r: %s" % (text[:80], exc))
            if "_raw_params" in data:
                raise ExtraVarsError("-e %r: expected KEY=VALUE, @FILE or a YAML/JSON mapping" % text[:80])
            where = "-e"
        if data is None:
            continue
        if not isinstance(data, dict) or not all(isinstance(k, str) for k in data):
            raise ExtraVarsError("%s: extra vars must be a mapping of variable names to values" % where)
        result.update(data)
    return result


class PlanningFailed(Exception):
    """Bad input: ``problems`` holds one `HOST: FIELD: reason` line each."""

    def __init__(self, problems):
        self.problems = problems
        super().__init__("%d problem(s) in the inventory" % len(problems))


class FleetPlan:
    def __init__(self, result, skipped, seconds):
        self.result = result
        self.skipped = skipped
        self.seconds = seconds

    @property
    def nodes(self):
        return self.result["nodes"]


def load_user_catalog(path):
    """The --catalog file as a UserCatalog (None without one); PlanningFailed on a bad file."""
    if path is None:
        return None
    from ansible_collections.gpuprov.gpu.plugins.plugin_utils import user_catalog

    try:
        return user_catalog.UserCatalog(user_catalog.load_file(path))
    except user_catalog.CatalogFileError as exc:
        raise PlanningFailed(exc.problems)


def plan_inventory(sources, limit=None, vault=None, extra_vars=None, catalog_file=None, reading=None):
    """Read the inventory with Ansible's InventoryManager and plan every GPU node.

    ``vault``: inventory_mod.VaultOptions; ``extra_vars``: variables that override the
    inventory's, as ansible-playbook -e does (so `apply -e` plans what it runs);
    ``reading``: inventory_mod.ReadOptions.
    Raises inventory_mod.InventoryError for an unreadable inventory and PlanningFailed with
    every problem found (not only the first) for bad GPU settings.
    """
    started = time.monotonic()
    user_models = load_user_catalog(catalog_file)
    hosts, skipped = inventory_mod.load_inventory(sources, limit, vault=vault, extra_vars=extra_vars,
                                                  reading=reading)
    intents, problems = [], []
    file_cache = {}
    intents_cache = intent_mod.IntentCache()
    secrets = []
    for host_vars in hosts:
        secrets.extend(host_vars.secrets)
        if host_vars.problems:
            # A variable that could not be rendered: the host's other checks would only
            # repeat it ("gpuprov_gpu_model: required"), so its render problems stand alone.
            problems.extend(intent_mod.Problem(host_vars.host, name, reason) for name, reason in host_vars.problems)
            continue
        node_intent, node_problems = intents_cache.parse(host_vars.host, host_vars.variables, host_vars.base_dir,
                                                         file_cache, user_models, host_vars.roots)
        problems.extend(node_problems)
        if node_intent is not None:
            intents.append(node_intent)
    result, plan_problems = planner.plan_fleet(intents)
    problems.extend(plan_problems)
    if problems:
        # Inventory order, so each host's problems read together whatever step found them.
        order = dict((h.host, i) for i, h in enumerate(hosts))
        problems.sort(key=lambda p: order.get(p.host, len(order)))
        looked_up = dict((h.host, h.looked_up) for h in hosts if h.looked_up)
        for problem in problems:
            hide_looked_up(problem, looked_up.get(problem.host))
        raise PlanningFailed([redact(str(p), secrets) for p in problems])
    result["skipped_hosts"] = skipped
    return FleetPlan(result, skipped, time.monotonic() - started)


# A value as messages quote it: repr() (intent.short), cut or not.
_QUOTED = re.compile(r"""'(?:[^'\\\n]|\\.)*(?:'|\.\.\.\(\d+ characters\))"""
                     r"""|"(?:[^"\\\n]|\\.)*(?:"|\.\.\.\(\d+ characters\))""", re.ASCII)
HIDDEN = "<looked up>"


def hide_looked_up(problem, looked_up):
    """A problem about a variable whose value came from lookup('file') or lookup('env')
    names the lookups and shows no value: every quoted value in the reason, and the
    looked-up text wherever it appears, are left out."""
    if not looked_up:
        return
    field = str(problem.field)
    used = [lookups for name, lookups in looked_up.items()
            if field == name or field.startswith(name + ".") or field.startswith(name + "[")]
    if not used:
        return
    reason = _QUOTED.sub(HIDDEN, str(problem.reason))
    for lookups in used:
        for _, _, value in lookups:
            for text in set((value, value.strip())):
                if len(text) >= 4:
                    reason = reason.replace(text, HIDDEN)
    names = ", ".join(sorted(set("lookup(%r, %r)" % (kind, term[:100]) for lookups in used
                                 for kind, term, _ in lookups)))
    problem.reason = "%s (the value comes from %s and is not shown)" % (reason, names)


def redact(text, secrets):
    """``text`` with every vault-decrypted value replaced: an error never prints a secret."""
    for secret in sorted(set(s for s in secrets if s), key=len, reverse=True):
        text = text.replace(secret, "<vaulted>")
        text = text.replace(repr(secret)[1:-1], "<vaulted>")
    return text


def load_plans(inventory, limit, vault=None, extra_vars=(), catalog_file=None, reading=None):
    """Plans for the inventory, or exit 2 with every problem listed.

    ``vault``: options.Vault; ``extra_vars``: -e items, which override the inventory's
    variables in the plan exactly as they will in the playbook run; ``catalog_file``: --catalog;
    ``reading``: options.Reading (time budget, environment variables lookups may read).
    """
    try:
        variables = parse_extra_vars(extra_vars)
        return plan_inventory(list(inventory), limit, vault=vault.reader_options() if vault else None,
                              extra_vars=variables, catalog_file=catalog_file,
                              reading=reading.reader_options() if reading else None)
    except ExtraVarsError as exc:
        fail_bad_input([exc])
    except inventory_mod.InventoryError as exc:
        fail_bad_input([exc])
    except PlanningFailed as exc:
        fail_bad_input(exc.problems, header="gpuprov: %d problem(s); nothing was planned or changed:"
                       % len(exc.problems))
