"""Inventory -> validated plans: the glue every command that needs plans shares."""
import time

from ansible_collections.gpuprov.gpu.plugins.plugin_utils import intent as intent_mod
from ansible_collections.gpuprov.gpu.plugins.plugin_utils import inventory as inventory_mod
from ansible_collections.gpuprov.gpu.plugins.plugin_utils import planner


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


def plan_inventory(sources, limit=None, catalog_file=None):
    """Read the inventory with Ansible's InventoryManager and plan every GPU node.

    Raises inventory_mod.InventoryError for an unreadable inventory and PlanningFailed with
    every problem found (not only the first) for bad GPU settings.
    """
    started = time.monotonic()
    user_models = load_user_catalog(catalog_file)
    host_vars, skipped, base_dir = inventory_mod.load_host_vars(sources, limit)
    intents, problems = [], []
    file_cache = {}
    for host, variables in host_vars:
        node_intent, node_problems = intent_mod.parse_intent(host, variables, base_dir, file_cache, user_models)
        problems.extend(node_problems)
        if node_intent is not None:
            intents.append(node_intent)
    result, plan_problems = planner.plan_fleet(intents)
    problems.extend(plan_problems)
    if problems:
        # Inventory order, so each host's problems read together whatever step found them.
        order = dict((host, i) for i, (host, _vars) in enumerate(host_vars))
        problems.sort(key=lambda p: order.get(p.host, len(order)))
        raise PlanningFailed([str(p) for p in problems])
    result["skipped_hosts"] = skipped
    return FleetPlan(result, skipped, time.monotonic() - started)
