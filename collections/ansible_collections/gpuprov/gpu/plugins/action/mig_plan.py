# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Controller side of gpuprov.gpu.mig_plan: plan a node's MIG from plain inputs (no gpuprov
inventory) with the same planner as `gpuprov plan`, and check the node's GPUs against them."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

from ansible.errors import AnsibleError
from ansible.plugins.action import ActionBase

from ansible_collections.gpuprov.gpu.plugins.plugin_utils import plain_inputs

_INPUTS = ("gpu_model", "gpu_count", "devices", "config", "config_file")


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(_INPUTS + ("gpu_facts", "variable_names"))
    _requires_connection = False

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        task_vars = task_vars or {}
        host = task_vars.get("inventory_hostname")
        args = self._task.args
        names = args.get("variable_names") or {}
        unknown = sorted(set(names) - set(_INPUTS))
        if not isinstance(names, dict) or unknown:
            result.update(failed=True, msg="%s: variable_names: keys must be among %s" % (host, ", ".join(_INPUTS)))
            return result

        config_file = args.get("config_file")
        if config_file is not None and not os.path.isabs(str(config_file)):
            # Like the copy and template modules: the role's and the playbook's files/ folders.
            try:
                config_file = self._find_needle("files", str(config_file))
            except AnsibleError:
                pass  # the planner reports "file not found" under the variable's name

        plan, problems = plain_inputs.plan_mig(
            host, args.get("gpu_model"), args.get("gpu_count"), devices=args.get("devices"),
            config=args.get("config"), config_file=config_file, names=names)
        if problems:
            result.update(failed=True, problems=["%s: %s" % (host, line) for line in problems],
                          msg="%s: the MIG inputs do not plan (nothing was changed): %s" % (host, "; ".join(problems)))
            return result

        result.update(changed=False, plan=plan)
        facts = args.get("gpu_facts")
        if facts is not None:
            problem = plain_inputs.hardware_problem(plan, facts, names)
            if problem:
                result.update(failed=True, problems=["%s: %s" % (host, problem)],
                              msg="%s: %s (nothing was changed)" % (host, problem))
        return result
