# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Controller side of gpuprov.gpu.node_plan: plan this host with the same planner as
`gpuprov plan`, and, given the node's gpu_facts, say what a converge must change."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.plugins.action import ActionBase

from ansible_collections.gpuprov.gpu.plugins.plugin_utils import live
from ansible_collections.gpuprov.gpu.plugins.plugin_utils import user_catalog
from ansible_collections.gpuprov.gpu.plugins.plugin_utils.intent import parse_intent
from ansible_collections.gpuprov.gpu.plugins.plugin_utils.inventory import VAR_PREFIX, plain
from ansible_collections.gpuprov.gpu.plugins.plugin_utils.planner import Planner

# Forked workers plan independently; within one process identical intents plan once.
_PLANNER = Planner()


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(("gpu_facts", "fail_on_mismatch"))
    _requires_connection = False

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        task_vars = task_vars or {}
        host = task_vars.get("inventory_hostname")
        facts = self._task.args.get("gpu_facts")
        fail_on_mismatch = self._task.args.get("fail_on_mismatch", True)

        variables = {}
        for key in task_vars:
            if key.startswith(VAR_PREFIX) and key not in ("gpuprov_plan", "gpuprov_node_changes"):
                variables[key] = plain(self._templar.template(task_vars[key]))
        # `gpuprov apply --catalog FILE` passes its file for every host (user_catalog.CLI_CATALOG_VAR).
        cli_catalog = variables.pop(user_catalog.CLI_CATALOG_VAR, None)
        user_models = None
        if cli_catalog:
            try:
                user_models = user_catalog.UserCatalog(user_catalog.load_file(cli_catalog))
            except user_catalog.CatalogFileError as exc:
                result.update(failed=True, msg="%s: %s" % (host, "; ".join(exc.problems)))
                return result
        intent, problems = parse_intent(host, variables, task_vars.get("inventory_dir"), user_models=user_models)
        plan = None
        if intent is not None:
            plan, problems = _PLANNER.plan_node(intent)
        if problems:
            result.update(failed=True, problems=[str(p) for p in problems],
                          msg="%s: the inventory's GPU settings do not plan (`gpuprov plan` shows the same): %s"
                          % (host, "; ".join("%s: %s" % (p.field, p.reason) for p in problems)))
            return result

        result["ansible_facts"] = {"gpuprov_plan": plan}
        result["changed"] = False
        if facts is None:
            return result

        models_catalog = user_catalog.for_host(variables, task_vars.get("inventory_dir"), None, user_models)[0]
        mismatch = live.hardware_mismatch(plan, facts, models_catalog)
        if mismatch:
            result["ansible_facts"]["gpuprov_node_changes"] = None
            if fail_on_mismatch:
                result.update(failed=True, msg="%s: GPU hardware does not match the inventory: %s" % (host, mismatch))
            else:
                result["mismatch"] = mismatch
            return result
        mig = live.mig_differences(plan, facts)
        result["ansible_facts"]["gpuprov_node_changes"] = {
            "mig_mode": mig["mode"],
            "mig_pending_reset": mig["pending_reset"],
            "mig_layout": mig["layout"],
            "mig": bool(mig["mode"] or mig["pending_reset"] or mig["layout"]),
        }
        return result
